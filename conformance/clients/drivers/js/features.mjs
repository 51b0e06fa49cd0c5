// Server features of 2.11/2.12 a client may expose (../PROTOCOL.md "Server features"): js_publish (publish
// option `ttl`), js_pause / js_resume (jsm.consumers.pause / resume) and js_group_fetch (Consumer.fetch with
// `group`, on one consumer handle per session, as an application keeps it).

// js_publish sends no TTL; js_resume asks nothing; js_group_fetch takes a fresh consumer handle for every pull.
// min-pending-dropped: js_group_fetch pulls without min_pending.
import { requireDeclared } from "./release.mjs";

export const FEATURE_MODES = ["ttl-dropped", "resume-ignored", "pin-forgotten", "min-pending-dropped"];

function pauseState(answer) {
  const state = { paused: answer?.paused === true };
  if (answer?.pause_until) state.pause_until = answer.pause_until;
  return state;
}

export function featureHandlers({ sessionOf, need, mode }) {
  return {
    async js_publish(req) {
      const session = sessionOf(req);
      const data = new Uint8Array(Buffer.from(req.data_b64 ?? "", "base64"));
      const options = {};
      // JetStreamPublishOptions.ttl: '"1s" or "1h", etc, or a plain number interpreted as the number of seconds'
      if (typeof req.ttl_s === "number" && !mode("ttl-dropped")) {
        requireDeclared("@nats-io/jetstream", "JetStreamPublishOptions", "ttl");
        options.ttl = `${req.ttl_s}s`;
      }
      const ack = await session.js.publish(need(req, "subject", "string"), data, options);
      return { seq: ack.seq, stream: ack.stream };
    },
    async js_pause(req) {
      const jsm = await sessionOf(req).manager();
      const until = new Date(need(req, "until", "string"));
      requireDeclared("@nats-io/jetstream", "ConsumerAPI", "pause");
      return pauseState(await jsm.consumers.pause(need(req, "stream", "string"), need(req, "consumer", "string"), until));
    },
    async js_resume(req) {
      const jsm = await sessionOf(req).manager();
      if (mode("resume-ignored")) return { paused: false };
      requireDeclared("@nats-io/jetstream", "ConsumerAPI", "resume");
      return pauseState(await jsm.consumers.resume(need(req, "stream", "string"), need(req, "consumer", "string")));
    },
    async js_group_fetch(req) {
      const session = sessionOf(req);
      const stream = need(req, "stream", "string");
      const name = need(req, "consumer", "string");
      const batch = need(req, "batch", "number");
      const key = `${stream}\u0000${name}`;
      session.handles ??= new Map();
      let consumer = session.handles.get(key);
      if (!consumer || mode("pin-forgotten")) {
        consumer = await session.js.consumers.get(stream, name);
        session.handles.set(key, consumer);
      }
      const expires = Math.round(need(req, "expires_s", "number") * 1000);
      requireDeclared("@nats-io/jetstream", "FetchOptions", "group");
      const options = { max_messages: batch, expires, group: need(req, "group", "string") };
      if (typeof req.min_pending === "number" && !mode("min-pending-dropped")) {
        requireDeclared("@nats-io/jetstream", "FetchOptions", "min_pending");
        options.min_pending = req.min_pending;
      }
      const iter = await consumer.fetch(options);
      const notes = [];
      (async () => {
        for await (const s of iter.status()) {
          if (s.type !== "next" && s.type !== "heartbeat") notes.push(`${s.type}${s.code ? ` ${s.code}` : ""}`);
        }
      })().catch(() => {});
      const deliveries = [];
      let failure = "";
      try {
        for await (const m of iter) {
          deliveries.push({ stream_seq: m.seq, pin_id: m.headers?.get("Nats-Pin-Id") ?? "" });
          m.ack();
        }
      } catch (err) {
        failure = `${err?.constructor?.name ?? "Error"}: ${err?.message ?? String(err)}`;
      }
      let error = failure;
      if (!error && deliveries.length < batch) {
        error = `the fetch ended with ${deliveries.length} of ${batch}; the client said ${notes.join("; ") || "nothing"}`;
      }
      return { deliveries, error };
    },
  };
}
