// JetStream publish with retries on no responders (../PROTOCOL.md "publish_retrying", ADR-22) over
// @nats-io/jetstream's js.publish(subject, data, {retries}). `retries` counts attempts in all (lib/jsclient.js
// _publish: `retries || 1`), so ADR-22's RetryAttempts n is retries n + 1; the client has no wait option: it waits
// its own backoff() between attempts (@nats-io/nats-core: 0, 250, 250, 500 ... ms, jittered).

// misbehave publish-no-retry: no retry, whatever retry_attempts asks
export const PUBLISH_MODES = ["publish-no-retry"];

export function publishHandlers({ sessionOf, need, mode, RequestError }) {
  return {
    async publish_retrying(req) {
      const session = sessionOf(req);
      const subject = need(req, "subject", "string");
      const data = new Uint8Array(Buffer.from(req.payload_b64 ?? "", "base64"));
      const attempts = mode("publish-no-retry") ? 0 : Number(req.retry_attempts ?? 0); // misbehave: no retry
      try {
        const ack = await session.js.publish(subject, data, { retries: attempts + 1 });
        return { stream: ack.stream, seq: ack.seq };
      } catch (err) {
        // after no responders the client throws JetStreamNotEnabled, its cause the RequestError saying so
        if (err?.cause?.isNoResponders?.()) {
          throw new RequestError("no_responders", `${err.constructor?.name ?? "Error"}: ${err.message}`);
        }
        throw err;
      }
    },
  };
}
