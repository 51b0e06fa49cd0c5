"""A mirror stores every message of its origin, also one published with Nats-Expected-Stream naming the origin:
the Expected-* headers were checked on the origin's publish, not again in the mirror (ADR-59 Mirroring; nats-server
b7a37f9, fixed in 2.11.5). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

ORIGIN, MIRROR = "HELDOUT_MEXP_O", "HELDOUT_MEXP_M"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def mirrored(nc, want):
    for _ in range(30):
        state = (await api(nc, f"$JS.API.STREAM.INFO.{MIRROR}"))["state"]
        if state["messages"] >= want:
            break
        await asyncio.sleep(0.1)
    return state["messages"]


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{ORIGIN}", {"name": ORIGIN, "subjects": ["heldout.mexp"]})
        await api(nc, f"$JS.API.STREAM.CREATE.{MIRROR}", {"name": MIRROR, "mirror": {"name": ORIGIN}})
        js = nc.jetstream()
        await js.publish("heldout.mexp", b"1")
        await mirrored(nc, 1)
        ack = await js.publish("heldout.mexp", b"2", headers={"Nats-Expected-Stream": ORIGIN})
        print("origin stored at", ack.seq)
        count = await mirrored(nc, 2)
        print("mirror holds", count)
        return 0 if count == 2 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{MIRROR}")
        await api(nc, f"$JS.API.STREAM.DELETE.{ORIGIN}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
