"""A filtered consumer's info reports what it delivered and acked, not the stream sequences it skipped: after
delivering and acking foo.bar at seq 1 (foo.other at seq 2 not matching), delivered.stream_seq and
ack_floor.stream_seq are 1 (ADR-13 consumer info; nats-server 237b8a7, fixed in 2.11.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_FILTINFO"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.fi.>"]})
        cfg = {
            "durable_name": "C",
            "ack_policy": "explicit",
            "ack_wait": 2_000_000_000,
            "filter_subject": "heldout.fi.bar",
        }
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.C", {"stream_name": STREAM, "config": cfg})
        js = nc.jetstream()
        await js.publish("heldout.fi.bar", b"")
        await js.publish("heldout.fi.other", b"")
        sub = await js.pull_subscribe_bind("C", STREAM)
        msgs = await sub.fetch(2, timeout=1)
        seen = []
        info = await api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.C")
        seen.append((info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"]))
        await msgs[0].ack_sync()
        info = await api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.C")
        seen.append((info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"]))
        print("(delivered, ack_floor) before and after the ack:", seen)
        return 0 if seen == [(1, 0), (1, 1)] else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
