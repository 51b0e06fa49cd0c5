"""With discard new per subject and max_msgs_per_subject 1, an atomic batch of two messages on one new subject is
refused whole: its second message would exceed the subject's limit (ADR-50; docs discard_new_per_subject;
nats-server 53adde0, fixed in 2.12.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BATCHDNPS"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {
            "name": STREAM,
            "subjects": ["heldout.dn"],
            "allow_atomic": True,
            "discard": "new",
            "discard_new_per_subject": True,
            "max_msgs_per_subject": 1,
        }
        print((await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)).get("error"))
        await nc.publish("heldout.dn", b"1", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"})
        commit = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1"}
        ack = json.loads((await nc.request("heldout.dn", b"2", headers=commit, timeout=5)).data)
        state = (await api(nc, f"$JS.API.STREAM.INFO.{STREAM}"))["state"]
        print("commit answer", ack, "messages", state["messages"])
        return 0 if "error" in ack and state["messages"] == 0 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
