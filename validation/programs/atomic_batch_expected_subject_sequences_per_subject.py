"""In an atomic batch, Nats-Expected-Last-Subject-Sequence with a -Subject filter is checked against each filter's
own last message before the batch: four messages on four entities, each expecting its entity's last sequence
(18, 19, 11, and 0 for a new one), commit together (ADR-50 "Server Behavior Design"; nats-server b40e25f, fixed in
2.14.4). Exits 1 when the bug shows."""

import asyncio
import json
import sys

import nats

STREAM = "HELDOUT_BATCHOWN"


async def api(nc, subject, body=None):
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    return json.loads(reply.data)


async def main(url):
    nc = await nats.connect(url)
    try:
        cfg = {"name": STREAM, "subjects": ["heldout.ev.>"], "storage": "memory", "allow_atomic": True}
        await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        js = nc.jetstream()
        entry = "diary.entry_" + "B" * 24
        old_day = "diary-day.day_" + "C" * 43
        target_day = "diary-day.day_" + "A" * 43
        mutation = "mutation.mut_" + "D" * 43
        entities = [f"seed.entity_{i + 1:02d}" for i in range(19)]
        entities[10], entities[17], entities[18] = target_day, entry, old_day
        for entity in entities:
            await js.publish(f"heldout.ev.{entity}.balance", b"")
        batch = list(zip([entry, old_day, target_day, mutation], [18, 19, 11, 0], strict=True))
        ack = None
        for i, (entity, expected) in enumerate(batch, start=1):
            headers = {
                "Nats-Expected-Last-Subject-Sequence-Subject": f"heldout.ev.{entity}.*",
                "Nats-Expected-Last-Subject-Sequence": str(expected),
                "Nats-Batch-Id": "b1",
                "Nats-Batch-Sequence": str(i),
            }
            if i == len(batch):
                headers["Nats-Batch-Commit"] = "1"
                ack = json.loads(
                    (await nc.request(f"heldout.ev.{entity}.balance", b"", headers=headers, timeout=5)).data
                )
            else:
                await nc.publish(f"heldout.ev.{entity}.balance", b"", headers=headers)
        print("commit answer", ack)
        return 0 if "error" not in ack and ack.get("seq") == 23 and ack.get("count") == 4 else 1
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1])))
    except Exception as exc:
        print(f"could not run: {exc!r}", file=sys.stderr)
        sys.exit(2)
