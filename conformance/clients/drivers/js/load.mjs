// Load: an open- or closed-loop publisher for `jetcheck load --client nats.js`. See ../PROTOCOL.md, "Load".
//
// The schedule, the pipelined publishes (js.publish() promises, at most max_inflight outstanding) and their acks run
// here; jetcheck starts and stops a run and receives every operation's times in batches (one record per batch_ms).
// One module per kind of run: loadpublish.mjs, loadconsume.mjs, loadkv.mjs and loadrequests.mjs (counter and batch),
// all built on loadrows.mjs (the clock, the rows and the schedule).

import { Kvm } from "@nats-io/kv";

import { ConsumeRun } from "./loadconsume.mjs";
import { KvRun } from "./loadkv.mjs";
import { LoadRun } from "./loadpublish.mjs";
import { RequestRun, batchSend, counterSend } from "./loadrequests.mjs";

// driver: { sessionOf, need, send, RequestError } from driver.mjs
export function loadHandlers(driver) {
  const { sessionOf, need, RequestError } = driver;
  const runs = new Map(); // sub id -> a run (LoadRun, ConsumeRun, KvRun or RequestRun)

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
        return new KvRun(driver, sub, kv, req);
      }),

    load_consume: (req) =>
      begin(req, async (sub) => {
        const session = sessionOf(req);
        const consumer = await session.js.consumers.get(need(req, "stream", "string"), need(req, "durable", "string"));
        const run = new ConsumeRun(driver, sub, session, consumer, req);
        if (run.batch < 1) throw new RequestError("invalid", "load_consume needs batch >= 1");
        return run;
      }),

    load_counter: (req) =>
      begin(
        req,
        async (sub) => new RequestRun(driver, sub, req, counterSend(sessionOf(req).js, need(req, "subject", "string"))),
      ),

    load_batch: (req) =>
      begin(req, async (sub) => {
        const js = sessionOf(req).js;
        const size = need(req, "batch_size", "number");
        if (size < 2) throw new RequestError("invalid", "load_batch needs batch_size >= 2");
        if (typeof js.startBatch !== "function") {
          throw new RequestError("unsupported", "this @nats-io/jetstream has no js.startBatch() (atomic batch publish)");
        }
        const payload = new Uint8Array(need(req, "payload_size", "number")).fill(120);
        return new RequestRun(driver, sub, req, batchSend(js, need(req, "subject", "string"), size, payload));
      }),

    load_publish: (req) => begin(req, async (sub) => new LoadRun(driver, sub, sessionOf(req), req)),

    async load_stop(req) {
      const sub = need(req, "sub", "string");
      const run = runs.get(sub);
      if (!run) throw new RequestError("invalid", `no load sub ${JSON.stringify(sub)}`);
      runs.delete(sub);
      return await run.stop(req.at_ns);
    },
  };
}
