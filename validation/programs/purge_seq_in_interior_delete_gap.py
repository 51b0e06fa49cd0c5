"""A purge up to a sequence that falls inside a run of deleted messages leaves every message from that sequence on:
first_seq is the next stored message and nothing is counted as deleted (nats-server#6861, fixed in 2.11.4).
Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_PURGEGAP"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=10)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.gap.*"]})
        js = nc.jetstream()
        data = bytes(1024)
        await js.publish("heldout.gap.start", data)
        for _ in range(10_000):
            await nc.publish("heldout.gap.mid", data)
        await nc.flush()
        await js.publish("heldout.gap.end", data)
        await api(nc, f"$JS.API.STREAM.PURGE.{STREAM}", {"filter": "heldout.gap.mid"})
        await api(nc, f"$JS.API.STREAM.PURGE.{STREAM}", {"seq": 9_000})
        state = (await api(nc, f"$JS.API.STREAM.INFO.{STREAM}"))["state"]
        print({k: state.get(k) for k in ("messages", "first_seq", "last_seq", "num_deleted")})
        good = (state["messages"], state["first_seq"], state["last_seq"], state.get("num_deleted", 0)) == (
            1,
            10_002,
            10_002,
            0,
        )
        return 0 if good else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
