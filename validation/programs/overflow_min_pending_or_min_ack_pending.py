"""An overflow pull request with both min_pending and min_ack_pending is served when either is satisfied (boolean
OR, ADR-42 "Overflow"): with 50 pending and nothing ack pending, min_pending 10 + min_ack_pending 5 gets a message
(nats-server edf2061, fixed in 2.12.5). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_OVERFLOWOR"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.ov.>"]})
        cfg = {
            "durable_name": "O",
            "ack_policy": "explicit",
            "priority_groups": ["A"],
            "priority_policy": "overflow",
        }
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.O", {"stream_name": STREAM, "config": cfg})
        js = nc.jetstream()
        for i in range(50):
            await js.publish("heldout.ov.1", str(i).encode())
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        request = {"batch": 1, "expires": 2_000_000_000, "group": "A", "min_pending": 10, "min_ack_pending": 5}
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.O", json.dumps(request).encode(), reply=inbox)
        msg = await sub.next_msg(timeout=5)
        status = msg.headers.get("Status") if msg.headers else None
        print("first answer:", status or f"message {msg.data!r}")
        return 0 if status is None else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
