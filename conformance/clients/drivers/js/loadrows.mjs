// What every load run shares: the op log's clock, its rows and error classes batched into `load` records, and the
// open- or closed-loop schedule. See ../PROTOCOL.md, "Load".
//
// `driver` is what driver.mjs hands the load handlers: { sessionOf, need, send, RequestError }.

export const DEFAULT_BATCH_MS = 50;
export const NEVER = 1n << 62n;
export const OVERFLOW = "Overflow";
export const STAMP_TS = "Jc-Ts";

// The op log's clock is wall-clock ns (Python's time.time_ns()): the wall clock read once at microsecond precision,
// advanced by the monotonic clock.
const ANCHOR_NS = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n - process.hrtime.bigint();
export const wallNs = () => ANCHOR_NS + process.hrtime.bigint();

// load_stop's at_ns, or now when it is null or later
export function stopTime(atNs) {
  const now = wallNs();
  return atNs !== null && atNs !== undefined && BigInt(atNs) < now ? BigInt(atNs) : now;
}

// [error class, JetStream error code or 0] of a failed operation
export const errorOf = (err) => [err?.constructor?.name ?? "Error", typeof err?.code === "number" ? err.code : 0];

// A run's rows (int64s, a fixed number per operation) and error classes until the next flush (one record).
export class RowLog {
  constructor(driver, sub, batchMs) {
    this.driver = driver;
    this.sub = sub;
    this.batchMs = batchMs > 0 ? batchMs : DEFAULT_BATCH_MS;
    this.rows = [];
    this.errors = [];
    this.errorIndex = new Map();
  }

  // the 1-based index of errorClass among the run's error classes (0 for "")
  errorNo(errorClass) {
    if (errorClass === "") return 0;
    let errorNo = this.errorIndex.get(errorClass);
    if (errorNo === undefined) {
      this.errors.push(errorClass);
      errorNo = this.errors.length;
      this.errorIndex.set(errorClass, errorNo);
    }
    return errorNo;
  }

  extra() {
    return {};
  }

  flush() {
    if (this.rows.length === 0) return;
    const rows = BigInt64Array.from(this.rows);
    this.rows = [];
    const raw = Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength); // little-endian on every Node target
    const errors = [...this.errors];
    this.driver.send({ type: "load", sub: this.sub, rows_b64: raw.toString("base64"), errors, ...this.extra() });
  }
}

// A run on a schedule: open loop (rate > 0) calls due(index, intended, now) for each operation as soon as it falls
// due, never waiting for earlier ones; closed loop (rate 0) calls closed() once. Each kind of run refuses a rate or
// max_inflight out of range itself, in words naming what else it needs.
export class ScheduledRun extends RowLog {
  constructor(driver, sub, req) {
    super(driver, sub, req.batch_ms);
    this.rate = driver.need(req, "rate", "number");
    this.maxInflight = driver.need(req, "max_inflight", "number");
    this.stopAt = NEVER;
    this.timer = null;
  }

  start() {
    this.started = wallNs();
    this.flusher = setInterval(() => this.flush(), this.batchMs);
    if (this.rate > 0) {
      this.interval = 1e9 / this.rate;
      this.index = 0;
      this.tick();
    } else {
      this.loop = this.closed();
    }
    return this.started;
  }

  intended(index) {
    return this.started + BigInt(Math.round(index * this.interval));
  }

  tick() {
    this.timer = null;
    const now = wallNs();
    for (let intended = this.intended(this.index); intended <= now; intended = this.intended(++this.index)) {
      if (intended >= this.stopAt) return;
      this.due(this.index, intended, now);
    }
    const next = this.intended(this.index);
    if (next >= this.stopAt) return;
    this.timer = setTimeout(() => this.tick(), Math.max(0, Number(next - wallNs()) / 1e6));
  }

  // nothing intended at or after the stop time is started
  stopSchedule(atNs) {
    this.stopAt = stopTime(atNs);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  // for runs that keep each operation's promise in this.inflight until it settles
  track(op) {
    this.inflight.add(op);
    op.finally(() => this.inflight.delete(op));
  }

  // the schedule ends at the stop; the operations in flight finish (within their own timeouts) and are logged
  async stopAfterInflight(atNs) {
    this.stopSchedule(atNs);
    await this.loop;
    await Promise.allSettled([...this.inflight]);
    clearInterval(this.flusher);
    this.flush();
    return this.counts;
  }
}

// a run whose rows are publishes answered by an ack, six int64s each: intended_ns, sent_ns, acked_ns, stream_seq,
// error (0: ok, else 1 + index in errors), err_code
export class AckedRun extends ScheduledRun {
  record(intended, sent, acked, seq, errorClass, code) {
    this.counts.ops++;
    if (errorClass === "") this.counts.acked++;
    else if (errorClass === OVERFLOW) this.counts.overflow++;
    else this.counts.failed++;
    this.rows.push(intended, sent, acked, seq, BigInt(this.errorNo(errorClass)), BigInt(code));
  }
}
