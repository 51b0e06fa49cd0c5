"""An atomic batch in which any message carries Nats-Expected-Last-Msg-Id is refused with 400/10177 and nothing of
it is stored (ADR-50 "Unsupported headers"): here the first message has it, the commit does not (nats-server
78855d6, fixed in 2.12.2). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BATCHMSGID"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(
            nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.bm"], "allow_atomic": True}
        )
        first = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1", "Nats-Expected-Last-Msg-Id": "none"}
        await nc.publish("heldout.bm", b"1", headers=first)
        commit = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1"}
        ack = json.loads((await nc.request("heldout.bm", b"2", headers=commit, timeout=5)).data)
        state = (await api(nc, f"$JS.API.STREAM.INFO.{STREAM}"))["state"]
        print("commit answer", ack, "messages", state["messages"])
        refused = (ack.get("error") or {}).get("err_code") == 10177
        return 0 if refused and state["messages"] == 0 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
