// jetcheck client driver for nats.js (@nats-io/jetstream over @nats-io/transport-node), protocol v3.
//
// jetcheck writes one JSON request per line on stdin and reads one JSON object per line on stdout: a response per
// request (by id) and, without an id, the deliveries and client events of running consumptions. Requests are
// handled concurrently. stderr is a log for people and never carries credentials. See ../PROTOCOL.md.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

import { loadHandlers } from "./load.mjs";
import { infoJson, OBJECT_STORE_MODES, ObjectStoreError, objectStoreHandlers } from "./objectstore.mjs";
import { CONSUMER_MODES, consumerHandlers } from "./consumers.mjs";
import { PUBLISH_MODES, publishHandlers } from "./publish.mjs";
import { FEATURE_MODES, featureHandlers } from "./features.mjs";
import { WATCH_MODES, watchHandlers } from "./watch.mjs";
import { KV_MORE_MODES, kvMore } from "./kvmore.mjs";
import { kvEntry, kvHandlers } from "./kv.mjs";
import { PREFIX_MODES, prefix } from "./prefix.mjs";
import { NotInRelease, packageVersion } from "./release.mjs";

import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  JetStreamApiError,
  JetStreamError,
  jetstreamManager,
} from "@nats-io/jetstream";
import {
  connect,
  createInbox,
  credsAuthenticator,
  errors,
  nanos,
  nkeyAuthenticator,
} from "@nats-io/transport-node";

const PROTOCOL = 3;
const START = process.hrtime.bigint();
// Monotonic nanoseconds since the driver started: exact as a JSON number for 104 days.
const monoNs = () => Number(process.hrtime.bigint() - START);

// the misbehave modes: those of the consumptions here, and each module's own
const MODES = new Set([
  "swallow-missed-heartbeat",
  "chatty-missed-heartbeat",
  "terminal-on-missed-heartbeat",
  "duplicate-delivery",
  "drop-deliveries-after-reset",
  "bind-any-queue",
  ...KV_MORE_MODES, // kvmore.mjs
  ...WATCH_MODES, // watch.mjs
  ...PREFIX_MODES, // prefix.mjs
  ...FEATURE_MODES, // features.mjs
  ...OBJECT_STORE_MODES, // objectstore.mjs
  ...CONSUMER_MODES, // consumers.mjs
  ...PUBLISH_MODES, // publish.mjs
]);
const CHATTY_EVERY_MS = 100;
const DELIVER_POLICIES = {
  all: DeliverPolicy.All,
  by_start_sequence: DeliverPolicy.StartSequence,
  by_start_time: DeliverPolicy.StartTime,
  last_per_subject: DeliverPolicy.LastPerSubject,
};
// Consumer notifications that are the client's routine bookkeeping, not reports to the application about a
// problem: every pull request ("next"), every heartbeat and flow-control message, every expired pull ("discard",
// or "debug" with the server's 408 when the expired request had nothing left to deliver).
const ROUTINE = new Set(["next", "heartbeat", "flow_control", "discard"]);
const routine = (s) => ROUTINE.has(s.type) || (s.type === "debug" && s.code === 408);

function log(text) {
  process.stderr.write(`nats.js driver: ${text}\n`);
}

// ---- output -------------------------------------------------------------------------------------------------

let outputClosed = false;
process.stdout.on("error", () => {
  outputClosed = true; // jetcheck went away: nothing left to report to
  process.exit(0);
});

function send(record) {
  if (!outputClosed) process.stdout.write(`${JSON.stringify(record)}\n`);
}

class RequestError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function errorRecord(err) {
  if (err instanceof RequestError) {
    return { kind: err.kind, message: err.message, code: null, err_code: null };
  }
  const message = `${err?.constructor?.name ?? "Error"}: ${err?.message ?? String(err)}`;
  if (err instanceof ObjectStoreError || err instanceof NotInRelease) {
    return { kind: err.kind, message: err.message, code: null, err_code: null };
  }
  if (err instanceof JetStreamApiError) {
    return { kind: "api", message, code: err.status ?? null, err_code: err.code ?? null };
  }
  if (err instanceof JetStreamError && typeof err.code === "number") {
    // a JetStreamStatusError (not exported by the package's main module): the server's status code
    return { kind: "api", message, code: err.code ?? null, err_code: null };
  }
  if (err instanceof errors.TimeoutError) return { kind: "timeout", message, code: null, err_code: null };
  if (
    err instanceof errors.ConnectionError ||
    err instanceof errors.ClosedConnectionError ||
    err instanceof errors.AuthorizationError ||
    err instanceof errors.DrainingConnectionError ||
    err instanceof errors.UserAuthenticationExpiredError ||
    err?.code === "ECONNREFUSED"
  ) {
    return { kind: "connection", message, code: null, err_code: null };
  }
  if (err instanceof errors.InvalidArgumentError || err instanceof errors.InvalidSubjectError) {
    return { kind: "invalid", message, code: null, err_code: null };
  }
  return { kind: "other", message, code: null, err_code: null };
}

// ---- state ----------------------------------------------------------------------------------------------------

const sessions = new Map(); // session id -> Session
const subs = new Map(); // sub id -> Sub
let modes = new Set();

class Session {
  constructor(id, nc, jsOptions = {}) {
    this.id = id;
    this.nc = nc;
    this.js = jetstream(nc, jsOptions);
    this.jsm = null;
    this.subs = new Set();
  }

  async manager() {
    this.jsm ??= await jetstreamManager(this.nc);
    return this.jsm;
  }
}

class Sub {
  constructor(id, session) {
    this.id = id;
    this.session = session;
    this.messages = null; // the client's ConsumerMessages
    this.stopped = false; // set before `stop` answers: nothing is streamed for this sub afterwards
    this.resetSeen = false;
    this.chatty = null;
    this.watch = false; // a KV/object store watch (watch.mjs), not a consumption
  }

  running() {
    return !this.stopped;
  }

  stop() {
    this.stopped = true;
    this.quiet();
    try {
      this.messages?.stop();
    } catch (err) {
      log(`stopping ${this.id}: ${err?.message}`);
    }
  }

  quiet() {
    if (this.chatty) clearInterval(this.chatty);
    this.chatty = null;
  }

  startChatty() {
    if (this.chatty || this.stopped || this.watch) return;
    this.chatty = setInterval(() => {
      event(this.session.id, this, "missed-heartbeat", "chatty-missed-heartbeat: emitted by the driver (misbehave)");
    }, CHATTY_EVERY_MS);
  }
}

function deliveryOf(m) {
  return {
    stream_seq: m.info.streamSequence,
    consumer_seq: m.info.deliverySequence,
    subject: m.subject,
    payload_b64: Buffer.from(m.data).toString("base64"),
    consumer: m.info.consumer,
    at_ns: monoNs(),
  };
}

function deliver(sub, m) {
  if (!sub.running()) return;
  if (sub.resetSeen && modes.has("drop-deliveries-after-reset")) return;
  const record = { type: "delivery", sub: sub.id, ...deliveryOf(m) };
  send(record);
  if (modes.has("duplicate-delivery")) send(record);
}

function event(sessionId, sub, kind, detail) {
  if (sub && !sub.running()) return;
  if (kind === "missed-heartbeat" && modes.has("swallow-missed-heartbeat")) return;
  if (kind === "reset" && sub) sub.resetSeen = true;
  send({ type: "event", session: sessionId, sub: sub ? sub.id : null, kind, detail, at_ns: monoNs() });
  if (kind === "missed-heartbeat" && sub && modes.has("terminal-on-missed-heartbeat")) {
    send({
      type: "event",
      session: sessionId,
      sub: sub.id,
      kind: "terminal",
      detail: `terminal-on-missed-heartbeat: the driver stopped the consumption (misbehave) after: ${detail}`,
      at_ns: monoNs(),
    });
    sub.stop();
  }
}

function describe(notification) {
  const { type, ...data } = notification;
  return `${type} ${JSON.stringify(data)}`;
}

// The client's consumer notifications, as protocol event kinds (ROUTINE ones are not reported).
function kindOf(type) {
  switch (type) {
    case "heartbeats_missed":
      return "missed-heartbeat";
    case "reset":
    case "ordered_consumer_recreated":
      return "reset";
    default:
      return "error";
  }
}

// Streams a running consumption: every message it yields, every notification it makes, and its end.
function follow(sub, messages, ack) {
  sub.messages = messages;
  const statuses = messages.status(); // taken before anything is yielded, so no early notification is missed
  (async () => {
    for await (const s of statuses) {
      if (!routine(s)) event(sub.session.id, sub, kindOf(s.type), describe(s));
    }
  })().catch((err) => log(`status of ${sub.id}: ${err?.message}`));
  (async () => {
    let ended = "the client ended the consumption";
    try {
      for await (const m of messages) {
        if (ack) m.ack();
        deliver(sub, m);
      }
    } catch (err) {
      ended = `the client ended the consumption with ${err?.constructor?.name}: ${err?.message}`;
    }
    if (sub.running()) event(sub.session.id, sub, "terminal", ended);
    sub.quiet();
  })().catch((err) => log(`consumption of ${sub.id}: ${err?.message}`));
  if (modes.has("chatty-missed-heartbeat")) sub.startChatty();
}

// ---- requests --------------------------------------------------------------------------------------------------

function need(req, name, type) {
  const value = req[name];
  if (value === undefined || value === null || (type && typeof value !== type)) {
    throw new RequestError("invalid", `${req.op} needs "${name}"${type ? ` (${type})` : ""}`);
  }
  return value;
}

function sessionOf(req) {
  const id = need(req, "session", "string");
  const session = sessions.get(id);
  if (!session) throw new RequestError("invalid", `no session ${JSON.stringify(id)}`);
  return session;
}

function newSub(req, session) {
  const id = need(req, "sub", "string");
  if (subs.has(id)) throw new RequestError("invalid", `sub ${JSON.stringify(id)} exists already`);
  const sub = new Sub(id, session);
  subs.set(id, sub);
  session.subs.add(sub);
  return sub;
}

function forget(sub) {
  subs.delete(sub.id);
  sub.session.subs.delete(sub);
}

// startSub registers the request's sub, then has `start(sub)` subscribe through the client and answer; a sub the
// client refused is forgotten again.
async function startSub(req, session, start) {
  const sub = newSub(req, session);
  try {
    return await start(sub);
  } catch (err) {
    forget(sub);
    throw err;
  }
}

const ms = (seconds) => (seconds === null || seconds === undefined ? undefined : Math.round(seconds * 1000));

// What the client really uses: its parsed options (it raises a heartbeat under 500 ms to 500 ms, caps it at 30 s
// and defaults it to half of expires).
function effectiveHeartbeatS(messages) {
  const value = messages?.opts?.idle_heartbeat;
  return typeof value === "number" ? value / 1000 : null;
}

function consumeOptions({ idle_heartbeat_s, expires_s, max_messages }) {
  const options = {};
  if (idle_heartbeat_s !== null && idle_heartbeat_s !== undefined) options.idle_heartbeat = ms(idle_heartbeat_s);
  if (expires_s !== null && expires_s !== undefined) options.expires = ms(expires_s);
  if (max_messages !== null && max_messages !== undefined) options.max_messages = max_messages;
  return options;
}

function connectOptions(req) {
  const url = need(req, "url", "string");
  const c = req.credentials ?? {};
  const options = {
    servers: url,
    maxReconnectAttempts: -1,
    reconnectTimeWait: ms(req.reconnect_wait_s ?? 0.1),
    reconnectJitter: 0,
    reconnectJitterTLS: 0,
    // The URL may be a fault proxy: the client must not learn the server's own addresses and go around it.
    ignoreClusterUpdates: true,
    name: `jetcheck-${req.session}`,
  };
  if (c.user) {
    options.user = c.user;
    options.pass = c.password ?? "";
  }
  if (c.token) options.token = c.token;
  Object.assign(options, prefix.connectOptions(req));
  if (c.nkey_seed) options.authenticator = nkeyAuthenticator(new TextEncoder().encode(readSecret(c.nkey_seed)));
  if (c.creds) options.authenticator = credsAuthenticator(new TextEncoder().encode(readSecret(c.creds)));
  // A tls:// URL or any TLS file means TLS or no connection (the client refuses a server without TLS then).
  if (url.startsWith("tls://") || c.tls_ca || c.tls_cert || c.tls_key) {
    options.tls = {};
    if (c.tls_ca) options.tls.caFile = c.tls_ca;
    if (c.tls_cert) options.tls.certFile = c.tls_cert;
    if (c.tls_key) options.tls.keyFile = c.tls_key;
  }
  return options;
}

function readSecret(path) {
  try {
    return readFileSync(path, "utf8").trim();
  } catch (err) {
    throw new RequestError("invalid", `cannot read credentials file ${path}: ${err.code ?? err.message}`);
  }
}

// A durable push consumer that exists is bound as it is (a second queue member must not move its deliver subject).
async function existingDurable(jsm, stream, durable) {
  if (!durable) return null;
  try {
    return await jsm.consumers.info(stream, durable);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === 10014) return null; // consumer not found
    throw err;
  }
}

const handlers = {
  async hello() {
    return {
      protocol: PROTOCOL,
      client: "nats.js",
      version: packageVersion("@nats-io/jetstream"),
      libraries: {
        "@nats-io/jetstream": packageVersion("@nats-io/jetstream"),
        "@nats-io/transport-node": packageVersion("@nats-io/transport-node"),
        "@nats-io/nats-core": packageVersion("@nats-io/nats-core"),
      },
      runtime: `node ${process.version}`,
      mono_ns: monoNs(),
      ops: Object.keys(handlers),
    };
  },

  async connect(req) {
    const id = need(req, "session", "string");
    if (sessions.has(id)) throw new RequestError("invalid", `session ${JSON.stringify(id)} exists already`);
    const options = connectOptions(req);
    let nc;
    try {
      nc = await connect(options);
    } catch (err) {
      // Node's own socket and TLS errors (certificate not trusted, name mismatch) are connection failures too.
      if (errorRecord(err).kind !== "other") throw err;
      throw new RequestError("connection", `${err?.constructor?.name}: ${err?.message}`);
    }
    const session = new Session(id, nc, prefix.jetstreamOptions(req));
    sessions.set(id, session);
    (async () => {
      for await (const s of nc.status()) {
        if (s.type === "error" || s.type === "slowConsumer") {
          event(id, null, "error", `${s.type} ${s.error ? `${s.error.constructor.name}: ${s.error.message}` : ""}`);
        }
      }
    })().catch((err) => log(`status of session ${id}: ${err?.message}`));
    return {};
  },

  // Answers once the session's connection made a round trip to the server: jetcheck asks after a silence, to tell a
  // quiet client from one that lost its server.
  async ping(req) {
    await sessionOf(req).nc.flush();
    return {};
  },

  async close(req) {
    const session = sessionOf(req);
    sessions.delete(session.id);
    await closeSession(session);
    return {};
  },

  async ordered(req) {
    const session = sessionOf(req);
    const stream = need(req, "stream", "string");
    const options = { filter_subjects: [need(req, "subject", "string")] };
    const start = req.start ?? { deliver_policy: "all" };
    const policy = DELIVER_POLICIES[start.deliver_policy ?? "all"];
    if (!policy) throw new RequestError("invalid", `unknown deliver_policy ${JSON.stringify(start.deliver_policy)}`);
    options.deliver_policy = policy;
    const startArg = { op: "ordered's start", ...start };
    if (policy === DeliverPolicy.StartSequence) options.opt_start_seq = need(startArg, "seq", "number");
    if (policy === DeliverPolicy.StartTime) options.opt_start_time = need(startArg, "time", "string");
    if (req.inactive_threshold_s !== null && req.inactive_threshold_s !== undefined) {
      options.inactive_threshold = ms(req.inactive_threshold_s);
    }
    return startSub(req, session, async (sub) => {
      const consumer = await session.js.consumers.get(stream, options);
      const messages = await consumer.consume(consumeOptions({ idle_heartbeat_s: req.idle_heartbeat_s }));
      follow(sub, messages, false);
      return { effective_idle_heartbeat_s: effectiveHeartbeatS(messages) };
    });
  },

  async push(req) {
    const session = sessionOf(req);
    const stream = need(req, "stream", "string");
    const config = {
      deliver_subject: createInbox(),
      filter_subject: need(req, "subject", "string"),
      ack_policy: AckPolicy.None,
      flow_control: false,
    };
    if (req.idle_heartbeat_s !== null && req.idle_heartbeat_s !== undefined) {
      config.idle_heartbeat = nanos(ms(req.idle_heartbeat_s));
    }
    if (req.durable) config.durable_name = need(req, "durable", "string");
    if (req.queue) config.deliver_group = need(req, "queue", "string");
    if (req.inactive_threshold_s !== null && req.inactive_threshold_s !== undefined) {
      config.inactive_threshold = nanos(ms(req.inactive_threshold_s));
    }
    return startSub(req, session, async (sub) => {
      const jsm = await session.manager();
      const existing = await existingDurable(jsm, stream, req.durable);
      const info = existing ?? (await jsm.consumers.add(stream, config));
      if (existing && (info.config.deliver_group ?? null) !== (req.queue ?? null) && !modes.has("bind-any-queue")) {
        throw new RequestError(
          "unsupported",
          `@nats-io/jetstream ${packageVersion("@nats-io/jetstream")} has no push subscription that names its queue: ` +
            `getPushConsumer().consume() joins the consumer's deliver_group ` +
            `(${JSON.stringify(info.config.deliver_group ?? null)}), so it cannot subscribe with queue ` +
            `${JSON.stringify(req.queue ?? null)}`,
        );
      }
      const consumer = await session.js.consumers.getPushConsumer(stream, info.name);
      follow(sub, await consumer.consume(), false);
      // The client watches the consumer's own idle_heartbeat as configured (it raises no push heartbeat).
      const configured = info.config.idle_heartbeat;
      return { consumer: info.name, effective_idle_heartbeat_s: configured ? configured / 1e9 : null };
    });
  },

  async consume(req) {
    const session = sessionOf(req);
    const stream = need(req, "stream", "string");
    const name = need(req, "consumer", "string");
    return startSub(req, session, async (sub) => {
      const consumer = await session.js.consumers.get(stream, name);
      const messages = await consumer.consume(consumeOptions(req));
      follow(sub, messages, true);
      return { effective_idle_heartbeat_s: effectiveHeartbeatS(messages) };
    });
  },

  async fetch(req) {
    const session = sessionOf(req);
    const stream = need(req, "stream", "string");
    const name = need(req, "consumer", "string");
    const batch = need(req, "batch", "number");
    const consumer = await session.js.consumers.get(stream, name);
    const started = process.hrtime.bigint();
    const messages = await consumer.fetch({
      ...consumeOptions({ idle_heartbeat_s: req.idle_heartbeat_s, expires_s: req.expires_s }),
      max_messages: batch,
    });
    const notes = [];
    const noted = (async () => {
      for await (const s of messages.status()) {
        if (s.type !== "next" && s.type !== "heartbeat") notes.push(s);
      }
    })().catch(() => {});
    const deliveries = [];
    let failure = null;
    try {
      for await (const m of messages) {
        m.ack();
        const record = deliveryOf(m);
        deliveries.push(record);
        if (modes.has("duplicate-delivery")) deliveries.push(record);
      }
    } catch (err) {
      failure = err;
    }
    const tookS = Number(process.hrtime.bigint() - started) / 1e9;
    // The client stops its status listeners as the fetch ends: let ours take what was queued before.
    await Promise.race([noted, new Promise((resolve) => setTimeout(resolve, 50))]);
    let error = failure ? fetchError(failure, notes) : null;
    if (!error && deliveries.length < batch) {
      const said = notes.length ? notes.map(describe).join("; ") : "nothing";
      error = { kind: "timeout", detail: `the fetch ended with ${deliveries.length} of ${batch}; the client said ${said}` };
    }
    return { deliveries, error, took_s: tookS, effective_idle_heartbeat_s: effectiveHeartbeatS(messages) };
  },

  async stop(req) {
    const id = need(req, "sub", "string");
    const sub = subs.get(id);
    if (!sub) throw new RequestError("invalid", `no sub ${JSON.stringify(id)}`);
    sub.stop();
    forget(sub);
    return {};
  },

  async misbehave(req) {
    const wanted = need(req, "modes");
    if (!Array.isArray(wanted)) throw new RequestError("invalid", "misbehave needs \"modes\" (a list)");
    const unknown = wanted.filter((m) => !MODES.has(m));
    if (unknown.length) {
      throw new RequestError("invalid", `unknown modes ${unknown.join(", ")}; known: ${[...MODES].join(", ")}`);
    }
    modes = new Set(wanted);
    log(`misbehaving from now on: ${wanted.join(", ") || "(no longer)"}`);
    for (const sub of subs.values()) {
      if (modes.has("chatty-missed-heartbeat")) sub.startChatty();
      else sub.quiet();
    }
    return {};
  },

  async shutdown() {
    await closeAll();
    return {};
  },
};

function fetchError(err, notes) {
  const said = notes.length ? `; the client said ${notes.map(describe).join("; ")}` : "";
  const detail = `${err?.constructor?.name}: ${err?.message}${said}`;
  if (err instanceof JetStreamError && /heartbeats missed/i.test(err.message)) {
    if (modes.has("swallow-missed-heartbeat")) {
      return { kind: "timeout", detail: "swallow-missed-heartbeat: the driver dropped the client's report (misbehave)" };
    }
    return { kind: "missed-heartbeat", detail };
  }
  if (err instanceof errors.TimeoutError) return { kind: "timeout", detail };
  return { kind: "error", detail };
}

async function closeSession(session) {
  for (const sub of [...session.subs]) {
    sub.stop();
    forget(sub);
  }
  if (!session.nc.isClosed()) {
    try {
      await session.nc.close();
    } catch (err) {
      log(`closing session ${session.id}: ${err?.message}`);
    }
  }
}

async function closeAll() {
  const all = [...sessions.values()];
  sessions.clear();
  await Promise.all(all.map(closeSession));
}

const kv = kvHandlers({ sessionOf, need, ms, mode: (name) => modes.has(name), RequestError });
Object.assign(handlers, kv.handlers);
Object.assign(handlers, objectStoreHandlers(sessionOf, need, (name) => modes.has(name)));
Object.assign(handlers, consumerHandlers({ sessionOf, need, mode: (name) => modes.has(name), RequestError }));
Object.assign(handlers, publishHandlers({ sessionOf, need, mode: (name) => modes.has(name), RequestError }));
Object.assign(handlers, kvMore.handlers({ sessionOf, need, RequestError, mode: (name) => modes.has(name) }));
Object.assign(handlers, loadHandlers({ sessionOf, need, send, RequestError }));
Object.assign(handlers, featureHandlers({ sessionOf, need, mode: (name) => modes.has(name) }));

Object.assign(
  handlers,
  watchHandlers({
    sessionOf, need, startSub, forget, kvOf: kv.kvOf, kvEntry: (e) => kvMore.shown(kvEntry(e)), infoJson, send, monoNs, event,
    RequestError, mode: (name) => modes.has(name),
  }),
);

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    log(`ignoring a line that is not JSON (${line.length} characters)`);
    return;
  }
  const id = req?.id ?? null;
  const handler = Object.hasOwn(handlers, req?.op) ? handlers[req.op] : null;
  if (!handler) {
    send({ id, ok: false, error: { kind: "unsupported", message: `unknown op ${JSON.stringify(req?.op)}`, code: null, err_code: null } });
    return;
  }
  try {
    const result = await handler(req);
    send({ id, ok: true, result });
  } catch (err) {
    send({ id, ok: false, error: errorRecord(err) });
  }
  if (req.op === "shutdown") process.exit(0);
}

process.on("unhandledRejection", (err) => log(`unhandled: ${err?.constructor?.name}: ${err?.message}`));

const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (line) => {
  if (line.trim()) handle(line);
});
input.on("close", () => {
  closeAll().finally(() => process.exit(0));
});
