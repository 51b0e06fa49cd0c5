// load_consume: fetch + explicit ack on a durable pull consumer until the stop; one row per message and per fetch.
// See ../PROTOCOL.md, "Load".

import { NEVER, RowLog, STAMP_TS, errorOf, stopTime, wallNs } from "./loadrows.mjs";

const CONSUMED = 0n; // consume rows: op, started_ns, ended_ns, stream_seq, delivered, e2e_ns, subject, size, error, err_code
const FETCHED = 1n;
const NO_E2E = -1n;
const CONSUME_EXPIRES_MS = 1000; // the shortest pull expiry nats.js accepts

export class ConsumeRun extends RowLog {
  constructor(driver, sub, session, consumer, req) {
    super(driver, sub, req.batch_ms);
    this.nc = session.nc;
    this.consumer = consumer;
    this.batch = driver.need(req, "batch", "number");
    this.stopAt = NEVER;
    this.subjects = []; // the subjects consumed so far: a row names one by its 1-based index
    this.subjectIndex = new Map();
    this.counts = { ops: 0, fetches: 0, failed: 0 };
  }

  extra() {
    return { subjects: [...this.subjects] };
  }

  start() {
    this.started = wallNs();
    this.flusher = setInterval(() => this.flush(), this.batchMs);
    this.loop = this.fetchLoop();
    return this.started;
  }

  async fetchLoop() {
    for (let started = wallNs(); started < this.stopAt; started = wallNs()) {
      let count = 0;
      try {
        const messages = await this.consumer.fetch({ max_messages: this.batch, expires: CONSUME_EXPIRES_MS });
        for await (const m of messages) {
          count++;
          this.consumed(m, started, wallNs());
        }
        if (count) this.recordFetch(started, count, "", 0); // an empty fetch that expired is not an operation
      } catch (err) {
        this.recordFetch(started, count, ...errorOf(err));
      }
    }
    await this.nc.flush(); // acks are fire-and-forget publishes: out before load_stop answers
  }

  consumed(m, started, received) {
    const stamp = m.headers?.get(STAMP_TS);
    const e2e = stamp ? received - BigInt(stamp) : NO_E2E;
    let subject = this.subjectIndex.get(m.subject);
    if (subject === undefined) {
      this.subjects.push(m.subject);
      subject = this.subjects.length;
      this.subjectIndex.set(m.subject, subject);
    }
    let failure = ["", 0];
    try {
      m.ack();
    } catch (err) {
      failure = errorOf(err);
    }
    this.counts.ops++;
    if (failure[0]) this.counts.failed++;
    const info = m.info;
    this.rows.push(CONSUMED, started, received, BigInt(info.streamSequence), BigInt(info.deliveryCount), e2e,
      BigInt(subject), BigInt(m.data.length), BigInt(this.errorNo(failure[0])), BigInt(failure[1]));
  }

  recordFetch(started, count, errorClass, code) {
    this.counts.fetches++;
    if (errorClass) this.counts.failed++;
    this.rows.push(FETCHED, started, wallNs(), 0n, 0n, NO_E2E, 0n, BigInt(count), BigInt(this.errorNo(errorClass)),
      BigInt(code));
  }

  // the fetch in progress ends (within its expiry) and still logs and acks what it got
  async stop(atNs) {
    this.stopAt = stopTime(atNs);
    await this.loop;
    clearInterval(this.flusher);
    this.flush();
    return this.counts;
  }
}
