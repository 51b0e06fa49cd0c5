"""A zero in a stream's consumer_limits means no limit: updating a stream to consumer_limits with only
inactive_threshold set is accepted while it has a consumer with the default max_ack_pending (docs, consumer_limits;
nats-server b0b98ca, fixed in 2.14.3). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_ZEROLIMIT"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.zl.*"]}
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        consumer = {"name": "C", "ack_policy": "explicit"}
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.C", {"stream_name": STREAM, "config": consumer})
        cfg["consumer_limits"] = {"inactive_threshold": 10_000_000_000}
        answer = await api(nc, f"$JS.API.STREAM.UPDATE.{STREAM}", cfg)
        print("update", answer.get("error") or answer["config"]["consumer_limits"])
        return 0 if "error" not in answer else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
