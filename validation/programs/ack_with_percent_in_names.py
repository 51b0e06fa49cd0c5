"""A consumer whose stream and consumer names contain '%' (allowed by the naming rules) is pulled from on the
subject built from its real names, and an ack on the reply subject clears num_ack_pending (docs, naming; ADR-13;
nats-server fd80b02, fixed in 2.14.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_PCT%S"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(
            nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.pct"], "storage": "memory"}
        )
        cfg = {"durable_name": "wor%ker", "ack_policy": "explicit"}
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.wor%ker", {"stream_name": STREAM, "config": cfg})
        await nc.request("heldout.pct", b"hello", timeout=5)
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        request = json.dumps({"batch": 1, "expires": 1_000_000_000}).encode()
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.wor%ker", request, reply=inbox)
        msg = await sub.next_msg(timeout=3)
        status = msg.headers.get("Status") if msg.headers else None
        print("pull answer", status or f"message, reply subject {msg.reply}")
        if status:  # the pull request did not reach the consumer
            return 1
        acked = True
        try:
            await nc.request(msg.reply, b"+ACK", timeout=1)
        except nats.errors.TimeoutError:
            acked = False
        info = await api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.wor%ker")
        print("ack answered", acked, "num_ack_pending", info["num_ack_pending"])
        return 0 if acked and info["num_ack_pending"] == 0 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
