"""The durability workload: paced publishers and a durable pull consumer whose every step is recorded.

Each publisher sends its writes one after another (write n+1 only once write n is settled), at a fixed rate, for a
bounded time and count. A publisher "with ids" sends each write with a Nats-Msg-Id and retries it, with the same id,
when it times out or fails; one without ids sends each write once. Every attempt becomes a PublishRecord: `ok`
with the PubAck's sequence and duplicate flag, `error` when the server or client said no, `unknown` when it timed
out (the write may or may not have been stored). The consumer fetches and acks explicitly, recording every message.

Clients connect to every node and reconnect forever, so faults on the nodes show up as errors and timeouts in the
records, not as a workload that gives up. Nothing here knows about faults; the checker reads the records.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig

from jetcheck.load.pacing import Schedule

from .history import DeleteRecord, DeliveryRecord, PublishRecord, PurgeRecord

T = TypeVar("T")

MSG_ID_HEADER = "Nats-Msg-Id"
RETRY_PAUSE_S = 0.25  # between attempts of a write, so a retry does not hammer a cluster electing a leader
FETCH_BATCH = 100
FETCH_WAIT_S = 1.0


@dataclass(frozen=True)
class WorkloadPlan:
    """How much to write: `publishers_with_ids` + `publishers_without_ids` publishers, each `rate` writes/s for
    `duration_s` seconds and at most `max_writes` writes."""

    duration_s: float
    publishers_with_ids: int = 2
    publishers_without_ids: int = 2
    rate: float = 40.0
    max_writes: int = 10_000
    publish_timeout_s: float = 2.0
    attempts: int = 4  # of a write with an id; a write without one is tried once
    delete_every_s: float = 2.0  # one acknowledged write deleted this often (0: none), to see it never comes back
    purge_every_s: float = 10.0  # the purged publisher's writes purged below a recent sequence this often (0: never)

    @property
    def purged_publisher(self) -> int:
        """The publisher whose writes go to a subject of their own, which the workload purges: the last one."""
        return self.publishers_with_ids + self.publishers_without_ids - 1


def purged_subject(subject: str) -> str:
    """Where the purged publisher writes: beside `subject`, so that a purge filtered on it leaves the others' writes
    whole for the other rules to judge."""
    return f"{subject}.purged"


@dataclass
class WorkloadLog:
    """What the workload did, appended to as it happens."""

    publishes: list[PublishRecord] = field(default_factory=list)
    deliveries: list[DeliveryRecord] = field(default_factory=list)
    consumer_errors: list[str] = field(default_factory=list)
    deletes: list[DeleteRecord] = field(default_factory=list)
    purges: list[PurgeRecord] = field(default_factory=list)


def write_name(publisher: int, number: int) -> str:
    return f"p{publisher}-{number}"


async def publish_once(
    nc: Client, subject: str, write: str, msg_id: str, publisher: int, attempt: int, timeout_s: float
) -> PublishRecord:
    """One publish of `write`, as a record of what the publisher was told."""
    js = nc.jetstream(timeout=timeout_s)
    headers = {MSG_ID_HEADER: msg_id} if msg_id else None
    start = time.time_ns()
    outcome, error, ack = await _answer(js.publish(subject, write.encode(), timeout=timeout_s, headers=headers))
    seq, duplicate = (ack.seq, bool(ack.duplicate)) if ack is not None else (0, False)
    return PublishRecord(publisher, write, msg_id, attempt, outcome, seq, duplicate, error, start, time.time_ns())


async def _answer(request: Awaitable[T]) -> tuple[str, str, T | None]:
    """What the server said to one request, as the records put it: (outcome, error, the answer when ok)."""
    try:
        return "ok", "", await request
    except TimeoutError as exc:  # nats-py's, and asyncio's where nats-py lets its own through
        return "unknown", type(exc).__name__, None
    except nats.js.errors.APIError as exc:
        return "error", f"{exc.code}/{exc.err_code} {exc.description}", None
    except nats.errors.Error as exc:
        return "error", type(exc).__name__, None


async def _publisher(nc: Client, subject: str, publisher: int, with_ids: bool, plan: WorkloadPlan, log: WorkloadLog):
    schedule = Schedule(plan.rate)
    deadline = time.monotonic() + plan.duration_s
    for number in range(plan.max_writes):
        await schedule.sleep_until_next()
        schedule.take_due(time.time_ns())
        if time.monotonic() >= deadline:
            return
        write = write_name(publisher, number)
        for attempt in range(1, (plan.attempts if with_ids else 1) + 1):
            record = await publish_once(
                nc, subject, write, write if with_ids else "", publisher, attempt, plan.publish_timeout_s
            )
            log.publishes.append(record)
            if record.outcome == "ok" or time.monotonic() >= deadline:
                break
            await asyncio.sleep(RETRY_PAUSE_S)


async def create_consumer(nc: Client, stream: str, durable: str) -> None:
    config = ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=10.0, max_ack_pending=5000)
    await nc.jetstream().add_consumer(stream, config)


async def consume(nc: Client, stream: str, durable: str, log: WorkloadLog, stop: asyncio.Event) -> None:
    """Fetch, record and ack until `stop` is set."""
    subscription = None
    while not stop.is_set():
        try:
            if subscription is None:
                subscription = await nc.jetstream().pull_subscribe_bind(durable, stream)
            messages = await subscription.fetch(FETCH_BATCH, timeout=FETCH_WAIT_S)
        except TimeoutError:  # nats-py's, and asyncio's where nats-py lets its own through
            continue
        except nats.errors.Error as exc:
            log.consumer_errors.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        for message in messages:
            meta = message.metadata
            headers = message.headers or {}
            log.deliveries.append(
                DeliveryRecord(
                    meta.sequence.stream,
                    message.data.decode(errors="replace"),
                    headers.get(MSG_ID_HEADER, ""),
                    meta.num_delivered,
                    time.time_ns(),
                )
            )
            with contextlib.suppress(nats.errors.Error):  # an ack lost to a fault: the message comes again
                await message.ack()


async def delete_acked(nc: Client, stream: str, plan: WorkloadPlan, log: WorkloadLog) -> None:
    """Every `plan.delete_every_s` while the publishers write, delete the newest acknowledged write not deleted yet,
    by the sequence its PubAck named, and record what the server said."""
    if not plan.delete_every_s:
        return
    deadline, tried = time.monotonic() + plan.duration_s, set()
    while time.monotonic() + plan.delete_every_s < deadline:
        await asyncio.sleep(plan.delete_every_s)  # a pace, not a wait for an event
        newest = next((p for p in reversed(log.publishes) if p.outcome == "ok" and p.seq and p.publisher >= 0
                       and p.write not in tried), None)  # fmt: skip
        if newest is None:
            continue
        tried.add(newest.write)
        start = time.time_ns()
        outcome, error, _ = await _answer(nc.jetstream(timeout=plan.publish_timeout_s).delete_msg(stream, newest.seq))
        log.deletes.append(DeleteRecord(newest.write, newest.seq, outcome, error, start, time.time_ns()))


async def purge_acked(nc: Client, stream: str, subject: str, plan: WorkloadPlan, log: WorkloadLog) -> None:
    """Every `plan.purge_every_s` while the publishers write, purge the purged publisher's subject below the middle
    of the sequences acknowledged to it since the last purge (the older half goes; the newer half stays to be
    judged as any other write), and record what the server said."""
    if not plan.purge_every_s:
        return
    deadline, below, publisher = time.monotonic() + plan.duration_s, 0, plan.purged_publisher
    while time.monotonic() + plan.purge_every_s < deadline:
        await asyncio.sleep(plan.purge_every_s)  # a pace, not a wait for an event
        since = sorted(p.seq for p in log.publishes if p.outcome == "ok" and p.seq > below and p.publisher == publisher)
        if len(since) < 2:
            continue
        below = since[len(since) // 2]
        start = time.time_ns()
        js = nc.jetstream(timeout=plan.publish_timeout_s)
        outcome, error, _ = await _answer(js.purge_stream(stream, seq=below, subject=purged_subject(subject)))
        log.purges.append(PurgeRecord(below, publisher, outcome, error, start, time.time_ns()))


async def run_publishers(nc: Client, subject: str, plan: WorkloadPlan, log: WorkloadLog) -> None:
    publishers = [
        _publisher(
            nc,
            purged_subject(subject) if number == plan.purged_publisher and plan.purge_every_s else subject,
            number,
            number < plan.publishers_with_ids,
            plan,
            log,
        )
        for number in range(plan.publishers_with_ids + plan.publishers_without_ids)
    ]
    await asyncio.gather(*publishers)
