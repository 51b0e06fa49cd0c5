"""A durable consumer created through the legacy $JS.API.CONSUMER.DURABLE.CREATE subject has its name equal to its
durable name, as one created through CONSUMER.CREATE does (ADR-15 durable create; nats-server#7847, fixed in 2.12.5).
Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_LEGACYDUR"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.ld"]})
        request = {"stream_name": STREAM, "config": {"durable_name": "D", "ack_policy": "explicit"}, "action": "create"}
        answer = await api(nc, f"$JS.API.CONSUMER.DURABLE.CREATE.{STREAM}.D", request)
        config = answer.get("config") or {}
        print("answer", answer.get("error") or {k: config.get(k) for k in ("name", "durable_name")})
        return 0 if config.get("name") == "D" and config.get("durable_name") == "D" else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
