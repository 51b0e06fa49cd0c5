// Load: an open- or closed-loop publisher for `jetcheck load --client nats.js`. See ../PROTOCOL.md, "Load".
//
// The schedule, the pipelined publishes (js.publish() promises, at most max_inflight outstanding) and their acks run
// here; jetcheck starts and stops a run and receives every operation's times in batches (one record per batch_ms).

import { Kvm } from "@nats-io/kv";
import { headers } from "@nats-io/transport-node";

const SLOTS = 6; // intended_ns, sent_ns, acked_ns, stream_seq, error (0: ok, else 1 + index in errors), err_code
const DEFAULT_BATCH_MS = 50;
const DRAIN_TIMEOUT_MS = 10_000;
const NEVER = 1n << 62n;
const OVERFLOW = "Overflow";
const UNACKED = "Unacknowledged";
const STAMP_TS = "Jc-Ts";
const CONSUMED = 0n; // consume rows: op, started_ns, ended_ns, stream_seq, delivered, e2e_ns, subject, size, error, err_code
const FETCHED = 1n;
const NO_E2E = -1n;
const KV_PUT = 0n; // kv rows: op, key, intended_ns, sent_ns, done_ns, revision, error, err_code
const KV_GET = 1n;
const CONSUME_EXPIRES_MS = 1000; // the shortest pull expiry nats.js accepts
const REQUEST_TIMEOUT_MS = 10_000; // one increment, or each answered message of a batch

// load_stop's at_ns, or now when it is null or later
function stopTime(atNs) {
  const now = wallNs();
  return atNs !== null && atNs !== undefined && BigInt(atNs) < now ? BigInt(atNs) : now;
}

// [error class, JetStream error code or 0] of a failed operation
const errorOf = (err) => [err?.constructor?.name ?? "Error", typeof err?.code === "number" ? err.code : 0];
// The op log's clock is wall-clock ns (Python's time.time_ns()): the wall clock read once at microsecond precision,
// advanced by the monotonic clock.
const ANCHOR_NS = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n - process.hrtime.bigint();
const wallNs = () => ANCHOR_NS + process.hrtime.bigint();

export function loadHandlers({ sessionOf, need, send, RequestError }) {
  const runs = new Map(); // sub id -> LoadRun | ConsumeRun

  // A run's rows (int64s, a fixed number per operation) and error classes until the next flush (one record).
  class RowLog {
    constructor(sub, batchMs) {
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
      send({ type: "load", sub: this.sub, rows_b64: raw.toString("base64"), errors, ...this.extra() });
    }
  }

  // A run on a schedule: open loop (rate > 0) calls due(index, intended, now) for each operation as soon as it falls
  // due, never waiting for earlier ones; closed loop (rate 0) calls closed() once.
  class ScheduledRun extends RowLog {
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
  }

  // a run whose rows are publishes answered by an ack: intended, sent and acked times, the stored sequence
  class AckedRun extends ScheduledRun {
    record(intended, sent, acked, seq, errorClass, code) {
      this.counts.ops++;
      if (errorClass === "") this.counts.acked++;
      else if (errorClass === OVERFLOW) this.counts.overflow++;
      else this.counts.failed++;
      this.rows.push(intended, sent, acked, seq, BigInt(this.errorNo(errorClass)), BigInt(code));
    }
  }

  class LoadRun extends AckedRun {
    constructor(sub, session, req) {
      super(sub, req.batch_ms);
      this.js = session.js;
      this.subject = need(req, "subject", "string");
      this.payload = new Uint8Array(need(req, "payload_size", "number")).fill(120);
      this.rate = need(req, "rate", "number");
      this.maxInflight = need(req, "max_inflight", "number");
      this.stamp = req.stamp === true;
      if (this.maxInflight < 1 || this.rate < 0) throw new RequestError("invalid", "load_publish needs max_inflight >= 1, rate >= 0");
      this.stopAt = NEVER;
      this.pending = new Set(); // publishes in flight: {intended, sent}
      this.counts = { ops: 0, acked: 0, overflow: 0, failed: 0 };
      this.seq = 0;
      this.timer = null;
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

  // Consume: fetch + explicit ack on a durable pull consumer until the stop; one row per message and per fetch.
  class ConsumeRun extends RowLog {
    constructor(sub, session, consumer, req) {
      super(sub, req.batch_ms);
      this.nc = session.nc;
      this.consumer = consumer;
      this.batch = need(req, "batch", "number");
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

  // KV: put then get of the same key, as nats-py's KvUser; rows: op, key, intended, sent, done, revision, error, code.
  class KvRun extends ScheduledRun {
    constructor(sub, kv, req) {
      super(sub, req.batch_ms);
      this.kv = kv;
      this.keys = need(req, "keys", "object");
      this.payload = new Uint8Array(need(req, "payload_size", "number")).fill(120);
      this.rate = need(req, "rate", "number");
      this.maxInflight = need(req, "max_inflight", "number");
      if (this.maxInflight < 1 || this.rate < 0 || this.keys.length === 0) {
        throw new RequestError("invalid", "load_kv needs keys, max_inflight >= 1, rate >= 0");
      }
      this.stopAt = NEVER;
      this.inflight = new Set(); // promises of the operations in flight
      this.lastPut = -1; // the key whose put was acknowledged last
      this.counts = { ops: 0, ok: 0, overflow: 0, failed: 0 };
      this.timer = null;
    }

    due(index, intended, now) {
      if (this.inflight.size >= this.maxInflight) {
        this.record(KV_PUT, Math.floor(index / 2) % this.keys.length, intended, now, now, 0n, OVERFLOW, 0);
      } else {
        const op = this.one(index, intended);
        this.inflight.add(op);
        op.finally(() => this.inflight.delete(op));
      }
    }

    async closed() {
      for (let index = 0, now = wallNs(); now < this.stopAt; index++, now = wallNs()) await this.one(index, now);
    }

    // even operations put key index/2, odd ones get the key whose put was acknowledged last
    async one(index, intended) {
      let op = KV_PUT;
      let key = Math.floor(index / 2) % this.keys.length;
      if (index % 2 === 1 && this.lastPut >= 0) [op, key] = [KV_GET, this.lastPut];
      const sent = wallNs();
      try {
        let revision;
        if (op === KV_PUT) {
          revision = await this.kv.put(this.keys[key], this.payload);
          this.lastPut = key;
        } else {
          const entry = await this.kv.get(this.keys[key]);
          revision = entry?.revision ?? 0;
        }
        this.record(op, key, intended, sent, wallNs(), BigInt(revision), "", 0);
      } catch (err) {
        this.record(op, key, intended, sent, wallNs(), 0n, ...errorOf(err));
      }
    }

    record(op, key, intended, sent, done, revision, errorClass, code) {
      this.counts.ops++;
      if (errorClass === "") this.counts.ok++;
      else if (errorClass === OVERFLOW) this.counts.overflow++;
      else this.counts.failed++;
      this.rows.push(op, BigInt(key), intended, sent, done, revision, BigInt(this.errorNo(errorClass)), BigInt(code));
    }

    // the schedule ends at the stop; the operations in flight finish (within the client's request timeout), logged
    async stop(atNs) {
      this.stopSchedule(atNs);
      await this.loop;
      await Promise.allSettled([...this.inflight]);
      clearInterval(this.flusher);
      this.flush();
      return this.counts;
    }
  }

  // Counter increments (ADR-49) and atomic batches (ADR-50), as nats-py's CounterPublisher and BatchPublisher: each
  // operation (send(), resolving to its stream sequence) waits for its answer; scheduled as KvRun; rows as LoadRun's.
  class RequestRun extends AckedRun {
    constructor(sub, req, send) {
      super(sub, req.batch_ms);
      this.send = send;
      this.rate = need(req, "rate", "number");
      this.maxInflight = need(req, "max_inflight", "number");
      if (this.maxInflight < 1 || this.rate < 0) {
        throw new RequestError("invalid", `${req.op} needs max_inflight >= 1, rate >= 0`);
      }
      this.stopAt = NEVER;
      this.inflight = new Set(); // promises of the operations in flight
      this.counts = { ops: 0, acked: 0, overflow: 0, failed: 0 };
      this.timer = null;
    }

    due(_index, intended, now) {
      if (this.inflight.size >= this.maxInflight) this.record(intended, now, now, 0n, OVERFLOW, 0);
      else {
        const op = this.one(intended);
        this.inflight.add(op);
        op.finally(() => this.inflight.delete(op));
      }
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

    // the schedule ends at the stop; the operations in flight finish (within REQUEST_TIMEOUT_MS) and are logged
    async stop(atNs) {
      this.stopSchedule(atNs);
      await this.loop;
      await Promise.allSettled([...this.inflight]);
      clearInterval(this.flusher);
      this.flush();
      return this.counts;
    }
  }

  // an increment: js.publish() with the header Nats-Incr: +1 (nats.js has no counter API), acked with the new total
  function counterSend(js, subject) {
    return async () => {
      const h = headers();
      h.set("Nats-Incr", "+1");
      const ack = await js.publish(subject, undefined, { headers: h, timeout: REQUEST_TIMEOUT_MS });
      return BigInt(ack.seq);
    };
  }

  // a batch of `size` messages through @nats-io/jetstream's own batch API: js.startBatch() (the first message,
  // answered), batch.add() (unanswered), batch.commit() (answered with the batch's PubAck)
  function batchSend(js, subject, size, payload) {
    return async () => {
      const batch = await js.startBatch(subject, payload, { timeout: REQUEST_TIMEOUT_MS });
      for (let n = 2; n < size; n++) batch.add(subject, payload);
      const ack = await batch.commit(subject, payload, { timeout: REQUEST_TIMEOUT_MS });
      return BigInt(ack.seq);
    };
  }

  // a new run under load sub req.sub (refused when it exists), made by make(sub) and started
  async function begin(req, make) {
    const sub = need(req, "sub", "string");
    if (runs.has(sub)) throw new RequestError("invalid", `load sub ${JSON.stringify(sub)} exists`);
    const run = await make(sub);
    runs.set(sub, run);
    return { started_ns: Number(run.start()) };
  }

  return {
    load_kv: (req) =>
      begin(req, async (sub) => {
        const kv = await new Kvm(sessionOf(req).js).open(need(req, "bucket", "string"));
        return new KvRun(sub, kv, req);
      }),

    load_consume: (req) =>
      begin(req, async (sub) => {
        const session = sessionOf(req);
        const consumer = await session.js.consumers.get(need(req, "stream", "string"), need(req, "durable", "string"));
        const run = new ConsumeRun(sub, session, consumer, req);
        if (run.batch < 1) throw new RequestError("invalid", "load_consume needs batch >= 1");
        return run;
      }),

    load_counter: (req) =>
      begin(req, async (sub) => new RequestRun(sub, req, counterSend(sessionOf(req).js, need(req, "subject", "string")))),

    load_batch: (req) =>
      begin(req, async (sub) => {
        const js = sessionOf(req).js;
        const size = need(req, "batch_size", "number");
        if (size < 2) throw new RequestError("invalid", "load_batch needs batch_size >= 2");
        if (typeof js.startBatch !== "function") {
          throw new RequestError("unsupported", "this @nats-io/jetstream has no js.startBatch() (atomic batch publish)");
        }
        const payload = new Uint8Array(need(req, "payload_size", "number")).fill(120);
        return new RequestRun(sub, req, batchSend(js, need(req, "subject", "string"), size, payload));
      }),

    load_publish: (req) => begin(req, async (sub) => new LoadRun(sub, sessionOf(req), req)),

    async load_stop(req) {
      const sub = need(req, "sub", "string");
      const run = runs.get(sub);
      if (!run) throw new RequestError("invalid", `no load sub ${JSON.stringify(sub)}`);
      runs.delete(sub);
      return await run.stop(req.at_ns);
    },
  };
}
