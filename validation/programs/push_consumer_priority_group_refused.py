"""Priority groups are for pull consumers: a push consumer (deliver_subject) with priority_groups and a priority
policy is refused with 400/10178 (ADR-42; nats-server 7a47a1a, fixed in 2.11.7). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_PUSHPG"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.pushpg"]})
        cfg = {
            "durable_name": "P",
            "deliver_subject": "heldout.deliver",
            "ack_policy": "explicit",
            "priority_groups": ["A"],
            "priority_policy": "overflow",
        }
        answer = await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.P", {"stream_name": STREAM, "config": cfg})
        error = answer.get("error") or {}
        print("answer", error or "created")
        return 0 if (error.get("code"), error.get("err_code")) == (400, 10178) else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
