"""After a full purge of a memory stream that had interior deletes, the stream reports no deleted messages: a purge
leaves an empty stream (num_deleted 0, no deleted list) (nats-server#6769, fixed in 2.11.2). Exits 1 when the bug
shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_MEMPURGE"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.mp"], "storage": "memory"}
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        js = nc.jetstream()
        for _ in range(10):
            await js.publish("heldout.mp", b"x")
        for seq in range(2, 10):
            await api(nc, f"$JS.API.STREAM.MSG.DELETE.{STREAM}", {"seq": seq})
        await api(nc, f"$JS.API.STREAM.PURGE.{STREAM}")
        info = await api(nc, f"$JS.API.STREAM.INFO.{STREAM}", {"deleted_details": True})
        state = info["state"]
        print(state)
        return 0 if not state.get("num_deleted") and not state.get("deleted") else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
