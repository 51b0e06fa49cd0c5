"""Missed heartbeats, client side (ADR-37): what the client under test tells the application when they stop.

The client (--client) consumes continuously the way it documents (nats-py: a push subscription; nats.js and
nats.go: consume() on a pull consumer) through a fault-injection proxy; the proxy drops only the idle heartbeats,
or holds all server traffic, while the suite publishes over its own connection. The heartbeat is the shortest the
client documents it accepts, so the checks take no longer than they must.
"""

from __future__ import annotations

import asyncio

import pytest

from jetcheck.conformance.clients.base import (
    MISSED_HEARTBEAT,
    TERMINAL,
    ConsumeOptions,
    PushOptions,
    Unsupported,
    connected,
)
from jetcheck.conformance.jsapi import create_consumer
from jetcheck.conformance.silence import answering, deliveries

pytestmark = pytest.mark.asyncio

WANTED_HEARTBEAT_S = 0.2  # raised to the client's documented minimum
ADR37 = "ADR-37: a warning once 2 x idle_heartbeat pass without any message, the timer reset by every message"


def heartbeat(client) -> float:
    return client.documented.idle_heartbeat(WANTED_HEARTBEAT_S)


def wait_s(client) -> float:
    return 3.0 + 4 * heartbeat(client)


def documented(client) -> str:
    docs = client.documented
    said = docs.missed_heartbeats or f"{client.name} {client.version} documents no missed-heartbeat report"
    return f"{said}; {docs.heartbeat_behaviour}" if docs.heartbeat_behaviour else said


def now() -> float:
    return asyncio.get_running_loop().time()


async def consumption(client, s, nc, stream, names, observe):
    """The client's continuous consumption of `stream` with idle heartbeats, as its adapter documents it."""
    hb = heartbeat(client)
    kind = client.documented.consumes
    observe("consumption", kind)
    observe("idle_heartbeat_s", hb)
    try:
        if kind == "pull":
            consumer = names.consumer()
            await create_consumer(nc, stream.name, durable_name=consumer, ack_policy="explicit")
            sub = await s.consume(stream.name, consumer, ConsumeOptions(idle_heartbeat=hb))
        else:
            sub = await s.push(stream.name, stream.subject(">"), PushOptions(idle_heartbeat=hb))
    except Unsupported as exc:
        pytest.fail(
            f"continuous {kind} consumption with idle heartbeats is not implemented by {client.name} "
            f"{client.version} ({exc}); ADR-37 requires it"
        )
    observe("effective_idle_heartbeat_s", getattr(sub, "effective_idle_heartbeat_s", hb))
    return sub


async def fetch_with_heartbeats_dropped(client, target, proxied, nc, stream, names) -> dict:
    """What the client's fetch does when every heartbeat of an idle pull request is dropped."""
    hb = heartbeat(client)
    expires = max(1.0, 4 * hb)
    consumer = names.consumer()
    await create_consumer(nc, stream.name, durable_name=consumer, ack_policy="none")
    async with connected(client, proxied.url, target.credentials) as s:
        try:
            outcome = await s.fetch(stream.name, consumer, batch=1, expires=expires, idle_heartbeat=hb)
        except Unsupported as exc:
            return {"expires_s": expires, "reported": f"unsupported: {exc}", "kind": "unsupported"}
    return {
        "expires_s": expires,
        "effective_idle_heartbeat_s": outcome.effective_idle_heartbeat_s,
        "ended_after_s": round(outcome.took_s, 3),
        "reported": outcome.error.detail if outcome.error else "",
        "kind": outcome.error.kind if outcome.error else "",
    }


@pytest.mark.rule("heartbeat.client-reports-missed")
async def test_the_client_reports_missed_heartbeats_after_two_intervals(
    client, target, proxied, nc, make_stream, names, observe
):
    """With heartbeats dropped in transit, the client warns about 2 intervals after the last one arrived."""
    hb = heartbeat(client)
    stream = await make_stream()
    waited = 5 * hb + 0.5
    async with connected(client, proxied.url, target.credentials) as s:
        await consumption(client, s, nc, stream, names, observe)
        await proxied.wait_for(lambda: proxied.counters.heartbeats_passed >= 1, wait_s(client))
        proxied.drop_idle_heartbeats = True
        last_heartbeat = now()
        event = await s.events.wait_for(MISSED_HEARTBEAT, last_heartbeat, waited)
        if event is None:
            await answering(s)  # only a client that still answers said nothing
        after = round(event.at - last_heartbeat, 3) if event else None
        observe("missed_heartbeat_reported_after_s", after)
        observe("client_reports", [f"{e.kind}: {e.detail}" for e in s.events.events])
        # The fault really happened: heartbeats were dropped before the client spoke, and while it stays silent
        # the server keeps sending them. A client that ends its consumption on the report may stop the heartbeats
        # after the first drop, so only silence waits for a second.
        dropped = 1 if event is not None else 2
        await proxied.wait_for(lambda: proxied.counters.heartbeats_dropped >= dropped, wait_s(client))
    proxied.drop_idle_heartbeats = True
    fetch = await fetch_with_heartbeats_dropped(client, target, proxied, nc, stream, names)
    observe("fetch_with_heartbeats_dropped", fetch)
    observe("adr37", ADR37)
    observe("documented", documented(client))
    assert event is not None, (
        f"{client.name} {client.version} told the application nothing in {waited}s after idle heartbeats "
        f"({hb}s) stopped arriving on its {client.documented.consumes} consumption; {ADR37}. "
        f"Documented: {documented(client)}. Its fetch({fetch['expires_s']}s, heartbeat {hb}s) with heartbeats "
        f"dropped ended after {fetch.get('ended_after_s')}s with {fetch['reported'] or 'messages'}"
    )
    assert 1.5 * hb <= after <= 3 * hb + 0.25, (
        f"{client.name} {client.version} reported missed heartbeats {after}s after the last one ({event.detail}); "
        f"{ADR37} ({2 * hb}s here). Documented: {documented(client)}"
    )


@pytest.mark.rule("heartbeat.client-quiet-while-flowing")
async def test_the_client_reports_nothing_while_messages_flow(
    client, target, proxied, nc, js, make_stream, names, observe
):
    """Messages every quarter interval for 6 intervals: no missed-heartbeat report, every message delivered."""
    hb = heartbeat(client)
    stream = await make_stream()
    count = 24  # one every quarter interval for 6 intervals
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await consumption(client, s, nc, stream, names, observe)
        flow_from = now()
        published = []
        for _ in range(count):
            published.append((await js.publish(stream.subject("x"), b"m")).seq)
            await asyncio.sleep(hb / 4)  # the publishing rate is the point of this check
        got = await deliveries(sub, count, wait_s(client), s)
        spurious = s.events.of(MISSED_HEARTBEAT, flow_from)
        observe("missed_heartbeat_reports_while_flowing", len(spurious))
        observe("heartbeats_sent_while_flowing", proxied.counters.heartbeats_passed)
        observe("documented", documented(client))
    delivered = [d.stream_seq for d in got]
    assert delivered == published, (
        f"{client.name} {client.version} delivered stream sequences {delivered}, not {published} once each in order"
    )
    assert not spurious, (
        f"{client.name} {client.version} reported missed heartbeats {len(spurious)} times while a message arrived "
        f"every {hb / 4}s (first: {spurious[0].detail}); {ADR37}. Documented: {documented(client)}"
    )


@pytest.mark.rule("heartbeat.client-not-terminal")
async def test_consumption_resumes_after_a_stall(client, target, proxied, nc, js, make_stream, names, observe):
    """After 5 heartbeat intervals of stalled traffic the same consumption delivers every message in order."""
    hb = heartbeat(client)
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await consumption(client, s, nc, stream, names, observe)
        await proxied.wait_for(lambda: proxied.counters.heartbeats_passed >= 1, wait_s(client))
        stalled_at = now()
        proxied.stall(5 * hb)
        held = [(await js.publish(stream.subject("x"), b"m")).seq for _ in range(3)]
        await proxied.wait_for(lambda: not proxied.stalled, wait_s(client))
        later = [(await js.publish(stream.subject("x"), b"m")).seq for _ in range(3)]
        got = await deliveries(sub, 6, wait_s(client), s)
        terminal = s.events.of(TERMINAL, stalled_at)
        observe("missed_heartbeat_reports_during_stall", len(s.events.of(MISSED_HEARTBEAT, stalled_at)))
        observe("resumed_after_s", round(got[0].at - stalled_at, 3) if got else None)
    assert not terminal, (
        f"{client.name} {client.version} ended consumption after missed heartbeats: {terminal[0].detail}; {ADR37}"
    )
    assert [d.stream_seq for d in got] == held + later, (
        f"after a {5 * hb}s stall the consumption of {client.name} {client.version} delivered "
        f"{[d.stream_seq for d in got]}, not {held + later}"
    )
