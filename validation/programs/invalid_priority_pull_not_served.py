"""A pull request carrying priority-group fields to a consumer without a priority policy is refused with a 400
status and is not served: no message is delivered to it (ADR-42; nats-server 3f59f92, fixed in 2.14.3). Exits 1
when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BADPRIO"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["heldout.bp"]})
        js = nc.jetstream()
        for _ in range(3):
            await js.publish("heldout.bp", b"x")
        cfg = {"durable_name": "C", "ack_policy": "explicit"}
        await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.C", {"stream_name": STREAM, "config": cfg})
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        request = {"batch": 1, "expires": 2_000_000_000, "group": "A", "min_pending": 1}
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.C", json.dumps(request).encode(), reply=inbox)
        answers = []
        try:
            while True:
                msg = await sub.next_msg(timeout=1)
                status = msg.headers.get("Status") if msg.headers else None
                answers.append(status or "message")
        except nats.errors.TimeoutError:
            pass
        print("answers", answers)
        return 0 if answers and answers[0] == "400" and "message" not in answers else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
