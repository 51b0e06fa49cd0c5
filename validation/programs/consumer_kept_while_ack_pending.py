"""A pull consumer is not inactive while a delivered message waits for its ack: with inactive_threshold 500 ms and
ack_wait 1 minute it still exists 1.75 s after the delivery, and is removed only after the ack (docs,
inactive_threshold; nats-server d5ee7ee, fixed in 2.11.7). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_INACTIVE"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.ia"]})
        js = nc.jetstream()
        await js.publish("heldout.ia", b"")
        cfg = {
            "durable_name": "C",
            "ack_policy": "explicit",
            "inactive_threshold": 500_000_000,
            "ack_wait": 60_000_000_000,
        }
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.C", {"stream_name": STREAM, "config": cfg})
        sub = await js.pull_subscribe_bind("C", STREAM)
        msgs = await sub.fetch(1, timeout=2)
        await sub.unsubscribe()
        await asyncio.sleep(1.75)
        info = await api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.C")
        exists = "error" not in info
        print("consumer while its ack is pending:", "exists" if exists else info["error"])
        await msgs[0].ack()
        return 0 if exists else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
