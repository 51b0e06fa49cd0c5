"""A purge up to a sequence (keep nothing below it) that leaves a memory stream empty reports first_seq as
last_seq + 1, as every empty stream does (nats-server bdb7a6e, fixed in 2.14.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_MEMCOMPACT"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(
            nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.mc"], "storage": "memory"}
        )
        js = nc.jetstream()
        for _ in range(3):
            await js.publish("heldout.mc", b"x")
        for seq in (2, 3):
            await api(nc, f"$JS.API.STREAM.MSG.DELETE.{STREAM}", {"seq": seq})
        print(await api(nc, f"$JS.API.STREAM.PURGE.{STREAM}", {"seq": 2}))
        state = (await api(nc, f"$JS.API.STREAM.INFO.{STREAM}"))["state"]
        print(state)
        return 0 if (state["messages"], state["first_seq"], state["last_seq"]) == (0, 4, 3) else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
