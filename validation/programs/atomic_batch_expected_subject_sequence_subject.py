"""In an atomic batch each message's Nats-Expected-Last-Subject-Sequence is checked against the subject its
Nats-Expected-Last-Subject-Sequence-Subject names: foo.A at 1, foo.B at 2, a batch expecting exactly that commits at
4 (ADR-50; nats-server 5785b5b, fixed in 2.12.1). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BATCHSUBJ"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.bs.*"], "allow_atomic": True}
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        js = nc.jetstream()
        await js.publish("heldout.bs.A", b"")
        await js.publish("heldout.bs.B", b"")
        first = {
            "Nats-Batch-Id": "b1",
            "Nats-Batch-Sequence": "1",
            "Nats-Expected-Last-Sequence": "2",
            "Nats-Expected-Last-Subject-Sequence": "1",
            "Nats-Expected-Last-Subject-Sequence-Subject": "heldout.bs.A",
        }
        await nc.publish("heldout.bs.A", b"", headers=first)
        commit = {
            "Nats-Batch-Id": "b1",
            "Nats-Batch-Sequence": "2",
            "Nats-Batch-Commit": "1",
            "Nats-Expected-Last-Subject-Sequence": "2",
            "Nats-Expected-Last-Subject-Sequence-Subject": "heldout.bs.B",
        }
        ack = json.loads((await nc.request("heldout.bs.B", b"", headers=commit, timeout=5)).data)
        print("commit answer", ack)
        return 0 if "error" not in ack and ack.get("seq") == 4 and ack.get("count") == 2 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
