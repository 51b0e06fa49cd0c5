"""A stream updated to allow_msg_ttl honours Nats-TTL from then on: a message published with Nats-TTL 1s after the
update is removed about a second later (ADR-43; nats-server#6920, fixed in 2.11.5). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_TTLUPDATE"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.tu"]}
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        cfg["allow_msg_ttl"] = True
        answer = await api(nc, f"$JS.API.STREAM.UPDATE.{STREAM}", cfg)
        print("update", answer.get("error") or "ok")
        ack = json.loads((await nc.request("heldout.tu", b"", headers={"Nats-TTL": "1s"}, timeout=5)).data)
        print("publish", ack)
        gone = False
        for _ in range(30):  # up to 3 s
            await asyncio.sleep(0.1)
            got = await api(nc, f"$JS.API.STREAM.MSG.GET.{STREAM}", {"seq": ack.get("seq", 1)})
            if (got.get("error") or {}).get("err_code") == 10037:
                gone = True
                break
        print("the 1s message was", "removed" if gone else "still stored after 3 s")
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
