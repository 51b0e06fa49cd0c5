"""A stream source may not have both filter_subject and subject_transforms: such a config is refused, also when the
source has an external block (ADR-36 "you can NOT also use the single string subject filters"; nats-server 6bf28d5,
fixed in 2.12.5). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

ORIGIN, SOURCED = "HELDOUT_SRCX_O", "HELDOUT_SRCX_S"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{ORIGIN}", {"name": ORIGIN, "subjects": ["heldout.srcx.>"]})
        answers = []
        for external in (None, {}):
            source = {
                "name": ORIGIN,
                "filter_subject": "heldout.srcx.a",
                "subject_transforms": [{"src": "heldout.srcx.a", "dest": ""}],
            }
            if external is not None:
                source["external"] = external
            answer = await api(nc, f"$JS.API.STREAM.CREATE.{SOURCED}", {"name": SOURCED, "sources": [source]})
            error = answer.get("error") or {}
            answers.append((error.get("code"), error.get("err_code")) if error else "created")
            await api(nc, f"$JS.API.STREAM.DELETE.{SOURCED}")
        print("without external:", answers[0], "with external:", answers[1])
        return 0 if answers[0] != "created" and answers[1] == answers[0] else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{SOURCED}")
        await api(nc, f"$JS.API.STREAM.DELETE.{ORIGIN}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
