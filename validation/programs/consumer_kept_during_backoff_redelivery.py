"""A pull consumer with backoff is not inactive while a redelivered message waits for its ack: with backoff
[2s, 4s] and inactive_threshold 500 ms, 3.75 s after the redelivery (within the 4 s backoff) the consumer still
exists (docs, inactive_threshold and backoff; nats-server c88085f, fixed in 2.14.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BACKOFFIA"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def exists(nc):
    return "error" not in await api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.C")


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.bo.>"]})
        js = nc.jetstream()
        for _ in range(5):  # the matching message gets stream sequence 6, consumer sequence 1
            await js.publish("heldout.bo.skip", b"")
        await js.publish("heldout.bo.match", b"")
        cfg = {
            "durable_name": "C",
            "filter_subject": "heldout.bo.match",
            "ack_policy": "explicit",
            "inactive_threshold": 500_000_000,
            "backoff": [2_000_000_000, 4_000_000_000],
        }
        print(
            (await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.C", {"stream_name": STREAM, "config": cfg})).get("error")
        )
        sub = await js.pull_subscribe_bind("C", STREAM)
        msg = (await sub.fetch(1, timeout=2))[0]
        await asyncio.sleep(1.75)
        first = await exists(nc)
        await msg.nak()
        msg = (await sub.fetch(1, timeout=3))[0]
        await asyncio.sleep(3.75)
        second = await exists(nc)
        print("consumer exists during the first ack wait:", first, "during the 4 s backoff:", second)
        if second:
            await msg.ack()
        return 0 if first and second else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
