"""A message published with Nats-TTL 1s is removed about a second later, also while messages with a 1 hour TTL keep
arriving (ADR-43 "Per-Message TTL"; nats-server 82c51f5, fixed in 2.11.10). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_TTLTIMER"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def keep_publishing(js):
    while True:
        await asyncio.sleep(0.1)
        await js.publish("heldout.ttl", b"", headers={"Nats-TTL": "1h"})


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(
            nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.ttl"], "allow_msg_ttl": True}
        )
        js = nc.jetstream()
        await js.publish("heldout.ttl", b"", headers={"Nats-TTL": "1h"})
        background = asyncio.create_task(keep_publishing(js))
        try:
            seq = (await js.publish("heldout.ttl", b"short", headers={"Nats-TTL": "1s"})).seq
            gone = False
            for _ in range(40):  # up to 4 s
                await asyncio.sleep(0.1)
                answer = await api(nc, f"$JS.API.STREAM.MSG.GET.{STREAM}", {"seq": seq})
                if (answer.get("error") or {}).get("err_code") == 10037:
                    gone = True
                    break
        finally:
            background.cancel()
        print("the 1s message was", "removed" if gone else "still stored after 4 s")
        return 0 if gone else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
