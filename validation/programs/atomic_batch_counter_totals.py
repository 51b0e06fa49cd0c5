"""Counter increments published as one atomic batch are stored as running totals like any increment: the batch
+1, +2 stores {"val":"1"} then {"val":"3"} (ADR-49 counters, ADR-50 atomic batches; nats-server df8c525, fixed in
2.14.3). Exits 1 when the bug shows."""

import asyncio
import base64
import json
import sys

import nats

STREAM = "HELDOUT_BATCHCTR"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.ctr"], "allow_atomic": True, "allow_msg_counter": True}
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        await nc.publish(
            "heldout.ctr", b"", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1", "Nats-Incr": "1"}
        )
        headers = {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1", "Nats-Incr": "2"}
        ack = json.loads((await nc.request("heldout.ctr", b"", headers=headers, timeout=5)).data)
        print("commit ack", ack)
        values = []
        for seq in (1, 2):
            got = await api(nc, f"$JS.API.STREAM.MSG.GET.{STREAM}", {"seq": seq})
            values.append(base64.b64decode(got["message"].get("data", "")).decode() if "message" in got else got)
        print("stored", values)
        return 0 if values == ['{"val":"1"}', '{"val":"3"}'] else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
