// ADR-19 API prefixes (../PROTOCOL.md connect's api_prefix and inbox_prefix): a session's JetStream context made with
// jetstream(nc, { apiPrefix }) and its connection with connect({ inboxPrefix }). kv-prefix-ignored: kv_put publishes
// to $KV.<bucket>.<key> itself, whatever the API prefix (a client whose KV ignores it).

export const PREFIX_MODES = ["kv-prefix-ignored"];

export const prefix = {
  connectOptions(req) {
    return req.inbox_prefix ? { inboxPrefix: req.inbox_prefix } : {};
  },
  jetstreamOptions(req) {
    return req.api_prefix ? { apiPrefix: req.api_prefix } : {};
  },
  async putUnprefixed(session, req, need, valueOf) {
    const subject = `$KV.${need(req, "bucket", "string")}.${need(req, "key", "string")}`;
    const ack = await session.js.publish(subject, valueOf(req));
    return { revision: ack.seq };
  },
};
