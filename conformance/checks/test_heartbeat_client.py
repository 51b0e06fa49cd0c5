"""Missed heartbeats, client side (ADR-37): what the client under test tells the application when they stop.

The client (--client) consumes through a fault-injection proxy; the proxy drops only the idle heartbeats, or
holds all server traffic, while the suite publishes over its own connection.
"""

from __future__ import annotations

import asyncio

import pytest

from jetcheck.conformance.clients.base import MISSED_HEARTBEAT, TERMINAL, connected
from jetcheck.conformance.jsapi import api

pytestmark = pytest.mark.asyncio

HEARTBEAT_S = 0.2
WAIT_S = 5.0
ADR37 = "ADR-37: a warning once 2 x idle_heartbeat pass without any message, the timer reset by every message"


def documented(client) -> str:
    docs = client.documented
    said = docs.missed_heartbeats or f"{client.name} documents no missed-heartbeat report"
    return f"{said}; {docs.heartbeat_behaviour}" if docs.heartbeat_behaviour else said


def now() -> float:
    return asyncio.get_running_loop().time()


async def fetch_with_heartbeats_dropped(client, target, proxied, nc, stream, names) -> dict:
    """What the client's fetch does when every heartbeat of an idle 1 s pull request is dropped."""
    consumer = names.consumer()
    await api(nc, f"$JS.API.CONSUMER.CREATE.{stream.name}.{consumer}", {"stream_name": stream.name, "config": {
        "durable_name": consumer, "ack_policy": "none"}})  # fmt: skip
    async with connected(client, proxied.url, target.credentials) as s:
        outcome = await s.fetch(stream.name, consumer, batch=1, expires=1.0, idle_heartbeat=HEARTBEAT_S)
    return {
        "ended_after_s": round(outcome.took_s, 3),
        "reported": outcome.error.detail if outcome.error else "",
        "kind": outcome.error.kind if outcome.error else "",
    }


@pytest.mark.rule("heartbeat.client-reports-missed")
async def test_the_client_reports_missed_heartbeats_after_two_intervals(
    client, target, proxied, nc, make_stream, names, observe
):
    """With heartbeats dropped in transit, the client warns about 2 intervals after the last one arrived."""
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        await s.push(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        await proxied.wait_for(lambda: proxied.counters.heartbeats_passed >= 1, WAIT_S)
        proxied.drop_idle_heartbeats = True
        last_heartbeat = now()
        event = await s.events.wait_for(MISSED_HEARTBEAT, last_heartbeat, 5 * HEARTBEAT_S + 0.5)
        after = round(event.at - last_heartbeat, 3) if event else None
        observe("missed_heartbeat_reported_after_s", after)
        observe("client_reports", [f"{e.kind}: {e.detail}" for e in s.events.events])
        # The fault really happened: the server kept sending heartbeats and the client got none of them.
        await proxied.wait_for(lambda: proxied.counters.heartbeats_dropped >= 2, WAIT_S)
    proxied.drop_idle_heartbeats = True
    fetch = await fetch_with_heartbeats_dropped(client, target, proxied, nc, stream, names)
    observe("fetch_with_heartbeats_dropped", fetch)
    observe("adr37", ADR37)
    observe("documented", documented(client))
    assert event is not None, (
        f"{client.name} {client.version} told the application nothing in {5 * HEARTBEAT_S + 0.5}s after idle "
        f"heartbeats ({HEARTBEAT_S}s) stopped arriving on a push subscription; {ADR37}. "
        f"Documented: {documented(client)}. Its fetch(1 s, heartbeat {HEARTBEAT_S}s) with heartbeats dropped ended "
        f"after {fetch['ended_after_s']}s with {fetch['reported'] or 'messages'}"
    )
    assert 1.5 * HEARTBEAT_S <= after <= 3 * HEARTBEAT_S + 0.25, (
        f"{client.name} reported missed heartbeats {after}s after the last one; {ADR37} ({2 * HEARTBEAT_S}s here)"
    )


@pytest.mark.rule("heartbeat.client-quiet-while-flowing")
async def test_the_client_reports_nothing_while_messages_flow(client, target, proxied, js, make_stream, observe):
    """Messages every quarter interval for 6 intervals: no missed-heartbeat report, every message delivered."""
    stream = await make_stream()
    count = int(6 * HEARTBEAT_S / (HEARTBEAT_S / 4))
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.push(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        flow_from = now()
        for _ in range(count):
            await js.publish(stream.subject("x"), b"m")
            await asyncio.sleep(HEARTBEAT_S / 4)  # the publishing rate is the point of this check
        got = await sub.inbox.until(count, WAIT_S)
        spurious = s.events.of(MISSED_HEARTBEAT, flow_from)
        observe("missed_heartbeat_reports_while_flowing", len(spurious))
        observe("heartbeats_sent_while_flowing", proxied.counters.heartbeats_passed)
        observe("documented", documented(client))
    assert len(got) == count, f"{len(got)} of {count} messages were delivered"
    assert not spurious, (
        f"{client.name} reported missed heartbeats {len(spurious)} times while a message arrived every "
        f"{HEARTBEAT_S / 4}s (first: {spurious[0].detail}); {ADR37}"
    )


@pytest.mark.rule("heartbeat.client-not-terminal")
async def test_consumption_resumes_after_a_stall(client, target, proxied, js, make_stream, observe):
    """After 5 heartbeat intervals of stalled traffic the same subscription delivers every message in order."""
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.push(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        await proxied.wait_for(lambda: proxied.counters.heartbeats_passed >= 1, WAIT_S)
        stalled_at = now()
        proxied.stall(5 * HEARTBEAT_S)
        held = [(await js.publish(stream.subject("x"), b"m")).seq for _ in range(3)]
        await proxied.wait_for(lambda: not proxied.stalled, WAIT_S)
        later = [(await js.publish(stream.subject("x"), b"m")).seq for _ in range(3)]
        got = await sub.inbox.until(6, WAIT_S)
        terminal = s.events.of(TERMINAL, stalled_at)
        observe("missed_heartbeat_reports_during_stall", len(s.events.of(MISSED_HEARTBEAT, stalled_at)))
        observe("resumed_after_s", round(got[0].at - stalled_at, 3) if got else None)
    assert not terminal, f"{client.name} ended consumption after missed heartbeats: {terminal[0].detail}; {ADR37}"
    assert [d.stream_seq for d in got] == held + later, (
        f"after a {5 * HEARTBEAT_S}s stall the subscription delivered {[d.stream_seq for d in got]}, not {held + later}"
    )
