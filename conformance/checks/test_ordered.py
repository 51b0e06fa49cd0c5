"""Ordered consumer recovery (ADR-17), client side: every message once, in stream order, across injected faults.

The client under test (--client) consumes through a fault-injection proxy in front of the target; the suite
publishes and inspects consumers over its own direct connection, so only the client sees the faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
from collections import Counter

import pytest

from jetcheck.conformance.clients import OrderedOptions, StartPolicy
from jetcheck.conformance.clients.base import ADR17_ORDERED_PUSH_CONFIG, Unsupported, connected
from jetcheck.conformance.jsapi import NS, ApiError, api, eventually
from jetcheck.conformance.silence import deliveries
from jetcheck.fixtures.faults import delete_consumer, restart_server

pytestmark = pytest.mark.asyncio

WANTED_HEARTBEAT_S = 0.2  # short, so faults are noticed fast; raised to the client's documented minimum
INACTIVE_S = 1.0  # the application's inactive threshold, so a released consumer is gone soon
CONSUMER_NOT_FOUND = 10014


def heartbeat(client) -> float:
    """The idle heartbeat these checks give the ordered consumer: a client acts after about 2 missed intervals."""
    return client.documented.idle_heartbeat(WANTED_HEARTBEAT_S)


def wait_s(client) -> float:
    """How long the client may take to deliver what is expected: noticing a fault takes a few heartbeats."""
    return 4.0 + 4 * heartbeat(client)


async def ordered(client, s, observe, stream: str, subject: str, options: OrderedOptions):
    """The client's ordered consumer (ADR-17 requires one: a client without it fails), its heartbeat recorded."""
    try:
        sub = await s.ordered(stream, subject, options)
    except Unsupported as exc:
        pytest.fail(f"ordered consumers are not implemented by {client.name} {client.version} ({exc}); ADR-17")
    asked = options.idle_heartbeat
    if asked is not None:  # the default consumer's heartbeat is recorded by the check that makes one
        observe("idle_heartbeat_s", asked)
        observe("effective_idle_heartbeat_s", getattr(sub, "effective_idle_heartbeat_s", asked))
    return sub


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


async def consume_initial(client, s, sub, count: int) -> list:
    got = await deliveries(sub, count, wait_s(client), s)
    assert len(got) >= count, (
        f"the ordered consumer of {client.name} delivered {len(got)} of the first {count} messages in {wait_s(client)}s"
    )
    return got


@contextlib.asynccontextmanager
async def consuming(client, target, proxied, observe, js, stream, idle_heartbeat: float):
    """The client's ordered consumer of the whole stream, through the proxy, once it delivered the 3 messages first
    published to stream.subject("x"); yields (session, subscription, those deliveries, their stream sequences)."""
    published = await publish(js, [stream.subject("x")] * 3)
    async with connected(client, proxied.url, target.credentials) as s:
        options = OrderedOptions(idle_heartbeat=idle_heartbeat)
        sub = await ordered(client, s, observe, stream.name, stream.subject(">"), options)
        yield s, sub, await consume_initial(client, s, sub, 3), published


async def assert_once_in_order_after(client, s, sub, observe, before: list, after: list, fault_at: float, fault: str):
    """Every message published `before` the fault and `after` it arrives once, in order (recording the recovery
    from `fault_at` on); the failure names the `fault` ("after ..." or "across ...")."""
    got = await deliveries(sub, len(before) + len(after), wait_s(client), s)
    observe_recovery(observe, got, after[0], fault_at)
    problem = ordered_once(got, before + after, fault)
    assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"


@pytest.mark.rule("ordered.gap-recovered")
async def test_a_dropped_delivery_is_redelivered_in_order(client, target, proxied, js, nc, make_stream, observe):
    """A delivery lost in transit makes the ordered consumer reset; every message arrives once, in order."""
    stream = await make_stream()
    subject = stream.subject("x")
    async with consuming(client, target, proxied, observe, js, stream, heartbeat(client)) as (s, sub, _, expected):
        proxied.drop_delivery(2)  # the 2nd delivery from now on never reaches the client
        fault_at = now()
        expected += await publish(js, [subject] * 5)
        got = await deliveries(sub, len(expected), wait_s(client), s)
        assert proxied.counters.deliveries_dropped, "the proxy dropped no delivery: the fault did not happen"
        dropped = proxied.counters.deliveries_dropped[0].stream_seq
        observe("dropped_stream_seq", dropped)
        observe_recovery(observe, got, dropped, fault_at)
        problem = ordered_once(got, expected, f"after stream sequence {dropped} was dropped in transit")
        assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"


async def reset_by_gap(client, proxied, js, stream, s, observe, options: OrderedOptions):
    """An ordered consumer that delivered 3 messages, then lost the 2nd of 3 more: (subscription, deliveries)."""
    subject = stream.subject("x")
    await publish(js, [subject] * 3)
    sub = await ordered(client, s, observe, stream.name, stream.subject(">"), options)
    await consume_initial(client, s, sub, 3)
    proxied.drop_delivery(2)
    await publish(js, [subject] * 3)
    got = await deliveries(sub, 6, wait_s(client), s)
    problem = ordered_once(got, [1, 2, 3, 4, 5, 6], "after a delivery was dropped in transit")
    assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"
    return sub, got


# what every client's table declares for its ordered consumer, of either kind (tests/clients checks the tables)
ORDERED_KEYS = ("durable_name", "ack_policy", "max_deliver", "mem_storage", "num_replicas")


def documented_config(client, heartbeat_s: float) -> dict:
    """The consumer config the client documents for its ordered consumer; a push one has ADR-17's settings and the
    heartbeat, which no table can loosen."""
    docs = client.documented
    wanted = dict(docs.ordered_config)
    if docs.ordered_kind == "push":
        wanted.update(ADR17_ORDERED_PUSH_CONFIG, idle_heartbeat=round(heartbeat_s * NS))
    return wanted


def config_deviations(config: dict, wanted: dict) -> list[str]:
    """How a consumer's settled config departs from `wanted`, in the server's JSON names."""
    found = {key: config.get(key) for key in wanted}
    # The server omits num_replicas 0 (inherit) and shows R1 streams' consumers as 0 or 1; both are one replica here.
    if found.get("num_replicas") in (None, 0) and wanted.get("num_replicas") == 1:
        found["num_replicas"] = 1
    return [f"{key} {found[key]!r} (documented {value!r})" for key, value in wanted.items() if found[key] != value]


def documents(client, wanted: dict) -> str:
    settings = ", ".join(f"{key} {value!r}" for key, value in wanted.items())
    kind, read = client.documented.ordered_kind, client.documented.of_release
    if read and read != client.version:  # an older release certified against the newest one's documentation
        return f"{client.name} {read} documents its {kind} ordered consumer as {settings} (certified: {client.version})"
    return f"{client.name} {client.version} documents its {kind} ordered consumer as {settings}"


@pytest.mark.rule("ordered.recreated-config")
async def test_the_recreated_consumer_has_the_ordered_settings(client, target, proxied, js, nc, make_stream, observe):
    """The consumer recreated after a gap has the client's documented ordered settings, at last + 1."""
    hb = heartbeat(client)
    docs = client.documented
    assert docs.ordered_config, f"{client.name} {client.version} documents no configuration for its ordered consumer"
    observe("documented", {"kind": docs.ordered_kind, "config": dict(docs.ordered_config)})
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        _, got = await reset_by_gap(client, proxied, js, stream, s, observe, OrderedOptions(idle_heartbeat=hb))
        (switch,) = resets(got)[:1] or [None]
        assert switch is not None, f"{client.name} delivered everything without recreating its consumer: {got}"
        consumer, last_before, _ = switch
        config = await consumer_config(nc, stream.name, consumer)
        assert config is not None, f"the recreated consumer {consumer} is gone while the client consumes from it"
        observe("recreated", {k: config.get(k) for k in ("deliver_policy", "opt_start_seq", "ack_wait", "max_deliver")})
        wanted = documented_config(client, hb)
        start = {"deliver_policy": "by_start_sequence", "opt_start_seq": last_before + 1}  # ADR-17, any kind
        wrong = config_deviations(config, wanted | start)
        assert not wrong, f"{documents(client, wanted)}; the consumer it recreated ({consumer}) has {'; '.join(wrong)}"
        default_sub = await ordered(client, s, observe, stream.name, stream.subject(">"), OrderedOptions())
        first = await default_sub.inbox.next(wait_s(client))
        default = await consumer_config(nc, stream.name, first.consumer)
        assert default is not None
        observe("default_idle_heartbeat_s", (default.get("idle_heartbeat") or 0) / NS)
        # The client sets no inactive threshold of its own: what shows is the server's default for ephemerals.
        observe("default_inactive_threshold_s", (default.get("inactive_threshold") or 0) / NS)
        wanted = documented_config(client, docs.ordered_idle_heartbeat_s)
        wrong = config_deviations(default, wanted)
        assert not wrong, (
            f"{documents(client, wanted)} when the application sets nothing; it created {first.consumer} with "
            + "; ".join(wrong)
        )


@pytest.mark.rule("ordered.old-consumer-released")
async def test_the_old_consumer_is_gone_after_its_inactive_threshold(
    client, target, proxied, js, nc, make_stream, observe
):
    """After a reset the replaced consumer disappears within the application's inactive threshold (or at once)."""
    stream = await make_stream()
    async with connected(client, proxied.url, target.credentials) as s:
        options = OrderedOptions(idle_heartbeat=heartbeat(client), inactive_threshold=INACTIVE_S)
        _, got = await reset_by_gap(client, proxied, js, stream, s, observe, options)
        old = got[0].consumer
        reset_at = next(d.at for d in got if d.consumer != old)
        config = await consumer_config(nc, stream.name, old)
        threshold = (config or {}).get("inactive_threshold", 0) / NS
        observe("old_inactive_threshold_s", threshold)

        async def gone() -> bool:
            return await consumer_config(nc, stream.name, old) is None

        # Bounded by the threshold the application asked for: a client that set a longer one keeps it that long.
        released = await eventually(gone, min(threshold or INACTIVE_S, INACTIVE_S) + 1.5)
        took = round(now() - reset_at, 3)
        observe("released_after_s", took if released else None)
        observe("released_by", "client" if config is None else ("server inactive threshold" if released else ""))
        assert released, (
            f"{client.name} {client.version}: the old consumer {old} still exists {took}s after the reset; its "
            f"inactive threshold is {threshold}s where the application asked for {INACTIVE_S}s "
            f"(ADR-17: the ordered consumer releases its consumer)"
        )


@pytest.mark.rule("ordered.consumer-deleted-recovered")
async def test_a_deleted_consumer_is_recreated_without_loss(client, target, proxied, js, nc, make_stream, observe):
    """A consumer deleted behind the client's back is recreated; every later message arrives once, in order."""
    stream = await make_stream()
    subject = stream.subject("x")
    async with consuming(client, target, proxied, observe, js, stream, heartbeat(client)) as (s, sub, first, expected):
        fault_at = now()
        await delete_consumer(target, stream.name, first[-1].consumer)
        new = await publish(js, [subject] * 3)
        got = await deliveries(sub, len(expected) + len(new), wait_s(client), s)
        observe_recovery(observe, got, new[0], fault_at)
        observe("client_reports", sorted({f"{e.kind}: {e.detail}" for e in s.events.events}))
        problem = ordered_once(got, expected + new, f"after consumer {first[-1].consumer} was deleted")
        assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"


@pytest.mark.rule("ordered.server-restart-recovered")
@pytest.mark.needs("managed")
@pytest.mark.parametrize("graceful", [True, False], ids=["graceful", "kill-9"])
async def test_a_server_restart_loses_and_repeats_nothing(
    client, target, proxied, js, nc, make_stream, observe, graceful
):
    """Across a graceful or kill -9 restart (file storage) every message arrives once, in order."""
    stream = await make_stream(storage="file")
    async with consuming(client, target, proxied, observe, js, stream, heartbeat(client)) as (s, sub, _, expected):
        fault_at = now()
        observe("restart_s", round(await restart_server(target, graceful=graceful), 3))
        direct = await target.connect()  # the check's own connection did not survive the restart
        try:
            new = await publish(direct.jetstream(), [stream.subject("x")] * 3)
        finally:
            await direct.close()
        how = "graceful restart" if graceful else "kill -9"
        await assert_once_in_order_after(
            client, s, sub, observe, expected, new, fault_at, f"across a {how} of the server"
        )


@pytest.mark.rule("ordered.heartbeat-stall-recovered")
async def test_a_stall_longer_than_two_heartbeats_loses_and_repeats_nothing(
    client, target, proxied, js, nc, make_stream, observe
):
    """Server traffic held for 5 heartbeat intervals: afterwards every message arrives once, in order."""
    hb = heartbeat(client)
    stream = await make_stream()
    async with consuming(client, target, proxied, observe, js, stream, hb) as (s, sub, _, expected):
        fault_at = now()
        proxied.stall(5 * hb)
        new = await publish(js, [stream.subject("x")] * 3)
        await proxied.wait_for(lambda: not proxied.stalled, wait_s(client))
        observe("stall_s", 5 * hb)
        stalled = f"after server traffic stalled for {5 * hb}s"
        await assert_once_in_order_after(client, s, sub, observe, expected, new, fault_at, stalled)


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
        sub = await ordered(client, s, observe, stream.name, a, OrderedOptions(idle_heartbeat=heartbeat(client)))
        await consume_initial(client, s, sub, len(expected))
        proxied.drop_delivery(2)
        layout = [b, a, a, b, a]
        seqs = await publish(js, layout)
        expected += [seq for seq, subj in zip(seqs, layout, strict=True) if subj == a]
        got = await deliveries(sub, len(expected), wait_s(client), s)
        problem = ordered_once(got, expected, f"with filter {a} across a reset")
        assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"
        assert {d.subject for d in got} == {a}
        switches = resets(got)
        assert switches, f"{client.name} delivered everything without a reset: the fault did not reach it"
        config = await consumer_config(nc, stream.name, switches[-1][0])
        assert config is not None
        observe("measured_recreated_filter", config.get("filter_subject"))
        assert config.get("filter_subject") == a or config.get("filter_subjects") == [a], (
            f"{client.name} {client.version}: the recreated consumer filters "
            f"{config.get('filter_subject') or config.get('filter_subjects')!r}, not {a!r}"
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
        options = OrderedOptions(idle_heartbeat=heartbeat(client), start=start)
        sub = await ordered(client, s, observe, stream.name, stream.subject(">"), options)
        first = await consume_initial(client, s, sub, len(expected))
        problem = ordered_once(first, expected, f"from start policy {policy}")
        assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"
        proxied.drop_delivery(2)
        expected += await publish(js, [a, b, a, b])
        got = await deliveries(sub, len(expected), wait_s(client), s)
        observe("resets", [r[1:] for r in resets(got)])
        problem = ordered_once(got, expected, f"from start policy {policy}, across a reset")
        assert not problem, f"{client.name} {client.version}: {problem}{reported(s)}"
