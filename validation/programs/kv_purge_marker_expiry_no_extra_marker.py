"""When a KV purge marker ages out of a bucket with limit markers (subject_delete_marker_ttl), no further
subject delete marker is placed for it: the purge marker already says the key is gone (ADR-48; nats-server
9114366, fixed in 2.11.7). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_KVPURGE"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {
            "name": STREAM,
            "subjects": ["$KV.heldout.>"],
            "max_msgs_per_subject": 1,
            "max_age": 2_000_000_000,
            "allow_rollup_hdrs": True,
            "deny_delete": True,
            "allow_direct": True,
            "allow_msg_ttl": True,
            "subject_delete_marker_ttl": 60_000_000_000,
        }
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        headers = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
        print((await nc.request("$KV.heldout.key", b"", headers=headers, timeout=5)).data)
        await asyncio.sleep(3)  # max_age removes the purge marker
        state = (await api(nc, f"$JS.API.STREAM.INFO.{STREAM}"))["state"]
        print(state)
        return 0 if state["last_seq"] == 1 and state["messages"] == 0 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
