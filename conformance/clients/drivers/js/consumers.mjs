// Consumer create, update and create-or-update (../PROTOCOL.md "consumer_add") over @nats-io/jetstream's
// JetStreamManager: consumers.add(stream, cfg) (action create) and consumers.update(stream, durable, cfg) (action
// update); the info leaves as the client returned it.
//
// The client has no create-or-update call: ConsumerApiAction is not exported (lib/mod.d.ts), and add() sends
// "create" for its empty CreateOrUpdate action anyway (lib/jsmconsumer_api.js addUpdate: `opts.action ||
// ConsumerApiAction.Create`), so create_or_update is `unsupported`.

import { packageVersion } from "./release.mjs";

// misbehave consumer-actions-rotated: a create made with the client's update call, an update with its create call
export const CONSUMER_MODES = ["consumer-actions-rotated"];
const ROTATED = { create: "update", update: "create" };
const NO_UPSERT =
  `@nats-io/jetstream ${packageVersion("@nats-io/jetstream")} has no create-or-update consumer call: ` +
  "JetStreamManager.consumers offers add() (action create) and update() (action update); ConsumerApiAction is not " +
  "exported and add() sends an empty action as create (lib/jsmconsumer_api.js)";

export function consumerHandlers({ sessionOf, need, mode, RequestError }) {
  return {
    async consumer_add(req) {
      const session = sessionOf(req);
      const stream = need(req, "stream", "string");
      const config = need(req, "config", "object");
      const action = mode("consumer-actions-rotated") ? ROTATED[req.action] : req.action;
      if (req.action === "create_or_update") throw new RequestError("unsupported", NO_UPSERT);
      const jsm = await session.manager();
      switch (action) {
        case "create":
          return { info: await jsm.consumers.add(stream, config) };
        case "update":
          return { info: await jsm.consumers.update(stream, config.durable_name ?? config.name, config) };
        default:
          throw new RequestError("invalid", `consumer_add: unknown action ${JSON.stringify(req.action)}`);
      }
    },
  };
}
