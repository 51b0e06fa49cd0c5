"""Pull consumer priority groups (ADR-42): their config, pinned clients and overflow."""

from __future__ import annotations

import asyncio

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.clients.base import Indeterminate
from jetcheck.conformance.documented_errors import DocumentedRefusal, Refusal, assert_refused_as_documented
from jetcheck.conformance.jsapi import NS, RawPull, api, consumer_info, create_consumer, held_within, publish_raw, pull

pytestmark = pytest.mark.asyncio

GROUP = "jobs"
PIN = "Nats-Pin-Id"
ADR42 = "ADR-42"
WAIT_S = 1.5  # a pull's expires is 1 s: its status comes within this
PIN_TIMEOUT_S = 1  # the priority_timeout of pin-timeout's consumer (any positive duration is accepted)
NO_GROUP = DocumentedRefusal(400, 10159)
BAD_GROUP_NAME = DocumentedRefusal(400, 10162)
PUSH_WITH_GROUPS = DocumentedRefusal(400, 10178)


async def _filled(nc, make_stream, count: int):
    stream = await make_stream()
    for n in range(count):
        await publish_raw(nc, stream.subject("a"), f"m{n}".encode())
    return stream


async def _grouped(nc, names, stream, policy: str, **config) -> str:
    info = await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit",
                                 priority_policy=policy, priority_groups=[GROUP], **config)  # fmt: skip
    return info["name"]


def _request(**fields) -> dict:
    return {"batch": 1, "expires": NS, **fields}


def _summary(reply) -> tuple[list[bytes], str]:
    """What a pull brought: its payloads, and its status as `code description` ('' when none)."""
    status = f"{reply.status.code} {reply.status.description}" if reply.status else ""
    return [m.data for m in reply.messages], status


async def _group_pull(nc, stream: str, consumer: str, messages: int | None = None, **fields) -> tuple[list[bytes], str]:
    """A pull for one message in GROUP (with `fields` besides), waiting WAIT_S or until `messages` came: _summary."""
    return _summary(await pull(nc, stream, consumer, _request(group=GROUP, **fields), wait=WAIT_S, messages=messages))


async def _served_only_at(
    nc,
    stream,
    consumer: str,
    field: str,
    limits: tuple[int, int],
    serves: bytes,
    documented: str,
    held: tuple[str, str],
) -> None:
    """ADR-42's overflow limits (min_pending, min_ack_pending) in one shape: a pull whose `field` is the first of
    `limits`, which what the consumer holds does not meet, gets nothing, as `documented`; one whose `field` is the
    second, which it meets, is served the message `serves`. `held` words what it holds in the two failures."""
    unmet, met = limits
    above = await _group_pull(nc, stream.name, consumer, **{field: unmet})
    assert not above[0], f"{ADR42}: {documented} ({unmet}, {held[0]}): {above}"
    below = await _group_pull(nc, stream.name, consumer, messages=1, **{field: met})
    assert below[0] == [serves], f"{ADR42}: a pull whose {field} ({met}) {held[1]} is served; it got {below}"


async def _create_refusal(nc, stream, names, asked: str, **config) -> Refusal:
    name = names.consumer()
    body = {"stream_name": stream.name, "config": {"durable_name": name, "ack_policy": "explicit", **config}}
    return await refused(nc, f"$JS.API.CONSUMER.CREATE.{stream.name}.{name}", body, asked)


async def _pinned(nc, names, make_stream, **config) -> tuple[object, str, str]:
    """A pinned_client consumer over 3 messages, pinned by a first pull: (stream, consumer, the pin id)."""
    stream = await _filled(nc, make_stream, 3)
    consumer = await _grouped(nc, names, stream, "pinned_client", **config)
    first = await pull(nc, stream.name, consumer, _request(group=GROUP), wait=WAIT_S, messages=1)
    pin = (first.messages[0].headers or {}).get(PIN) if first.messages else None
    assert pin, f"{ADR42}: the pinned client's first message includes a Nats-Pin-Id header; got {_summary(first)}"
    return stream, consumer, pin


@pytest.mark.rule("priority.config-refusals")
async def test_priority_groups_refuse_a_bad_config(nc, names, make_stream, observe):
    """A policy without groups (400/10159), a 17-character or spaced group name (400/10162), and groups on a push
    consumer (400/10178) are refused."""
    stream = await make_stream()
    pinned = {"priority_policy": "pinned_client"}
    cases = {
        "a priority_policy without priority_groups": (pinned, NO_GROUP),
        "a 17-character group name": ({**pinned, "priority_groups": ["g" * 17]}, BAD_GROUP_NAME),
        "a group name with a space": ({**pinned, "priority_groups": ["a b"]}, BAD_GROUP_NAME),
        "priority groups on a push consumer": ({**pinned, "priority_groups": [GROUP],
                                                "deliver_subject": names.subject()}, PUSH_WITH_GROUPS),
    }  # fmt: skip
    got = {asked: await _create_refusal(nc, stream, names, asked, **config) for asked, (config, _) in cases.items()}
    observe("refusals", got)
    for asked, (_, documented) in cases.items():
        assert_refused_as_documented(got[asked], documented, f"{ADR42}: {asked}")


@pytest.mark.rule("priority.one-group")
async def test_a_consumer_with_two_priority_groups_is_refused(nc, names, make_stream, observe):
    """A consumer with priority groups `a` and `b` is refused."""
    stream = await make_stream()
    config = {"priority_policy": "pinned_client", "priority_groups": ["a", "b"]}
    # no document gives this refusal a code (ADR-42 says only "error"; the errors table has none for it): any API
    # error is the refusal, and its code is recorded
    observe("refusal", await _create_refusal(nc, stream, names, f"{ADR42}: more than one priority group", **config))


@pytest.mark.rule("priority.pull-needs-group")
async def test_a_pull_without_a_valid_group_is_refused(nc, names, make_stream, observe):
    """Pulls naming no group, and naming group `other`, end in 400 and deliver nothing."""
    stream = await _filled(nc, make_stream, 2)
    consumer = await _grouped(nc, names, stream, "pinned_client")
    got = {
        "no group": _summary(await pull(nc, stream.name, consumer, _request(), wait=WAIT_S)),
        "group other": _summary(await pull(nc, stream.name, consumer, _request(group="other"), wait=WAIT_S)),
    }
    observe("answers", {k: v[1] for k, v in got.items()})
    wrong = {asked: answer for asked, answer in got.items() if answer[0] or not answer[1].startswith("400 ")}
    assert not wrong, f"{ADR42}: pulls not part of a valid group result in an error (400); got {wrong}"


@pytest.mark.rule("priority.pin-id")
async def test_a_pinned_client_is_served_by_its_pin_id_only(nc, names, make_stream):
    """The first delivery carries Nats-Pin-Id; a pull with that id gets the next message with it, another id 423."""
    stream, consumer, pin = await _pinned(nc, names, make_stream)
    wrong = await _group_pull(nc, stream.name, consumer, id=pin + "x")
    assert not wrong[0] and wrong[1].startswith("423 "), (
        f"{ADR42}: a pull whose id does not match the pin gets a 423 status; it got {wrong}"
    )
    again = await pull(nc, stream.name, consumer, _request(group=GROUP, id=pin), wait=WAIT_S, messages=1)
    ids = [(m.headers or {}).get(PIN) for m in again.messages]
    assert ids == [pin], f"{ADR42}: the pinned client's pulls are served with its Nats-Pin-Id {pin}; got {ids}"


@pytest.mark.rule("priority.unpin")
async def test_unpin_moves_the_pin(nc, names, make_stream):
    """After UNPIN the old id gets 423, and a pull without an id is served with a new Nats-Pin-Id."""
    stream, consumer, old = await _pinned(nc, names, make_stream)
    await api(nc, f"$JS.API.CONSUMER.UNPIN.{stream.name}.{consumer}", {"group": GROUP})
    stale = await _group_pull(nc, stream.name, consumer, id=old)
    assert not stale[0] and stale[1].startswith("423 "), (
        f"{ADR42}: UNPIN clears the pin, so a pull with the old id gets a 423 status; it got {stale}"
    )
    new = await pull(nc, stream.name, consumer, _request(group=GROUP), wait=WAIT_S, messages=1)
    ids = [(m.headers or {}).get(PIN) for m in new.messages]
    assert len(ids) == 1 and ids[0] not in (None, old), (
        f"{ADR42}: after UNPIN the server pins the next client with a new id; the next pull got Nats-Pin-Id {ids} "
        f"(the old one was {old})"
    )


@pytest.mark.rule("priority.overflow-min-pending")
async def test_overflow_serves_a_pull_only_at_its_min_pending(nc, names, make_stream):
    """With 4 messages pending, a pull with min_pending 10 gets none, one with min_pending 3 gets one."""
    stream = await _filled(nc, make_stream, 4)
    consumer = await _grouped(nc, names, stream, "overflow")
    documented = "'only deliver messages when num_pending ... is >= min_pending'"
    held = ("4 pending", "the 4 pending messages meet")
    await _served_only_at(nc, stream, consumer, "min_pending", (10, 3), b"m0", documented, held)


@pytest.mark.rule("priority.pin-timeout")
async def test_a_pinned_client_that_stops_pulling_loses_the_pin(nc, names, make_stream):
    """With priority_timeout 1 s and no pull from the pinned client, a waiting pull gets a new pin; the old id 423."""
    stream, consumer, old = await _pinned(nc, names, make_stream, priority_timeout=PIN_TIMEOUT_S * NS)
    standby_wait = PIN_TIMEOUT_S + WAIT_S + 1  # the timeout, then a delivery
    standby = await pull(nc, stream.name, consumer, {"batch": 1, "expires": int((standby_wait + 1) * NS),
                                                     "group": GROUP}, wait=standby_wait, messages=1)  # fmt: skip
    ids = [(m.headers or {}).get(PIN) for m in standby.messages]
    assert len(ids) == 1 and ids[0] not in (None, old), (
        f"{ADR42}: a pinned client that makes no pull within priority_timeout ({PIN_TIMEOUT_S} s) loses the pin to a "
        f"waiting pull, which is served with a new Nats-Pin-Id; within {standby_wait:.1f} s the waiting pull got "
        f"Nats-Pin-Id {ids} {_summary(standby)} (the old one was {old})"
    )
    stale = await _group_pull(nc, stream.name, consumer, id=old)
    assert not stale[0] and stale[1].startswith("423 "), (
        f"{ADR42}: after priority_timeout moved the pin, a pull with the old id gets a 423 status; it got {stale}"
    )


@pytest.mark.rule("priority.overflow-min-ack-pending")
async def test_overflow_serves_a_pull_only_at_its_min_ack_pending(nc, names, make_stream):
    """With 1 message ack-pending, a pull with min_ack_pending 2 gets none, one with min_ack_pending 1 gets one."""
    stream = await _filled(nc, make_stream, 4)
    consumer = await _grouped(nc, names, stream, "overflow")
    first = await _group_pull(nc, stream.name, consumer, messages=1)
    assert first[0] == [b"m0"], f"{ADR42}: an overflow pull without limits is served; it got {first}"
    documented = "'only deliver messages when ack_pending for the consumer is >= min_ack_pending'"
    held = ("1 ack pending", "the 1 ack-pending message meets")
    await _served_only_at(nc, stream, consumer, "min_ack_pending", (2, 1), b"m1", documented, held)


@pytest.mark.rule("priority.prioritized")
async def test_prioritized_serves_lower_priority_values_first(nc, names, make_stream):
    """Pulls waiting with priorities 5, 1 and 3 (sent in that order) get the next 3 messages in order 1, 3, 5."""
    stream = await make_stream()
    consumer = await _grouped(nc, names, stream, "prioritized")
    order = (5, 1, 3)
    wait = 2 * WAIT_S + 2  # the pulls wait to be listed, then for a message
    pulls: dict[int, RawPull] = {}
    collecting: dict[int, asyncio.Task] = {}
    try:
        for priority in order:
            request = {"batch": 1, "expires": int((wait + 1) * NS), "group": GROUP, "priority": priority}
            pulls[priority] = await RawPull(nc, stream.name, consumer).send(request)
        collecting.update({p: asyncio.create_task(raw.collect(wait, messages=1)) for p, raw in pulls.items()})

        async def all_waiting() -> bool:  # or one already ended: its answer is judged below
            info = await consumer_info(nc, stream.name, consumer)
            return info.get("num_waiting") == len(order) or any(t.done() for t in collecting.values())

        if not await held_within(all_waiting, WAIT_S, nc):
            raise Indeterminate("timeout", f"the consumer did not list {len(order)} waiting pulls within {WAIT_S} s")
        for n in range(len(order)):
            await publish_raw(nc, stream.subject("a"), f"m{n}".encode())
        got = {p: _summary(await task) for p, task in collecting.items()}
    finally:
        for task in collecting.values():
            task.cancel()
        await asyncio.gather(*collecting.values(), return_exceptions=True)
        for raw in pulls.values():
            await raw.close()
    served = {p: got[p][0] or got[p][1] for p in sorted(got)}
    assert served == {1: [b"m0"], 3: [b"m1"], 5: [b"m2"]}, (
        f"{ADR42}: with the prioritized policy, lower priorities are always served first (priority 1 gets m0, 3 m1, "
        f"5 m2); the pulls got {served}"
    )
