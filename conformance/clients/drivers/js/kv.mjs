// v2: KV (ADR-8) through @nats-io/kv (../PROTOCOL.md "v2: KV"): a session opens each bucket once and keeps it.

import { Kvm } from "@nats-io/kv";

import { kvMore } from "./kvmore.mjs";
import { prefix } from "./prefix.mjs";

export function kvEntry(e) {
  return {
    bucket: e.bucket,
    key: e.key,
    value_b64: Buffer.from(e.value ?? new Uint8Array()).toString("base64"),
    revision: e.revision,
    operation: e.operation ?? "PUT",
    created: e.created instanceof Date ? e.created.toISOString() : null,
  };
}

const valueOf = (req) => new Uint8Array(Buffer.from(req.value_b64 ?? "", "base64"));

// The KV ops, and kvOf (the bucket a request names, opened on its session) for the watch ops.
export function kvHandlers({ sessionOf, need, ms, mode, RequestError }) {
  async function kvOf(req) {
    const session = sessionOf(req);
    const bucket = need(req, "bucket", "string");
    session.kvs ??= new Map();
    let kv = session.kvs.get(bucket);
    if (!kv) {
      kv = await new Kvm(session.js).open(bucket);
      session.kvs.set(bucket, kv);
    }
    return kv;
  }

  const handlers = {
    async kv_create(req) {
      const session = sessionOf(req);
      const bucket = need(req, "bucket", "string");
      const options = {};
      if (req.history !== null && req.history !== undefined) options.history = req.history;
      if (req.ttl_s !== null && req.ttl_s !== undefined) options.ttl = ms(req.ttl_s);
      Object.assign(options, kvMore.bucketOptions(req, ms));
      const kv = await new Kvm(session.js).create(bucket, options);
      session.kvs ??= new Map();
      session.kvs.set(bucket, kv);
      return {};
    },
    async kv_put(req) {
      if (mode("kv-prefix-ignored")) return prefix.putUnprefixed(sessionOf(req), req, need, valueOf);
      return { revision: await (await kvOf(req)).put(need(req, "key", "string"), valueOf(req)) };
    },
    async kv_create_key(req) {
      return { revision: await (await kvOf(req)).create(need(req, "key", "string"), valueOf(req), kvMore.keyTtl(req)) };
    },
    async kv_update(req) {
      const kv = await kvOf(req);
      return { revision: await kv.update(need(req, "key", "string"), valueOf(req), need(req, "last", "number")) };
    },
    async kv_get(req) {
      const key = need(req, "key", "string");
      const entry = await (await kvOf(req)).get(key);
      // @nats-io/kv documents get() as null for a key never written; a deleted one comes back as its DEL/PURGE entry
      if (entry === null) throw new RequestError("not_found", `KvBucket.get(${JSON.stringify(key)}) returned null`);
      return { entry: kvMore.shown(kvEntry(entry)) };
    },
    async kv_delete(req) {
      await (await kvOf(req)).delete(need(req, "key", "string"));
      return {};
    },
    async kv_purge(req) {
      await (await kvOf(req)).purge(need(req, "key", "string"), kvMore.purgeOptions(req));
      return {};
    },
    async kv_keys(req) {
      const keys = [];
      for await (const key of await (await kvOf(req)).keys(kvMore.filters(req))) keys.push(key);
      return { keys };
    },
    async kv_status(req) {
      const status = await (await kvOf(req)).status();
      return {
        bucket: status.bucket, values: status.values, history: status.history, ttl_s: status.ttl / 1000,
        limit_marker_ttl_s: (status.markerTTL ?? 0) / 1000, // KvStatus.markerTTL (ms), ADR-48 LimitMarkerTTL
      };
    },
    async kv_history(req) {
      const entries = [];
      const kv = await kvOf(req);
      for await (const e of await kv.history({ key: need(req, "key", "string") })) entries.push(kvEntry(e));
      return { entries };
    },
  };
  return { kvOf, handlers };
}
