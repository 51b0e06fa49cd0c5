"""Idle heartbeats (ADR-9, ADR-37): what the server sends, checked on the wire over the suite's own connection."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from jetcheck.conformance.jsapi import NS, create_consumer
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

HEARTBEAT_S = 0.2
EXPIRES_S = 1.0
WAIT_S = 3.0


def header(msg, key: str) -> str | None:
    """A header of a nats-py message by its name (nats-py keys some of them with enum members)."""
    for k, v in (msg.headers or {}).items():
        if k == key or getattr(k, "value", None) == key:
            return v
    return None


def is_heartbeat(msg) -> bool:
    return header(msg, "Status") == "100" and (header(msg, "Description") or "").lower() == "idle heartbeat"


async def pull_consumer(nc, stream: str, name: str) -> None:
    # create_consumer returns once pull requests reach the consumer: in a cluster one sent right after the create
    # reply can reach a node that has no interest in it yet and be answered 503 (no responders)
    await create_consumer(nc, stream, durable_name=name, ack_policy="none")


async def statuses_until_done(nc, sub, timeout: float) -> list[tuple[float, object]]:
    """(arrival time, message) for every message on `sub` (of connection `nc`) until a non-100 status or `timeout`,
    while the server still answers."""
    loop = asyncio.get_running_loop()
    started, got = loop.time(), []
    while loop.time() - started < timeout:
        try:
            msg = await sub.next_msg(timeout - (loop.time() - started))
        except TimeoutError:
            await answering(nc)
            break
        got.append((loop.time() - started, msg))
        status = header(msg, "Status")
        if status and status != "100":
            break
    return got


def spacing(arrivals: list[float]) -> list[float]:
    return [round(b - a, 3) for a, b in itertools.pairwise(arrivals)]


def interval_problems(times: list[float], interval: float, expected: int) -> list[str]:
    problems = []
    if len(times) < expected:
        problems.append(f"{len(times)} heartbeats (wanted at least {expected})")
    off = [gap for gap in spacing([0.0, *times]) if not 0.5 * interval <= gap <= 2 * interval]
    if off:
        problems.append(f"gaps {off} s outside [{0.5 * interval}, {2 * interval}] around the {interval} s interval")
    return problems


@pytest.mark.rule("heartbeat.pull-idle")
async def test_an_idle_pull_request_gets_heartbeats_at_its_interval(nc, js, make_stream, names, observe):
    """An idle pull request (expires 1 s, heartbeat 0.2 s) gets 100 Idle Heartbeat with the last sequences."""
    stream = await make_stream()
    consumer = names.consumer()
    await pull_consumer(nc, stream.name, consumer)
    for _ in range(2):
        await js.publish(stream.subject("x"), b"m")
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.{consumer}"
    await nc.publish(subject, json.dumps({"batch": 2}).encode(), reply=inbox)
    delivered = [await sub.next_msg(WAIT_S) for _ in range(2)]
    assert [header(m, "Status") for m in delivered] == [None, None], "the first pull did not deliver 2 messages"
    request = {"batch": 1, "expires": int(EXPIRES_S * NS), "idle_heartbeat": int(HEARTBEAT_S * NS)}
    await nc.publish(subject, json.dumps(request).encode(), reply=inbox)
    got = await statuses_until_done(nc, sub, EXPIRES_S + 1.0)
    beats = [(t, m) for t, m in got if is_heartbeat(m)]
    times = [t for t, _ in beats]
    observe("heartbeat_at_s", [round(t, 3) for t in times])
    observe("ended_with", [f"{header(m, 'Status')} {header(m, 'Description')}" for _, m in got if not is_heartbeat(m)])
    problems = interval_problems(times, HEARTBEAT_S, int(EXPIRES_S / HEARTBEAT_S) - 2)
    lasts = {(header(m, "Nats-Last-Consumer"), header(m, "Nats-Last-Stream")) for _, m in beats}
    if lasts != {("2", "2")}:
        problems.append(f"Nats-Last-Consumer/Nats-Last-Stream {sorted(lasts, key=str)} (wanted 2/2 after 2 deliveries)")
    assert not problems, "idle pull request: " + "; ".join(problems)


async def push_consumer(nc, stream: str, name: str, deliver: str) -> None:
    await create_consumer(nc, stream, durable_name=name, deliver_subject=deliver, ack_policy="none",
                          idle_heartbeat=int(HEARTBEAT_S * NS))  # fmt: skip


@pytest.mark.rule("heartbeat.push-idle")
async def test_an_idle_push_consumer_gets_heartbeats_at_its_interval(nc, js, make_stream, names, observe):
    """An idle push consumer (heartbeat 0.2 s) gets 100 Idle Heartbeat with the last delivered sequences."""
    stream = await make_stream()
    for _ in range(3):
        await js.publish(stream.subject("x"), b"m")
    deliver = nc.new_inbox()
    sub = await nc.subscribe(deliver)
    await push_consumer(nc, stream.name, names.consumer(), deliver)
    delivered = [await sub.next_msg(WAIT_S) for _ in range(3)]
    assert [header(m, "Status") for m in delivered] == [None] * 3, "the push consumer did not deliver 3 messages"
    loop = asyncio.get_running_loop()
    idle_from, beats = loop.time(), []
    while len(beats) < 4:
        try:
            msg = await sub.next_msg(WAIT_S)
        except TimeoutError:
            await answering(nc)  # a server still answering sent too few heartbeats: a failure, below
            break
        assert is_heartbeat(msg), f"an idle push consumer got {msg.headers or msg.data!r}, not an idle heartbeat"
        beats.append((loop.time() - idle_from, msg))
    times = [t for t, _ in beats]
    observe("heartbeat_at_s", [round(t, 3) for t in times])
    problems = interval_problems(times, HEARTBEAT_S, 4)
    lasts = {(header(m, "Nats-Last-Consumer"), header(m, "Nats-Last-Stream")) for _, m in beats}
    if lasts != {("3", "3")}:
        problems.append(f"Nats-Last-Consumer/Nats-Last-Stream {sorted(lasts, key=str)} (wanted 3/3 after 3 deliveries)")
    assert not problems, "idle push consumer: " + "; ".join(problems)


@pytest.mark.rule("heartbeat.not-while-flowing")
async def test_no_heartbeat_arrives_while_messages_flow(nc, js, make_stream, names, observe):
    """A message every quarter interval keeps heartbeats away; once the flow stops they come back."""
    stream = await make_stream()
    deliver = nc.new_inbox()
    arrivals: list[tuple[float, bool]] = []
    loop = asyncio.get_running_loop()

    async def on_msg(msg) -> None:
        arrivals.append((loop.time(), is_heartbeat(msg)))

    await nc.subscribe(deliver, cb=on_msg)
    await push_consumer(nc, stream.name, names.consumer(), deliver)
    flow_from = loop.time()
    for _ in range(int(6 * HEARTBEAT_S / (HEARTBEAT_S / 4))):
        await js.publish(stream.subject("x"), b"m")
        await asyncio.sleep(HEARTBEAT_S / 4)  # the publishing rate is the point of this check
    flow_until = loop.time()
    await asyncio.sleep(3 * HEARTBEAT_S)  # the idle time after the flow, in which heartbeats must resume
    during = [t - flow_from for t, beat in arrivals if beat and flow_from < t <= flow_until]
    after = [t - flow_until for t, beat in arrivals if beat and t > flow_until]
    observe("heartbeats_during_flow_at_s", [round(t, 3) for t in during])
    observe("first_heartbeat_after_flow_s", round(after[0], 3) if after else None)
    assert not during, f"{len(during)} idle heartbeats arrived while a message came every {HEARTBEAT_S / 4}s"
    assert after, f"no idle heartbeat within {3 * HEARTBEAT_S}s after the flow stopped (interval {HEARTBEAT_S}s)"


async def pull_status(nc, stream: str, consumer: str, request: dict) -> list[tuple[str | None, str | None]]:
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", json.dumps(request).encode(), reply=inbox)
    got = await statuses_until_done(nc, sub, WAIT_S)
    await sub.unsubscribe()
    return [(header(m, "Status"), header(m, "Description")) for _, m in got]


TOO_LARGE = ("400", "Bad Request - heartbeat value too large")


@pytest.mark.rule("heartbeat.pull-heartbeat-too-large")
@pytest.mark.parametrize(("heartbeat_s", "expires_s"), [(0.2, 0.3), (0.6, 1.0)], ids=["0.2-of-0.3", "0.6-of-1"])
async def test_a_heartbeat_over_half_the_expiry_is_rejected(nc, make_stream, names, heartbeat_s, expires_s):
    """idle_heartbeat * 2 > expires gets 400 Bad Request - heartbeat value too large; exactly half is accepted."""
    stream = await make_stream()
    consumer = names.consumer()
    await pull_consumer(nc, stream.name, consumer)
    request = {"batch": 1, "expires": int(expires_s * NS), "idle_heartbeat": int(heartbeat_s * NS)}
    got = await pull_status(nc, stream.name, consumer, request)
    assert got == [TOO_LARGE], f"pull request with heartbeat {heartbeat_s}s and expires {expires_s}s got {got}"
    half = {"batch": 1, "expires": int(0.2 * NS), "idle_heartbeat": int(0.1 * NS)}
    got = await pull_status(nc, stream.name, consumer, half)
    assert got and got[-1][0] == "408" and TOO_LARGE not in got, (
        f"a heartbeat of exactly half the expiry (0.1 of 0.2 s) should run to 408 Request Timeout; got {got}"
    )


@pytest.mark.rule("heartbeat.pull-heartbeat-needs-expires")
async def test_a_heartbeat_without_expiry_is_rejected(nc, make_stream, names):
    """idle_heartbeat without expires gets 400 Bad Request - heartbeat value too large."""
    stream = await make_stream()
    consumer = names.consumer()
    await pull_consumer(nc, stream.name, consumer)
    got = await pull_status(nc, stream.name, consumer, {"batch": 1, "idle_heartbeat": int(0.1 * NS)})
    assert got == [TOO_LARGE], f"pull request with heartbeat 0.1s and no expires got {got}"
