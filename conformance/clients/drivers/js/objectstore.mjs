// Object store ops (protocol v2, ../PROTOCOL.md "v2: object store") over @nats-io/obj: obj_create, obj_put,
// obj_get, obj_info, obj_list, obj_delete. Arguments arrive under "obj"; infos leave as ADR-20 ObjectInfo JSON.

import { Objm } from "@nats-io/obj";
import { headers } from "@nats-io/transport-node";

// misbehave modes: seal-ignored answers obj_seal without sealing; status-misreport (statusJson) misreports obj_status
export const OBJECT_STORE_MODES = ["seal-ignored", "status-misreport"];

export class ObjectStoreError extends Error {
  constructor(message, kind = "not_found") {
    super(message);
    this.kind = kind;
  }
}

// @nats-io/obj rejects with plain Errors: the ones the protocol has kinds for, by the client's own words.
const KINDS = [
  [/^an object already exists with that name/, "exists"],
  [/digests do not match/, "digest_mismatch"],
];

async function classified(promise) {
  try {
    return await promise;
  } catch (err) {
    const found = KINDS.find(([pattern]) => pattern.test(err?.message ?? ""));
    if (found) throw new ObjectStoreError(`${err.constructor?.name ?? "Error"}: ${err.message}`, found[1]);
    throw err;
  }
}

const INFO_FIELDS = ["name", "description", "headers", "options", "bucket", "nuid", "size", "mtime", "chunks", "digest", "deleted", "metadata"];

// An ObjectInfoImpl keeps the raw info behind getters: copy the ADR-20 fields out as plain JSON.
export function infoJson(info) {
  const out = {};
  for (const key of INFO_FIELDS) {
    const value = info[key];
    // headers: an ObjectInfoImpl hands out a MsgHdrs, whose record is ADR-20's {name: [values]}
    if (value !== undefined) out[key] = typeof value?.toRecord === "function" ? value.toRecord() : value;
  }
  return out;
}

// ObjectStoreStatus as the protocol's obj_status answer (ADR-20's fields; ttl is in nanoseconds); `misreport` (a
// misbehave mode) reports size 0 and no backing store.
function statusJson(status, misreport) {
  return {
    bucket: status.bucket,
    description: status.description,
    ttl_s: Number(status.ttl ?? 0) / 1e9,
    storage: status.storage,
    replicas: status.replicas,
    sealed: status.sealed,
    size: misreport ? 0 : status.size,
    backing_store: misreport ? "" : status.backingStore,
    metadata: status.metadata ?? null,
    compressed: status.compression,
  };
}

// The JS client answers a missing object with null (get, info), not an error.
function found(value, what) {
  if (value === null || value === undefined) throw new ObjectStoreError(`the client returned null for ${what}`);
  return value;
}

export function objectStoreHandlers(sessionOf, need, mode = () => false) {
  const stores = new Map(); // `${session id}/${bucket}` -> ObjectStore

  async function storeOf(req, create = false) {
    const session = sessionOf(req);
    const args = need(req, "obj", "object");
    const bucket = need(args, "bucket", "string");
    const key = `${session.id}/${bucket}`;
    if (create || !stores.has(key)) stores.set(key, await new Objm(session.js).create(bucket));
    return { store: stores.get(key), args };
  }

  return {
    async obj_create(req) {
      await storeOf(req, true);
      return {};
    },

    async obj_put(req) {
      const { store, args } = await storeOf(req);
      const name = need(args, "name", "string");
      const data = Buffer.from(args.data_b64 ?? "", "base64");
      const meta = { name };
      if (args.chunk_size) meta.options = { max_chunk_size: args.chunk_size };
      return { info: infoJson(await store.putBlob(meta, new Uint8Array(data))) };
    },

    async obj_get(req) {
      const { store, args } = await storeOf(req);
      const name = need(args, "name", "string");
      const data = found(await classified(store.getBlob(name)), `getBlob(${JSON.stringify(name)})`);
      return { data_b64: Buffer.from(data).toString("base64") };
    },

    // info() has no show-deleted option: it returns a deleted object's info as it is stored.
    async obj_info(req) {
      const { store, args } = await storeOf(req);
      const name = need(args, "name", "string");
      return { info: infoJson(found(await store.info(name), `info(${JSON.stringify(name)})`)) };
    },

    async obj_list(req) {
      const { store } = await storeOf(req);
      return { infos: (await store.list()).map(infoJson) };
    },

    // delete() of a missing object resolves {purged: 0, success: false}: passed on as the client said it.
    async obj_delete(req) {
      const { store, args } = await storeOf(req);
      const result = await store.delete(need(args, "name", "string"));
      return { purged: result.purged, success: result.success };
    },

    async obj_update_meta(req) {
      const { store, args } = await storeOf(req);
      const meta = need(args, "meta", "object");
      const update = { name: meta.name, description: meta.description };
      if (meta.headers && Object.keys(meta.headers).length) {
        update.headers = headers();
        for (const [key, values] of Object.entries(meta.headers)) for (const v of values) update.headers.append(key, v);
      }
      await classified(store.update(need(args, "name", "string"), update));
      return {};
    },

    // link() takes the target's ObjectInfo: read as the client reads it (info() shows a deleted one too).
    async obj_add_link(req) {
      const { store, args } = await storeOf(req);
      const target = need(args, "target", "string");
      const info = found(await store.info(target), `info(${JSON.stringify(target)})`);
      return { info: infoJson(await classified(store.link(need(args, "name", "string"), info))) };
    },

    // seal() resolves the sealed bucket's status; misbehave seal-ignored answers without asking the client to seal.
    async obj_seal(req) {
      const { store } = await storeOf(req);
      if (!mode("seal-ignored")) await store.seal();
      return {};
    },

    async obj_status(req) {
      const { store } = await storeOf(req);
      return { status: statusJson(await store.status(), mode("status-misreport")) };
    },
  };
}
