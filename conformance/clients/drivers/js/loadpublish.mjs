// load_publish: pipelined js.publish() calls (at most max_inflight outstanding), open- or closed-loop, each logged
// with its intended, sent and acked times. See ../PROTOCOL.md, "Load".

import { headers } from "@nats-io/transport-node";

import { AckedRun, OVERFLOW, STAMP_TS, errorOf, wallNs } from "./loadrows.mjs";

const DRAIN_TIMEOUT_MS = 10_000;
const UNACKED = "Unacknowledged";

export class LoadRun extends AckedRun {
  constructor(driver, sub, session, req) {
    super(driver, sub, req);
    const { need, RequestError } = driver;
    this.js = session.js;
    this.subject = need(req, "subject", "string");
    this.payload = new Uint8Array(need(req, "payload_size", "number")).fill(120);
    this.stamp = req.stamp === true;
    if (this.maxInflight < 1 || this.rate < 0) throw new RequestError("invalid", "load_publish needs max_inflight >= 1, rate >= 0");
    this.pending = new Set(); // publishes in flight: {intended, sent}
    this.counts = { ops: 0, acked: 0, overflow: 0, failed: 0 };
    this.seq = 0;
    this.finished = false;
    this.idle = null; // resolves when nothing is in flight after the stop
  }

  // Open loop: an operation due while max_inflight are outstanding is not sent but logged as Overflow.
  due(_index, intended, now) {
    if (this.pending.size >= this.maxInflight) this.record(intended, now, now, 0n, OVERFLOW, 0);
    else this.publish(intended);
  }

  closed() {
    this.fill();
  }

  // Closed loop: keep max_inflight publishes outstanding until the stop.
  fill() {
    while (this.pending.size < this.maxInflight) {
      const now = wallNs();
      if (now >= this.stopAt) return;
      this.publish(now);
    }
  }

  publish(intended) {
    const op = { intended, sent: wallNs() };
    let options;
    if (this.stamp) {
      const h = headers();
      h.set(STAMP_TS, String(op.sent));
      h.set("Jc-Seq", String(++this.seq));
      options = { headers: h };
    }
    this.pending.add(op);
    this.js.publish(this.subject, this.payload, options).then(
      (ack) => this.settled(op, BigInt(ack.seq), "", 0),
      (err) => this.settled(op, 0n, ...errorOf(err)),
    );
  }

  settled(op, seq, errorClass, code) {
    if (!this.pending.delete(op)) return; // given up at the drain deadline: logged already
    this.record(op.intended, op.sent, wallNs(), seq, errorClass, code);
    if (this.pending.size === 0 && this.idle) this.idle();
    else if (this.rate <= 0 && !this.idle) this.fill();
  }

  async stop(atNs) {
    this.stopSchedule(atNs);
    if (this.pending.size) {
      let expire;
      await Promise.race([
        new Promise((resolve) => {
          this.idle = resolve;
        }),
        new Promise((resolve) => {
          expire = setTimeout(resolve, DRAIN_TIMEOUT_MS);
        }),
      ]);
      clearTimeout(expire);
    }
    this.idle = () => {};
    for (const op of [...this.pending]) {
      this.pending.delete(op);
      this.record(op.intended, op.sent, wallNs(), 0n, UNACKED, 0);
    }
    clearInterval(this.flusher);
    this.flush();
    return this.counts;
  }
}
