// v3: watch (../PROTOCOL.md "v3: watch"): kv_watch over @nats-io/kv `kv.watch()` and obj_watch over @nats-io/obj
// `os.watch()`, streamed in the order the client's iterator yields.
//
// Neither 3.4.0 watcher has an end-of-initial-data marker or an `initializedFn`: each yielded entry/info carries
// `isUpdate` instead. The client computes it from the watcher consumer's num_pending at creation (`count`):
// `isUpdate` starts true when there is nothing to replay (updates only, nothing pending), and otherwise turns true
// on the entry that completes the initial data (`i >= count`). The null record is placed there: first when the
// watcher starts in updates, else right after the first yielded entry the client flags `isUpdate`.

import { KvWatchInclude } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";

import { requireDeclared } from "./release.mjs";

// misbehave modes: watch-no-end-of-data drops the end-of-initial-data record, watch-drop-first the first update;
// for the proof of kv.watch-meta-only, kv-watch-meta-ignored does not pass meta_only to the client, so values arrive
export const WATCH_MODES = ["watch-no-end-of-data", "watch-drop-first", "kv-watch-meta-ignored"];

export function watchHandlers({ sessionOf, need, startSub, forget, kvOf, kvEntry, infoJson, send, monoNs, mode, event, RequestError }) {
  const flag = (args, name) => {
    const value = args[name] ?? false;
    if (typeof value !== "boolean") throw new RequestError("invalid", `"${name}" must be a boolean`);
    return value;
  };

  // The count the client itself took for `isUpdate`: its watcher consumer's cached info (the iterator's `_data`).
  async function startsInUpdates(iter, noReplay) {
    if (noReplay) return true;
    const info = await iter._data.info(true);
    return info.num_pending === 0;
  }

  function follow(sub, iter, field, encode, inUpdates) {
    sub.watch = true; // Sub.startChatty leaves watches alone: no consumption heartbeats to invent
    sub.messages = iter; // Sub.stop() stops it: the client's iter.stop()
    let initialDone = false;
    let updateSeen = false;
    const emit = (payload) => {
      if (!sub.running()) return;
      if (payload === null && mode("watch-no-end-of-data")) return;
      if (payload !== null && !updateSeen) {
        updateSeen = true;
        if (mode("watch-drop-first")) return;
      }
      send({ type: "watch", sub: sub.id, [field]: payload, at_ns: monoNs() });
    };
    if (inUpdates) {
      initialDone = true;
      emit(null);
    }
    (async () => {
      let ended = "the client ended the watch: its iterator finished";
      try {
        for await (const item of iter) {
          emit(encode(item));
          if (!initialDone && item.isUpdate) {
            initialDone = true;
            emit(null);
          }
        }
      } catch (err) {
        ended = `the client ended the watch with ${err?.constructor?.name}: ${err?.message}`;
      }
      if (sub.running()) {
        event(sub.session.id, sub, "terminal", ended);
        sub.stopped = true;
        forget(sub);
      }
    })();
  }

  return {
    async kv_watch(req) {
      const session = sessionOf(req);
      const keys = req.keys ?? [">"];
      if (!Array.isArray(keys) || keys.length === 0 || keys.some((k) => typeof k !== "string")) {
        throw new RequestError("invalid", "kv_watch needs \"keys\": a non-empty list of keys or filters");
      }
      const history = flag(req, "include_history");
      const updatesOnly = flag(req, "updates_only");
      if (history && updatesOnly) {
        throw new RequestError("invalid", "kv.watch() takes one `include` (KvWatchInclude.AllHistory or UpdatesOnly), not both");
      }
      const options = { key: keys.length === 1 ? keys[0] : keys, ignoreDeletes: flag(req, "ignore_deletes") };
      if (history) options.include = KvWatchInclude.AllHistory;
      if (updatesOnly) options.include = KvWatchInclude.UpdatesOnly;
      if (flag(req, "meta_only") && !mode("kv-watch-meta-ignored")) {
        requireDeclared("@nats-io/kv", "KvWatchOptions", "headers_only");
        options.headers_only = true;
      }
      const kv = await kvOf(req);
      return startSub(req, session, async (sub) => {
        const iter = await kv.watch(options);
        follow(sub, iter, "entry", kvEntry, await startsInUpdates(iter, updatesOnly));
        return {};
      });
    },

    async obj_watch(req) {
      const session = sessionOf(req);
      const args = need(req, "obj", "object");
      const bucket = need(args, "bucket", "string");
      if (flag(args, "updates_only")) {
        // its options (obj/lib/types.d.ts): watch(opts?: Partial<{ignoreDeletes?: boolean; includeHistory?: boolean}>)
        throw new RequestError("unsupported", "updates_only: @nats-io/obj ObjectStore.watch() offers only ignoreDeletes and includeHistory");
      }
      if (flag(args, "meta_only")) throw new RequestError("invalid", "obj_watch has no meta_only");
      const includeHistory = flag(args, "include_history");
      const store = await new Objm(session.js).open(bucket);
      return startSub({ op: req.op, sub: args.sub }, session, async (sub) => {
        const iter = await store.watch({ includeHistory, ignoreDeletes: flag(args, "ignore_deletes") });
        // Without includeHistory the client's watcher starts at DeliverPolicy.New: nothing is replayed.
        follow(sub, iter, "info", infoJson, await startsInUpdates(iter, !includeHistory));
        return {};
      });
    },
  };
}
