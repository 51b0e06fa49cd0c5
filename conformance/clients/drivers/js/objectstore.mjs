// Object store ops (protocol v2, ../PROTOCOL.md "v2: object store") over @nats-io/obj: obj_create, obj_put,
// obj_get, obj_info, obj_list, obj_delete. Arguments arrive under "obj"; infos leave as ADR-20 ObjectInfo JSON.

import { Objm } from "@nats-io/obj";

export class NotFound extends Error {
  constructor(message) {
    super(message);
    this.kind = "not_found";
  }
}

const INFO_FIELDS = ["name", "description", "headers", "options", "bucket", "nuid", "size", "mtime", "chunks", "digest", "deleted", "metadata"];

// An ObjectInfoImpl keeps the raw info behind getters: copy the ADR-20 fields out as plain JSON.
function infoJson(info) {
  const out = {};
  for (const key of INFO_FIELDS) {
    const value = info[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

// The JS client answers a missing object with null (get, info), not an error.
function found(value, what) {
  if (value === null || value === undefined) throw new NotFound(`the client returned null for ${what}`);
  return value;
}

export function objectStoreHandlers(sessionOf, need) {
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
      const data = found(await store.getBlob(name), `getBlob(${JSON.stringify(name)})`);
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
  };
}
