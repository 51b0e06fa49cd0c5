"""A consumer with max_deliver 1 never redelivers, so its num_redelivered stays 0 after the ack wait runs out
(nats-server#6874, fixed by #6877 in 2.11.4). Exits 1 when the bug shows."""

import asyncio
import contextlib
import json
import sys

import nats

STREAM = "HELDOUT_MD1"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.md1"]})
        js = nc.jetstream()
        await js.publish("heldout.md1", b"x")
        cfg = {"durable_name": "C", "ack_policy": "explicit", "ack_wait": 250_000_000, "max_deliver": 1}
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.C", {"stream_name": STREAM, "config": cfg})
        sub = await js.pull_subscribe_bind("C", STREAM)
        await sub.fetch(1, timeout=2)
        await asyncio.sleep(0.6)  # the ack wait (250 ms) runs out; max_deliver 1 forbids a redelivery
        with contextlib.suppress(nats.errors.TimeoutError):
            await sub.fetch(1, timeout=0.5)
        info = await api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.C")
        print("num_redelivered", info["num_redelivered"], "num_ack_pending", info["num_ack_pending"])
        return 1 if info["num_redelivered"] != 0 else 0
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
