"""An atomic batch of exactly the maximum size (1000 messages) committed by an end-of-batch message is accepted:
the EOB message is not stored and not counted (ADR-50 "Client Design" and limits; nats-server 362ced4, fixed in
2.14.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BATCHEOB"
SIZE = 1000


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(
            nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.eob"], "allow_atomic": True}
        )
        for seq in range(1, SIZE + 1):
            await nc.publish("heldout.eob", b"", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": str(seq)})
        eob = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": str(SIZE + 1), "Nats-Batch-Commit": "eob"}
        ack = json.loads((await nc.request("heldout.eob", b"", headers=eob, timeout=10)).data)
        print("EOB answer", ack)
        return 0 if "error" not in ack and ack.get("count") == SIZE and ack.get("seq") == SIZE else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
