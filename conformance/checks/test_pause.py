"""Consumer pause (nats-server 2.11): CONSUMER.PAUSE, pause_until at create, heartbeats while paused.

In a cluster the meta leader answers a PAUSE as soon as it has proposed it, and the consumer's leader applies it a
little later (jsapi.consumer_info_showing): until then its consumer info and its deliveries are as before. So a check
reads the pause's effect from consumer info once it shows it, and stores what a paused consumer must hold, or starts
counting what it must send while paused, only then; on a single server the first read shows it.
"""

from __future__ import annotations

import time

import pytest

from jetcheck.conformance.jsapi import (
    APPLIED_TIMEOUT_S,
    NS,
    api,
    consumer_info_showing,
    create_consumer,
    epoch_seconds,
    eventually,
    held_within,
    rfc3339,
)

pytestmark = pytest.mark.asyncio

PAUSED_S = 2.0  # a pause a check waits out
LONG_PAUSE_S = 30.0  # a pause no check waits out
SLACK_S = 1.0  # how long after pause_until a resumed consumer may take to deliver
HEARTBEAT_S = 0.5
DOCS = "docs.nats.io (2.11, Consumer pausing)"


async def _pause(nc, stream: str, consumer: str, until: float | None) -> dict:
    """CONSUMER.PAUSE until `until` (seconds since the epoch; None: an empty payload, a resume); the reply."""
    body = None if until is None else {"pause_until": rfc3339(until)}
    return await api(nc, f"$JS.API.CONSUMER.PAUSE.{stream}.{consumer}", body)


def _accepted_as_asked(reply: dict, until: float, seconds: float) -> bool:
    """The PAUSE `reply` says paused true, the pause_until asked (`until`) and a positive pause_remaining of at most
    the `seconds` asked, as pause.until requires."""
    return (reply.get("paused"), abs(epoch_seconds(reply.get("pause_until") or rfc3339(0)) - until) < 0.001,
            0 < reply.get("pause_remaining", 0) <= seconds * NS) == (True, True, True)  # fmt: skip


def _paused(info: dict) -> bool:
    return info.get("paused") is True and info.get("pause_remaining", 0) > 0


def _resumed(info: dict) -> bool:
    return not info.get("paused")


def _shown(info: dict) -> str:
    return f"paused {info.get('paused')}, pause_remaining {info.get('pause_remaining')}"


class PushInbox:
    """A push consumer's deliver subject on the suite's connection: its messages and idle heartbeats, each with the
    monotonic time it came."""

    def __init__(self) -> None:
        self.data: list[tuple[float, bytes]] = []
        self.heartbeats: list[float] = []

    async def on_msg(self, msg) -> None:
        now = time.monotonic()
        status = (msg.headers or {}).get("Status")
        if status == "100" and not msg.reply:  # an idle heartbeat (flow control asks for a reply)
            self.heartbeats.append(now)
        elif status is None:
            self.data.append((now, msg.data))


async def _push_consumer(nc, names, stream, **config) -> tuple[str, PushInbox]:
    inbox, deliver = PushInbox(), nc.new_inbox()
    await nc.subscribe(deliver, cb=inbox.on_msg)
    name = names.consumer()
    await create_consumer(nc, stream.name, durable_name=name, deliver_subject=deliver, ack_policy="none", **config)
    return name, inbox


@pytest.mark.rule("pause.until")
async def test_pause_answers_and_shows_its_deadline(nc, names, make_stream):
    """PAUSE until 30 s from now answers paused, that pause_until and what remains; consumer info shows it too."""
    stream = await make_stream()
    name = (await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit"))["name"]
    asked = time.time() + LONG_PAUSE_S
    reply = await _pause(nc, stream.name, name, asked)
    assert _accepted_as_asked(reply, asked, LONG_PAUSE_S), (
        f"{DOCS}: the pause answers paused true, the pause_until asked ({rfc3339(asked)}) and what remains of it; "
        f"the server answered {reply}"
    )
    info = await consumer_info_showing(nc, stream.name, name, _paused)
    assert _paused(info), (
        f"{DOCS}: consumer info of a paused consumer shows paused and pause_remaining; {APPLIED_TIMEOUT_S} s after "
        f"the pause was answered it shows {_shown(info)}"
    )


@pytest.mark.rule("pause.no-deliveries")
async def test_a_paused_consumer_delivers_nothing_until_its_deadline(js, nc, names, make_stream, observe):
    """A message stored while the consumer is paused for 2 s comes once the pause has passed, not before."""
    stream = await make_stream()
    name, inbox = await _push_consumer(nc, names, stream)
    asked = time.monotonic()
    reply = await _pause(nc, stream.name, name, time.time() + PAUSED_S)
    assert reply.get("paused") is True, (
        f"{DOCS}: a paused consumer delivers nothing before its pause_until; a pause for {PAUSED_S} s was answered "
        f"{reply}"
    )
    # what remained when the server answered, from before it was asked: no later than its deadline, on our clock
    deadline = asked + reply.get("pause_remaining", 0) / NS
    info = await consumer_info_showing(nc, stream.name, name, _paused)
    assert _paused(info), (
        f"{DOCS}: a paused consumer delivers nothing before its pause_until; the pause for {PAUSED_S} s was answered "
        f"{reply}, yet {APPLIED_TIMEOUT_S} s later consumer info shows {_shown(info)}"
    )
    await js.publish(stream.subject("a"), b"held")

    async def delivered() -> bool:
        return bool(inbox.data)

    if not await held_within(delivered, PAUSED_S + SLACK_S, nc):
        pytest.fail(f"{DOCS}: delivery resumes once the deadline has passed; nothing came {SLACK_S} s after it")
    at, payload = inbox.data[0]
    observe("delivered_after_deadline_s", round(at - deadline, 3))
    assert at >= deadline, (
        f"{DOCS}: a paused consumer delivers nothing before its pause_until; {payload!r} came {deadline - at:.3f} s "
        "before it"
    )


HEARTBEATS = "'Consumer clients continue to receive heartbeat messages as usual' during a pause"


@pytest.mark.rule("pause.heartbeats-continue")
async def test_a_paused_push_consumer_keeps_sending_heartbeats(nc, names, make_stream, observe):
    """A push consumer with a 0.5 s idle heartbeat, paused for 30 s as the pause's answer and consumer info show,
    sends at least 2 heartbeats in the pause's first 1.5 s."""
    stream = await make_stream()
    name, inbox = await _push_consumer(nc, names, stream, idle_heartbeat=int(HEARTBEAT_S * NS))
    asked = time.time() + LONG_PAUSE_S
    reply = await _pause(nc, stream.name, name, asked)
    assert _accepted_as_asked(reply, asked, LONG_PAUSE_S), (
        f"{DOCS}: {HEARTBEATS}; the pause until {rfc3339(asked)} was not accepted as asked (paused true, that "
        f"pause_until and a positive pause_remaining): the server answered {reply}"
    )
    info = await consumer_info_showing(nc, stream.name, name, _paused)
    assert _paused(info), (
        f"{DOCS}: {HEARTBEATS}; the pause was answered {reply}, yet {APPLIED_TIMEOUT_S} s later consumer info shows "
        f"{_shown(info)}"
    )
    paused_at = time.monotonic()

    async def two_heartbeats() -> bool:
        return len([t for t in inbox.heartbeats if t >= paused_at]) >= 2

    if not await held_within(two_heartbeats, 3 * HEARTBEAT_S, nc):
        beats = [round(t - paused_at, 3) for t in inbox.heartbeats if t >= paused_at]
        pytest.fail(
            f"{DOCS}: {HEARTBEATS}; with idle_heartbeat {HEARTBEAT_S}s, {len(beats)} came in the pause's first "
            f"{3 * HEARTBEAT_S} s: {beats}"
        )
    observe("heartbeats", len(inbox.heartbeats))


@pytest.mark.rule("pause.resume-empty")
async def test_an_empty_pause_request_resumes_at_once(js, nc, names, make_stream):
    """A consumer paused for 30 s resumes at an empty PAUSE: paused false, and the held message comes."""
    stream = await make_stream()
    name, inbox = await _push_consumer(nc, names, stream)
    reply = await _pause(nc, stream.name, name, time.time() + LONG_PAUSE_S)
    info = await consumer_info_showing(nc, stream.name, name, _paused)
    assert _paused(info), (
        f"{DOCS}: 'If payload is nil the consumer will be resumed' is judged on a paused consumer; the pause for "
        f"{LONG_PAUSE_S} s was answered {reply}, and {APPLIED_TIMEOUT_S} s later consumer info shows {_shown(info)}"
    )
    await js.publish(stream.subject("a"), b"held")
    reply = await _pause(nc, stream.name, name, None)
    assert reply.get("paused") is False, f"{DOCS}: 'If payload is nil the consumer will be resumed'; answered {reply}"
    info = await consumer_info_showing(nc, stream.name, name, _resumed)
    assert _resumed(info), (
        f"{DOCS}: 'If payload is nil the consumer will be resumed'; the resume was answered {reply}, yet "
        f"{APPLIED_TIMEOUT_S} s later consumer info shows {_shown(info)}"
    )

    async def delivered() -> bool:
        return bool(inbox.data)

    if not await held_within(delivered, SLACK_S, nc):
        # what it takes to get it: another message stored after the resume
        await js.publish(stream.subject("a"), b"next")
        then = (
            "came only once another message was stored"
            if await eventually(delivered, timeout=SLACK_S)
            else ("did not come even after another message was stored")
        )
        pytest.fail(
            f"{DOCS}: a resumed consumer delivers; the pause answered paused false, yet the message stored during the "
            f"pause did not come within {SLACK_S} s, and {then}"
        )


@pytest.mark.rule("pause.create-config")
async def test_a_consumer_created_with_pause_until_starts_paused(nc, names, make_stream):
    """A consumer created with pause_until 30 s from now is paused, with that much remaining."""
    stream = await make_stream()
    until = rfc3339(time.time() + LONG_PAUSE_S)
    info = await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit",
                                 pause_until=until)  # fmt: skip
    assert info.get("paused") is True and 0 < info.get("pause_remaining", 0) <= LONG_PAUSE_S * NS, (
        f"{DOCS}: a consumer created with PauseUntil is paused until then; created with pause_until {until}, it has "
        f"paused {info.get('paused')}, pause_remaining {info.get('pause_remaining')}"
    )
