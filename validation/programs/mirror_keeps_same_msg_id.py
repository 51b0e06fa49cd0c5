"""A mirror holds every message of its origin: two origin messages that carry the same Nats-Msg-Id (published
outside the origin's duplicate window) are both mirrored; deduplication applies to publishes, not to mirroring
(ADR-59 Mirroring; nats-server d0a2482, fixed in 2.12.8). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

ORIGIN, MIRROR = "HELDOUT_MDUP_O", "HELDOUT_MDUP_M"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": ORIGIN, "subjects": ["heldout.mdup"], "duplicate_window": 100_000_000}
        await api(nc, f"$JS.API.STREAM.CREATE.{ORIGIN}", cfg)
        js = nc.jetstream()
        await js.publish("heldout.mdup", b"1", headers={"Nats-Msg-Id": "X"})
        await asyncio.sleep(0.3)  # past the origin's 100 ms duplicate window
        ack = await js.publish("heldout.mdup", b"2", headers={"Nats-Msg-Id": "X"})
        print("origin stored the second at", ack.seq)
        mirror = {"name": MIRROR, "mirror": {"name": ORIGIN}, "duplicate_window": 120_000_000_000}
        await api(nc, f"$JS.API.STREAM.CREATE.{MIRROR}", mirror)
        for _ in range(40):
            state = (await api(nc, f"$JS.API.STREAM.INFO.{MIRROR}"))["state"]
            if state["messages"] >= 2:
                break
            await asyncio.sleep(0.1)
        print("mirror state", state)
        return 0 if (state["messages"], state["last_seq"]) == (2, 2) else 1
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
