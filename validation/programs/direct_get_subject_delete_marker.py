"""A direct get of the last message on a subject whose message expired returns the subject delete marker the
server placed (ADR-43 direct get; ADR-48 markers), a well-formed message with its sequence in Nats-Sequence
(nats-server#6826, fixed in 2.11.2). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_SDMGET"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {
            "name": STREAM,
            "subjects": ["heldout.sdm"],
            "allow_msg_ttl": True,
            "subject_delete_marker_ttl": 1_000_000_000,
            "allow_direct": True,
        }
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        await nc.request("heldout.sdm", b"x", headers={"Nats-TTL": "1s"}, timeout=5)
        await asyncio.sleep(1.8)  # the message expires and the marker takes its place
        print("state", (await api(nc, f"$JS.API.STREAM.INFO.{STREAM}"))["state"])
        try:
            reply = await nc.request(f"$JS.API.DIRECT.GET.{STREAM}.heldout.sdm", b"", timeout=5)
        except Exception as exc:
            print("direct get failed:", repr(exc))
            return 1
        headers = reply.headers or {}
        print("headers", headers, "data", reply.data)
        return 0 if headers.get("Nats-Sequence") == "2" and reply.data == b"" else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
