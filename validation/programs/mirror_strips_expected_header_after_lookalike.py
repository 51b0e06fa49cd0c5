"""A mirror stores an origin message whose Nats-Expected-Stream header follows another header whose value merely
mentions "Nats-Expected-Stream": Expected-* headers were checked by the origin, not again by the mirror (nats-server
2a07cc8, fixed in 2.14.1). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

ORIGIN, MIRROR = "HELDOUT_MHDR_O", "HELDOUT_MHDR_M"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{ORIGIN}", {"name": ORIGIN, "subjects": ["heldout.mhdr"]})
        await api(nc, f"$JS.API.STREAM.CREATE.{MIRROR}", {"name": MIRROR, "mirror": {"name": ORIGIN}})
        js = nc.jetstream()
        await js.publish("heldout.mhdr", b"1")
        headers = {"X-Note": "see Nats-Expected-Stream below", "Nats-Expected-Stream": ORIGIN}
        ack = await js.publish("heldout.mhdr", b"2", headers=headers)
        print("origin stored at", ack.seq)
        for _ in range(30):
            state = (await api(nc, f"$JS.API.STREAM.INFO.{MIRROR}"))["state"]
            if state["messages"] >= 2:
                break
            await asyncio.sleep(0.1)
        print("mirror holds", state["messages"])
        return 0 if state["messages"] == 2 else 1
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
