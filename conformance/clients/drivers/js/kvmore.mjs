// ADR-48 (KV limit markers and per-key TTLs) and ADR-8's key filters and bucket management through @nats-io/kv.
// See ../PROTOCOL.md, "v2: KV" (ADR-48, key filters, buckets). driver.mjs's KV handlers take their options here.

import { Kvm } from "@nats-io/kv";

import { requireDeclared } from "./release.mjs";

// misbehave modes for the proofs of the rules below (PROTOCOL.md, "v2: KV")
export const KV_MORE_MODES = ["kv-ttl-ignored", "kv-markers-as-values", "kv-keys-unfiltered", "kv-buckets-misreport"];

let mode = () => false;
const given = (value) => value !== null && value !== undefined;
// @nats-io/kv takes a per-key or purge TTL as a Go duration string (KV.create's markerTTL, KvPurgeOptions.ttl)
const duration = (seconds) => `${seconds}s`;

export const kvMore = {
  // Kvm.create's markerTTL (ms): allow_msg_ttl and subject_delete_marker_ttl on the bucket's stream
  bucketOptions(req, ms) {
    if (!given(req.limit_marker_ttl_s) || mode("kv-ttl-ignored")) return {};
    requireDeclared("@nats-io/kv", "KvOptions", "markerTTL");
    return { markerTTL: ms(req.limit_marker_ttl_s) };
  },
  keyTtl(req) {
    if (!given(req.key_ttl_s) || mode("kv-ttl-ignored")) return undefined;
    requireDeclared("@nats-io/kv", "KV", /\bcreate\([^)]*,[^)]*,[^)]*\)/, "create(k, data, markerTTL)");
    return duration(req.key_ttl_s);
  },
  purgeOptions(req) {
    if (!given(req.key_ttl_s) || mode("kv-ttl-ignored")) return undefined;
    requireDeclared("@nats-io/kv", "KvPurgeOptions", "ttl");
    return { ttl: duration(req.key_ttl_s) };
  },
  // KV.keys(filter?: string | string[])
  filters(req) {
    const filters = Array.isArray(req.filters) ? req.filters : [];
    if (!filters.length || mode("kv-keys-unfiltered")) return undefined;
    return filters.length === 1 ? filters[0] : filters;
  },
  // an entry as the driver hands it over: kv-markers-as-values reports every marker as a PUT
  shown(record) {
    return mode("kv-markers-as-values") ? { ...record, operation: "PUT" } : record;
  },
  handlers({ sessionOf, need, mode: modeOf }) {
    mode = modeOf;
    return {
      // KV.destroy() (kv-buckets-misreport: answered without calling it)
      async kv_delete_bucket(req) {
        const session = sessionOf(req);
        const bucket = need(req, "bucket", "string");
        if (mode("kv-buckets-misreport")) return {};
        const kv = await new Kvm(session.js).open(bucket);
        session.kvs?.delete(bucket);
        await kv.destroy();
        return {};
      },
      // Kvm.list(): the client's bucket statuses (it has no names-only lister), their bucket names
      async kv_bucket_names(req) {
        const session = sessionOf(req);
        const names = [];
        for await (const status of new Kvm(session.js).list()) {
          names.push(mode("kv-buckets-misreport") ? `KV_${status.bucket}` : status.bucket);
        }
        return { names };
      },
    };
  },
};
