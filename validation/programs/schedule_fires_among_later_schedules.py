"""A message schedule due in one second fires about then, also while schedules due in an hour keep arriving: its
target message is stored and the schedule removed (ADR-51; nats-server 2d3bee8, fixed in 2.12.1). Exits 1 when the
bug shows."""

import asyncio
import datetime
import json
import sys

import nats

STREAM = "HELDOUT_SCHEDTIMER"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


def at(seconds):
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return "@at " + when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def keep_scheduling(js):
    i = 0
    while True:
        await asyncio.sleep(0.1)
        i += 1
        headers = {"Nats-Schedule": at(3600), "Nats-Schedule-Target": "heldout.sched.msg"}
        await js.publish(f"heldout.sched.s{i}", b"", headers=headers)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.sched.>"], "allow_msg_schedules": True}
        print((await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)).get("error"))
        js = nc.jetstream()
        headers = {"Nats-Schedule": at(3600), "Nats-Schedule-Target": "heldout.sched.msg"}
        await js.publish("heldout.sched.first", b"", headers=headers)
        background = asyncio.create_task(keep_scheduling(js))
        try:
            headers = {"Nats-Schedule": at(1), "Nats-Schedule-Target": "heldout.sched.msg"}
            seq = (await js.publish("heldout.sched.validate", b"", headers=headers)).seq
            fired = False
            for _ in range(40):  # up to 4 s
                await asyncio.sleep(0.1)
                answer = await api(nc, f"$JS.API.STREAM.MSG.GET.{STREAM}", {"seq": seq})
                if (answer.get("error") or {}).get("err_code") == 10037:
                    fired = True
                    break
        finally:
            background.cancel()
        print("the schedule due in 1 s", "fired" if fired else "had not fired after 4 s")
        return 0 if fired else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
