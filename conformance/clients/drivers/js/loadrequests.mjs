// load_counter and load_batch: counter increments (ADR-49) and atomic batches (ADR-50), as nats-py's
// CounterPublisher and BatchPublisher. See ../PROTOCOL.md, "Load".

import { headers } from "@nats-io/transport-node";

import { AckedRun, OVERFLOW, errorOf, wallNs } from "./loadrows.mjs";

const REQUEST_TIMEOUT_MS = 10_000; // one increment, or each answered message of a batch

// Each operation (send(), resolving to its stream sequence) waits for its answer; scheduled as KvRun; rows as
// LoadRun's.
export class RequestRun extends AckedRun {
  constructor(driver, sub, req, send) {
    super(driver, sub, req);
    this.send = send;
    if (this.maxInflight < 1 || this.rate < 0) {
      throw new driver.RequestError("invalid", `${req.op} needs max_inflight >= 1, rate >= 0`);
    }
    this.inflight = new Set(); // promises of the operations in flight
    this.counts = { ops: 0, acked: 0, overflow: 0, failed: 0 };
  }

  due(_index, intended, now) {
    if (this.inflight.size >= this.maxInflight) this.record(intended, now, now, 0n, OVERFLOW, 0);
    else this.track(this.one(intended));
  }

  async closed() {
    for (let now = wallNs(); now < this.stopAt; now = wallNs()) await this.one(now);
  }

  async one(intended) {
    const sent = wallNs();
    try {
      const seq = await this.send();
      this.record(intended, sent, wallNs(), seq, "", 0);
    } catch (err) {
      this.record(intended, sent, wallNs(), 0n, ...errorOf(err));
    }
  }

  // the operations in flight finish within REQUEST_TIMEOUT_MS
  stop(atNs) {
    return this.stopAfterInflight(atNs);
  }
}

// an increment: js.publish() with the header Nats-Incr: +1 (nats.js has no counter API), acked with the new total
export function counterSend(js, subject) {
  return async () => {
    const h = headers();
    h.set("Nats-Incr", "+1");
    const ack = await js.publish(subject, undefined, { headers: h, timeout: REQUEST_TIMEOUT_MS });
    return BigInt(ack.seq);
  };
}

// a batch of `size` messages through @nats-io/jetstream's own batch API: js.startBatch() (the first message,
// answered), batch.add() (unanswered), batch.commit() (answered with the batch's PubAck)
export function batchSend(js, subject, size, payload) {
  return async () => {
    const batch = await js.startBatch(subject, payload, { timeout: REQUEST_TIMEOUT_MS });
    for (let n = 2; n < size; n++) batch.add(subject, payload);
    const ack = await batch.commit(subject, payload, { timeout: REQUEST_TIMEOUT_MS });
    return BigInt(ack.seq);
  };
}
