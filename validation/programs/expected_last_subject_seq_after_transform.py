"""Nats-Expected-Last-Subject-Sequence is checked against the subject the message is stored under: with a stream
transform foo -> bar and a message on bar at seq 1, a publish to foo expecting 0 is refused with 400/10071 in an
atomic batch as in a plain publish (ADR-50; nats-server be8ae5e, fixed in 2.12.8). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_XFORMEXP"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {
            "name": STREAM,
            "subjects": ["heldout.xf.foo", "heldout.xf.bar"],
            "subject_transform": {"src": "heldout.xf.foo", "dest": "heldout.xf.bar"},
            "allow_atomic": True,
        }
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        await nc.request("heldout.xf.foo", b"", timeout=5)
        answers = []
        for subject in ("heldout.xf.bar", "heldout.xf.foo"):
            headers = {"Nats-Expected-Last-Subject-Sequence": "0"}
            answers.append(json.loads((await nc.request(subject, b"", headers=headers, timeout=5)).data))
            batch = {**headers, "Nats-Batch-Id": f"b-{subject}", "Nats-Batch-Sequence": "1", "Nats-Batch-Commit": "1"}
            answers.append(json.loads((await nc.request(subject, b"", headers=batch, timeout=5)).data))
        for answer in answers:
            print(answer)
        codes = [(a.get("error") or {}).get("err_code") for a in answers]
        return 0 if codes == [10071] * 4 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
