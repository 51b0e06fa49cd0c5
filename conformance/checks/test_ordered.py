"""Ordered consumer recovery (ADR-17), client side: every message once, in stream order, across injected faults.

The client under test (--client) consumes through a fault-injection proxy in front of the target; the suite
publishes and inspects consumers over its own direct connection, so only the client sees the faults.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from collections import Counter

import pytest

from jetcheck.conformance.clients import StartPolicy
from jetcheck.conformance.clients.base import connected
from jetcheck.conformance.jsapi import NS, ApiError, api, eventually
from jetcheck.fixtures.faults import delete_consumer, restart_server

pytestmark = pytest.mark.asyncio

HEARTBEAT_S = 0.2  # the ordered consumer's idle heartbeat: a client acts after about 2 missed intervals
INACTIVE_S = 1.0  # the application's inactive threshold, so a released consumer is gone soon
WAIT_S = 4.0  # how long the client may take to deliver what is expected
CONSUMER_NOT_FOUND = 10014


async def publish(js, subjects: list[str]) -> list[int]:
    return [(await js.publish(subject, b"m")).seq for subject in subjects]


def ordered_once(deliveries, expected: list[int], what: str) -> str:
    """'' when `deliveries` are exactly `expected` stream sequences; else what went wrong."""
    got = [d.stream_seq for d in deliveries]
    if got == expected:
        return ""
    missing = sorted(set(expected) - set(got))
    repeated = sorted({s for s in got if got.count(s) > 1})
    extra = sorted(set(got) - set(expected))
    return (
        f"{what}: expected stream sequences {expected} once each, in order; the client delivered {got} "
        f"(missing {missing}, repeated {repeated}, unexpected {extra}, "
        f"consumers {list(dict.fromkeys(d.consumer for d in deliveries))})"
    )


def now() -> float:
    return asyncio.get_running_loop().time()


def reported(s) -> str:
    """What the client reported meanwhile, for a failure message."""
    counts = Counter(f"{e.kind}: {e.detail}" for e in s.events.events)
    events = [f"{text} (x{n})" if n > 1 else text for text, n in counts.items()]
    return f"; the client reported: {' | '.join(events)}" if events else "; the client reported nothing"


def resets(deliveries) -> list[tuple[str, int, int]]:
    """(new consumer, stream seq delivered just before it, its first stream seq) at every consumer switch."""
    out = []
    for before, after in itertools.pairwise(deliveries):
        if after.consumer != before.consumer:
            out.append((after.consumer, before.stream_seq, after.stream_seq))
    return out


async def consumer_config(nc, stream: str, consumer: str) -> dict | None:
    try:
        return (await api(nc, f"$JS.API.CONSUMER.INFO.{stream}.{consumer}"))["config"]
    except ApiError as exc:
        if exc.err_code == CONSUMER_NOT_FOUND:
            return None
        raise


def observe_recovery(observe, got, first_after_fault: int, fault_at: float) -> None:
    """Record how long the client took to deliver again after the fault, and the resets it made."""
    observe("recovery_s", recovery(got, first_after_fault, fault_at))
    observe("resets", [r[1:] for r in resets(got)])


def recovery(deliveries, first_new_seq: int, since: float) -> float | None:
    """Seconds from `since` (the fault) until the client delivered stream sequence `first_new_seq`."""
    found = [d.at for d in deliveries if d.stream_seq == first_new_seq]
    return round(found[0] - since, 3) if found else None


async def consume_initial(sub, count: int) -> list:
    got = await sub.inbox.until(count, WAIT_S)
    assert len(got) >= count, f"the ordered consumer delivered {len(got)} of the first {count} messages in {WAIT_S}s"
    return got


@pytest.mark.rule("ordered.gap-recovered")
async def test_a_dropped_delivery_is_redelivered_in_order(client, target, proxied, js, nc, make_stream, observe):
    """A delivery lost in transit makes the ordered consumer reset; every message arrives once, in order."""
    stream = await make_stream()
    subject = stream.subject("x")
    expected = await publish(js, [subject] * 3)
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.ordered(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        await consume_initial(sub, 3)
        proxied.drop_delivery(2)  # the 2nd delivery from now on never reaches the client
        fault_at = now()
        expected += await publish(js, [subject] * 5)
        got = await sub.inbox.until(len(expected), WAIT_S)
        assert proxied.counters.deliveries_dropped, "the proxy dropped no delivery: the fault did not happen"
        dropped = proxied.counters.deliveries_dropped[0].stream_seq
        observe("dropped_stream_seq", dropped)
        observe_recovery(observe, got, dropped, fault_at)
        problem = ordered_once(got, expected, f"after stream sequence {dropped} was dropped in transit")
        assert not problem, problem + reported(s)


async def reset_by_gap(proxied, js, stream, s, **options):
    """An ordered consumer that delivered 3 messages, then lost the 2nd of 3 more: (subscription, deliveries)."""
    subject = stream.subject("x")
    await publish(js, [subject] * 3)
    sub = await s.ordered(stream.name, stream.subject(">"), **options)
    await consume_initial(sub, 3)
    proxied.drop_delivery(2)
    await publish(js, [subject] * 3)
    got = await sub.inbox.until(6, WAIT_S)
    problem = ordered_once(got, [1, 2, 3, 4, 5, 6], "after a delivery was dropped in transit")
    assert not problem, problem + reported(s)
    return sub, got


def config_deviations(config: dict, heartbeat_s: float, start_seq: int | None) -> list[str]:
    """How a consumer's settled config departs from ADR-17's ordered consumer."""
    wanted = {
        "durable_name": None,
        "ack_policy": "none",
        "max_deliver": 1,
        "flow_control": True,
        "idle_heartbeat": round(heartbeat_s * NS),
        "mem_storage": True,
        "num_replicas": 1,
    }
    if start_seq is not None:
        wanted |= {"deliver_policy": "by_start_sequence", "opt_start_seq": start_seq}
    found = {key: config.get(key) for key in wanted}
    # The server omits num_replicas 0 (inherit) and shows R1 streams' consumers as 0 or 1; both are one replica here.
    if found["num_replicas"] in (None, 0) and wanted["num_replicas"] == 1:
        found["num_replicas"] = 1
    return [f"{key} {found[key]!r} (wanted {value!r})" for key, value in wanted.items() if found[key] != value]


@pytest.mark.rule("ordered.recreated-config")
async def test_the_recreated_consumer_has_the_ordered_settings(client, target, proxied, js, nc, make_stream, observe):
    """The consumer recreated after a gap is an R1, memory, ack-none, max_deliver 1 consumer at last + 1."""
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        _, got = await reset_by_gap(proxied, js, stream, s, idle_heartbeat=HEARTBEAT_S)
        (switch,) = resets(got)[:1] or [None]
        assert switch is not None, f"the client delivered everything without recreating its consumer: {got}"
        consumer, last_before, _ = switch
        config = await consumer_config(nc, stream.name, consumer)
        assert config is not None, f"the recreated consumer {consumer} is gone while the client consumes from it"
        observe("recreated", {k: config.get(k) for k in ("deliver_policy", "opt_start_seq", "ack_wait")})
        wrong = config_deviations(config, HEARTBEAT_S, last_before + 1)
        assert not wrong, f"the recreated consumer {consumer} departs from ADR-17: {'; '.join(wrong)}"
        default_sub = await s.ordered(stream.name, stream.subject(">"))
        first = await default_sub.inbox.next(WAIT_S)
        default = await consumer_config(nc, stream.name, first.consumer)
        assert default is not None
        observe("default_idle_heartbeat_s", (default.get("idle_heartbeat") or 0) / NS)
        # The client sets no inactive threshold of its own: what shows is the server's default for ephemerals.
        observe("default_inactive_threshold_s", (default.get("inactive_threshold") or 0) / NS)
        wrong = config_deviations(default, client.documented.ordered_idle_heartbeat_s, None)
        assert not wrong, (
            f"an ordered consumer without settings departs from ADR-17 / {client.name}'s documented defaults: "
            + "; ".join(wrong)
        )


@pytest.mark.rule("ordered.old-consumer-released")
async def test_the_old_consumer_is_gone_after_its_inactive_threshold(
    client, target, proxied, js, nc, make_stream, observe
):
    """After a reset the replaced consumer disappears within its inactive threshold (or at once if deleted)."""
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        _, got = await reset_by_gap(proxied, js, stream, s, idle_heartbeat=HEARTBEAT_S, inactive_threshold=INACTIVE_S)
        old = got[0].consumer
        reset_at = next(d.at for d in got if d.consumer != old)
        config = await consumer_config(nc, stream.name, old)
        threshold = (config or {}).get("inactive_threshold", 0) / NS
        observe("old_inactive_threshold_s", threshold)

        async def gone() -> bool:
            return await consumer_config(nc, stream.name, old) is None

        released = await eventually(gone, (threshold or INACTIVE_S) + 1.5)
        took = round(now() - reset_at, 3)
        observe("released_after_s", took if released else None)
        observe("released_by", "client" if config is None else ("server inactive threshold" if released else ""))
        assert released, (
            f"the old consumer {old} still exists {took}s after the reset; its inactive threshold is {threshold}s "
            f"(ADR-17: the ordered consumer releases its consumer)"
        )


@pytest.mark.rule("ordered.consumer-deleted-recovered")
async def test_a_deleted_consumer_is_recreated_without_loss(client, target, proxied, js, nc, make_stream, observe):
    """A consumer deleted behind the client's back is recreated; every later message arrives once, in order."""
    stream = await make_stream()
    subject = stream.subject("x")
    expected = await publish(js, [subject] * 3)
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.ordered(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        first = await consume_initial(sub, 3)
        fault_at = now()
        await delete_consumer(target, stream.name, first[-1].consumer)
        new = await publish(js, [subject] * 3)
        got = await sub.inbox.until(len(expected) + len(new), WAIT_S)
        observe_recovery(observe, got, new[0], fault_at)
        problem = ordered_once(got, expected + new, f"after consumer {first[-1].consumer} was deleted")
        assert not problem, problem + reported(s)


@pytest.mark.rule("ordered.server-restart-recovered")
@pytest.mark.needs("managed")
@pytest.mark.parametrize("graceful", [True, False], ids=["graceful", "kill-9"])
async def test_a_server_restart_loses_and_repeats_nothing(
    client, target, proxied, js, nc, make_stream, observe, graceful
):
    """Across a graceful or kill -9 restart (file storage) every message arrives once, in order."""
    stream = await make_stream(storage="file")
    subject = stream.subject("x")
    expected = await publish(js, [subject] * 3)
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.ordered(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        await consume_initial(sub, 3)
        fault_at = now()
        observe("restart_s", round(await restart_server(target, graceful=graceful), 3))
        direct = await target.connect()  # the check's own connection did not survive the restart
        try:
            new = await publish(direct.jetstream(), [subject] * 3)
        finally:
            await direct.close()
        got = await sub.inbox.until(len(expected) + len(new), WAIT_S)
        observe_recovery(observe, got, new[0], fault_at)
        how = "graceful restart" if graceful else "kill -9"
        problem = ordered_once(got, expected + new, f"across a {how} of the server")
        assert not problem, problem + reported(s)


@pytest.mark.rule("ordered.heartbeat-stall-recovered")
async def test_a_stall_longer_than_two_heartbeats_loses_and_repeats_nothing(
    client, target, proxied, js, nc, make_stream, observe
):
    """Server traffic held for 5 heartbeat intervals: afterwards every message arrives once, in order."""
    stream = await make_stream()
    subject = stream.subject("x")
    expected = await publish(js, [subject] * 3)
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.ordered(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S)
        await consume_initial(sub, 3)
        fault_at = now()
        proxied.stall(5 * HEARTBEAT_S)
        new = await publish(js, [subject] * 3)
        await proxied.wait_for(lambda: not proxied.stalled, WAIT_S)
        got = await sub.inbox.until(len(expected) + len(new), WAIT_S)
        observe("stall_s", 5 * HEARTBEAT_S)
        observe_recovery(observe, got, new[0], fault_at)
        problem = ordered_once(got, expected + new, f"after server traffic stalled for {5 * HEARTBEAT_S}s")
        assert not problem, problem + reported(s)


@pytest.mark.rule("ordered.filter-subject")
async def test_a_filtered_ordered_consumer_delivers_only_its_subject_across_a_reset(
    client, target, proxied, js, nc, make_stream, observe
):
    """With a filter subject only matching messages arrive, once, in order, and the filter survives a reset."""
    stream = await make_stream()
    a, b = stream.subject("a"), stream.subject("b")
    seqs = await publish(js, [a, b, a, b, a])
    expected = [seq for seq, subj in zip(seqs, [a, b, a, b, a], strict=True) if subj == a]
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.ordered(stream.name, a, idle_heartbeat=HEARTBEAT_S)
        await consume_initial(sub, len(expected))
        proxied.drop_delivery(2)
        layout = [b, a, a, b, a]
        seqs = await publish(js, layout)
        expected += [seq for seq, subj in zip(seqs, layout, strict=True) if subj == a]
        got = await sub.inbox.until(len(expected), WAIT_S)
        problem = ordered_once(got, expected, f"with filter {a} across a reset")
        assert not problem, problem + reported(s)
        assert {d.subject for d in got} == {a}
        switches = resets(got)
        assert switches, "the client delivered everything without a reset: the fault did not reach it"
        config = await consumer_config(nc, stream.name, switches[-1][0])
        assert config is not None
        observe("measured_recreated_filter", config.get("filter_subject"))
        assert config.get("filter_subject") == a or config.get("filter_subjects") == [a], (
            f"the recreated consumer filters {config.get('filter_subject') or config.get('filter_subjects')!r}, "
            f"not {a!r}"
        )


@pytest.mark.rule("ordered.start-policy")
@pytest.mark.parametrize("policy", ["by_start_sequence", "by_start_time", "last_per_subject"])
async def test_an_ordered_consumer_keeps_its_start_and_continues_after_a_reset(
    client, target, proxied, js, nc, make_stream, observe, policy
):
    """Started by sequence, time or last per subject, it delivers from there and continues after a reset."""
    stream = await make_stream()
    a, b = stream.subject("a"), stream.subject("b")
    await publish(js, [a, b, a])
    middle = dt.datetime.now(dt.UTC)  # after sequence 3 was stored, before 4 is
    await publish(js, [b, a, b])
    start, expected = {
        "by_start_sequence": (StartPolicy("by_start_sequence", seq=4), [4, 5, 6]),
        "by_start_time": (StartPolicy("by_start_time", time=middle), [4, 5, 6]),
        "last_per_subject": (StartPolicy("last_per_subject"), [5, 6]),
    }[policy]
    async with connected(client, proxied.url, target.credentials) as s:
        sub = await s.ordered(stream.name, stream.subject(">"), idle_heartbeat=HEARTBEAT_S, start=start)
        first = await consume_initial(sub, len(expected))
        problem = ordered_once(first, expected, f"from start policy {policy}")
        assert not problem, problem + reported(s)
        proxied.drop_delivery(2)
        expected += await publish(js, [a, b, a, b])
        got = await sub.inbox.until(len(expected), WAIT_S)
        observe("resets", [r[1:] for r in resets(got)])
        problem = ordered_once(got, expected, f"from start policy {policy}, across a reset")
        assert not problem, problem + reported(s)
