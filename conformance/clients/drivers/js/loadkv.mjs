// load_kv: put then get of the same key, as nats-py's KvUser; rows: op, key, intended, sent, done, revision, error,
// code. See ../PROTOCOL.md, "Load".

import { OVERFLOW, ScheduledRun, errorOf, wallNs } from "./loadrows.mjs";

const KV_PUT = 0n; // kv rows: op, key, intended_ns, sent_ns, done_ns, revision, error, err_code
const KV_GET = 1n;

export class KvRun extends ScheduledRun {
  constructor(driver, sub, kv, req) {
    super(driver, sub, req);
    const { need, RequestError } = driver;
    this.kv = kv;
    this.keys = need(req, "keys", "object");
    this.payload = new Uint8Array(need(req, "payload_size", "number")).fill(120);
    if (this.maxInflight < 1 || this.rate < 0 || this.keys.length === 0) {
      throw new RequestError("invalid", "load_kv needs keys, max_inflight >= 1, rate >= 0");
    }
    this.inflight = new Set(); // promises of the operations in flight
    this.lastPut = -1; // the key whose put was acknowledged last
    this.counts = { ops: 0, ok: 0, overflow: 0, failed: 0 };
  }

  due(index, intended, now) {
    if (this.inflight.size >= this.maxInflight) {
      this.record(KV_PUT, Math.floor(index / 2) % this.keys.length, intended, now, now, 0n, OVERFLOW, 0);
    } else {
      this.track(this.one(index, intended));
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

  // the operations in flight finish within the client's request timeout
  stop(atNs) {
    return this.stopAfterInflight(atNs);
  }
}
