"""Consumers: durable and ephemeral, deliver and ack policies, redelivery, limits, filters and info counters."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import (
    NS,
    ApiError,
    RawPull,
    api,
    assert_removed_once_inactive,
    consumer_info,
    create_consumer,
    eventually,
)
from jetcheck.versions import parse_version

pytestmark = pytest.mark.asyncio

MS = 1_000_000


async def _publish(js, stream, *tokens: str) -> list[int]:
    """Publish one message per token to `<root>.<token>`; their stream sequences."""
    return [(await js.publish(stream.subject(token), token.encode())).seq for token in tokens]


async def _consumer(nc, names, stream, **config: Any) -> str:
    """A durable pull consumer with explicit acks unless `config` says otherwise; its name."""
    name = names.consumer()
    await create_consumer(nc, stream.name, durable_name=name, **{"ack_policy": "explicit", **config})
    return name


async def _stream_and_consumer(nc, js, names, make_stream, tokens: tuple[str, ...], **config: Any) -> tuple[Any, str]:
    """A new stream holding one message per token (`_publish`) and a consumer of it (`_consumer`, with `config`)."""
    stream = await make_stream()
    await _publish(js, stream, *tokens)
    return stream, await _consumer(nc, names, stream, **config)


async def _third_of_three_acked(nc, js, names, make_stream, ack_policy: str) -> tuple[Any, str]:
    """Three messages fetched by a new consumer with `ack_policy`, and the third of them acked."""
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a", "a", "a"), ack_policy=ack_policy)
    messages = await _fetch(nc, stream, consumer, 3)
    await _ack(nc, messages[2])
    return stream, consumer


async def _deliveries(nc, stream, consumer: str, count: int, wait: float) -> list[tuple[Any, float]]:
    """Pull until `count` deliveries arrived or `wait` passed; (message, seconds since the call) in arrival order."""
    started = time.monotonic()
    got: list[tuple[Any, float]] = []
    while len(got) < count:
        left = wait - (time.monotonic() - started)
        if left <= 0.05:
            break
        expires = left  # one long request: a redelivery falling between two requests would be delayed
        raw = await RawPull(nc, stream.name, consumer).send({"batch": count - len(got), "expires": int(expires * NS)})
        try:
            while len(got) < count:
                before = len(raw.reply.messages)
                reply = await raw.collect(expires + 0.2, messages=before + 1)
                if len(reply.messages) == before:
                    break
                got.append((reply.messages[-1], time.monotonic() - started))
        finally:
            await raw.close()
    return got


async def _fetch(nc, stream, consumer: str, count: int, wait: float = 2.0) -> list[Any]:
    return [msg for msg, _ in await _deliveries(nc, stream, consumer, count, wait)]


def _seqs(messages: list[Any]) -> list[int]:
    return [m.metadata.sequence.stream for m in messages]


async def _ack(nc, msg: Any, payload: bytes = b"+ACK") -> None:
    await nc.publish(msg.reply, payload)
    await nc.flush()


async def _info_reaches(nc, stream, consumer: str, want: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """Consumer info once every `want` key (dotted for nested) has its value, or the last info seen."""
    seen: dict[str, Any] = {}

    def pick(info: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key in want:
            value: Any = info
            for part in key.split("."):
                value = (value or {}).get(part, 0)
            out[key] = value
        return out

    async def reached() -> bool:
        seen.update(pick(await consumer_info(nc, stream.name, consumer)))
        return seen == want

    await eventually(reached, timeout)
    return seen


# --- durable and ephemeral ---------------------------------------------------------------------------------------


@pytest.mark.rule("consumers.durable")
async def test_durable_consumer_is_named_listed_and_created_idempotently(nc, names, make_stream):
    """A durable is named by durable_name, listed, and creating it again identically returns the same consumer."""
    stream = await make_stream()
    name = names.consumer()
    config = {"durable_name": name, "ack_policy": "explicit"}
    first = await create_consumer(nc, stream.name, **config)
    assert first["name"] == name, f"durable named {first['name']!r}, not {name!r}"
    assert first["config"].get("durable_name") == name, f"config lost durable_name: {first['config']}"
    again = await create_consumer(nc, stream.name, **config)
    assert (again["name"], again["created"]) == (name, first["created"]), "identical create made another consumer"
    listed = await api(nc, f"$JS.API.CONSUMER.NAMES.{stream.name}")
    assert name in (listed.get("consumers") or []), f"durable {name} not listed: {listed}"


@pytest.mark.rule("consumers.ephemeral")
async def test_ephemeral_consumer_gets_a_name_and_is_removed_when_inactive(nc, make_stream, observe):
    """An ephemeral consumer is named by the server and removed after inactive_threshold without activity, not
    before."""
    stream = await make_stream()
    # long enough that even a loaded machine looks again well before it: a removal sooner can only be seen then
    threshold = 2.0
    started = time.monotonic()  # before the create: the consumer cannot have been inactive longer than since then
    created = await create_consumer(nc, stream.name, ack_policy="explicit", inactive_threshold=int(threshold * NS))
    name = created["name"]
    assert name, "the server gave the ephemeral consumer no name"
    assert not created["config"].get("durable_name"), f"ephemeral reported as durable: {created['config']}"

    await assert_removed_once_inactive(
        nc,
        stream.name,
        name,
        threshold,
        started,
        observe,
        lambda inactive_at_most: (
            f"the ephemeral consumer was removed after at most {inactive_at_most:.3f} s without "
            f"activity; its inactive_threshold is {threshold} s"
        ),
    )


# --- deliver policies --------------------------------------------------------------------------------------------


@pytest.mark.rule("consumers.deliver-all")
async def test_deliver_all_starts_at_the_first_message(nc, js, names, make_stream):
    """Deliver policy all delivers the stream from its first message."""
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a", "b", "a"), deliver_policy="all")
    assert _seqs(await _fetch(nc, stream, consumer, 3)) == [1, 2, 3]


@pytest.mark.rule("consumers.deliver-last")
async def test_deliver_last_starts_at_the_last_message(nc, js, names, make_stream):
    """Deliver policy last starts at the stream's last message."""
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a", "b", "a"), deliver_policy="last")
    info = await consumer_info(nc, stream.name, consumer)
    assert info["num_pending"] == 1, f"deliver last must leave only the last message pending: {info['num_pending']}"
    assert _seqs(await _fetch(nc, stream, consumer, 1)) == [3]


@pytest.mark.rule("consumers.deliver-new")
async def test_deliver_new_delivers_only_later_messages(nc, js, names, make_stream):
    """Deliver policy new skips every message stored before the consumer was created."""
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a", "b", "a"), deliver_policy="new")
    info = await consumer_info(nc, stream.name, consumer)
    assert info["num_pending"] == 0, f"earlier messages pending for deliver new: {info['num_pending']}"
    await _publish(js, stream, "c")
    assert _seqs(await _fetch(nc, stream, consumer, 1)) == [4]


@pytest.mark.rule("consumers.deliver-by-start-sequence")
async def test_deliver_by_start_sequence_starts_at_opt_start_seq(nc, js, names, make_stream):
    """Deliver policy by_start_sequence starts at opt_start_seq."""
    stream, consumer = await _stream_and_consumer(
        nc, js, names, make_stream, ("a", "b", "a"), deliver_policy="by_start_sequence", opt_start_seq=2
    )
    assert _seqs(await _fetch(nc, stream, consumer, 2)) == [2, 3]


@pytest.mark.rule("consumers.deliver-by-start-time")
async def test_deliver_by_start_time_starts_at_the_first_message_at_that_time(nc, js, names, make_stream):
    """Deliver policy by_start_time starts at the first message stored at or after opt_start_time."""
    stream = await make_stream()
    await _publish(js, stream, "a", "b", "a")
    second = (await api(nc, f"$JS.API.STREAM.MSG.GET.{stream.name}", {"seq": 2}))["message"]["time"]
    consumer = await _consumer(nc, names, stream, deliver_policy="by_start_time", opt_start_time=second)
    assert _seqs(await _fetch(nc, stream, consumer, 2)) == [2, 3], f"start time {second}"


@pytest.mark.rule("consumers.deliver-by-start-time")
async def test_deliver_by_start_time_starts_at_that_time_when_later_messages_were_deleted(nc, js, names, make_stream):
    """Deliver policy by_start_time starts at the first message at or after opt_start_time, also when messages
    stored after it were deleted."""
    stream = await make_stream()
    await _publish(js, stream, *["a"] * 10)
    for seq in range(4, 8):
        await api(nc, f"$JS.API.STREAM.MSG.DELETE.{stream.name}", {"seq": seq})
    second = (await api(nc, f"$JS.API.STREAM.MSG.GET.{stream.name}", {"seq": 2}))["message"]["time"]
    consumer = await _consumer(nc, names, stream, deliver_policy="by_start_time", opt_start_time=second)
    pending = (await consumer_info(nc, stream.name, consumer))["num_pending"]
    delivered = _seqs(await _fetch(nc, stream, consumer, 5))
    assert (pending, delivered) == (5, [2, 3, 8, 9, 10]), (
        f"10 messages, 4-7 deleted, opt_start_time the time of message 2: documented to start at message 2 "
        f"(num_pending 5, deliveries [2, 3, 8, 9, 10]); the consumer had num_pending {pending} and delivered "
        f"{delivered}"
    )


@pytest.mark.rule("consumers.deliver-last-per-subject")
async def test_deliver_last_per_subject_delivers_each_subjects_last_message(nc, js, names, make_stream):
    """Deliver policy last_per_subject delivers the last message of each matching subject, then new ones."""
    stream = await make_stream()
    await _publish(js, stream, "a", "b", "a")
    consumer = await _consumer(nc, names, stream, deliver_policy="last_per_subject", filter_subject=stream.subject(">"))
    assert _seqs(await _fetch(nc, stream, consumer, 2)) == [2, 3]
    await _publish(js, stream, "b")
    assert _seqs(await _fetch(nc, stream, consumer, 1)) == [4]


@pytest.mark.rule("consumers.last-per-subject-pending")
async def test_last_per_subject_pending_stays_right_after_a_filter_update_on_memory(nc, js, names, make_stream):
    """A last_per_subject consumer on a memory stream counts one pending message per subject still to come, also
    after a filter update recounts it."""
    stream = await make_stream(storage="memory")
    # k.A x10 (1-10), k.B 11, k.C 12, k.D 13, k.B 14, 200 outside the filter (15-214), k.C 215
    await _publish(js, stream, *["k.A"] * 10, "k.B", "k.C", "k.D", "k.B", *["bar"] * 200, "k.C")
    config = {
        "durable_name": names.consumer(),
        "ack_policy": "explicit",
        "deliver_policy": "last_per_subject",
        "filter_subject": stream.subject("k", "*"),
    }
    created = await create_consumer(nc, stream.name, **config)
    consumer = created["name"]
    assert created["num_pending"] == 4, f"last messages of k.A, k.B, k.C, k.D pending: {created['num_pending']}"
    assert _seqs(await _fetch(nc, stream, consumer, 2)) == [10, 13]
    want = {"num_pending": 2}
    assert await _info_reaches(nc, stream, consumer, want) == want, "k.B (14) and k.C (215) are left"
    updated = await create_consumer(nc, stream.name, **{**config, "filter_subject": stream.subject("k", ">")})
    assert updated["num_pending"] == 2, (
        "after delivering 10 and 13, only the last messages of k.B (14) and k.C (215) are left, and a filter "
        f"update from k.* to k.> matches the same messages; num_pending after it is {updated['num_pending']}, not 2"
    )


START_TIME = "2024-01-01T00:00:00Z"


@pytest.mark.rule("consumers.opt-start-conflict")
@pytest.mark.parametrize(
    "config",
    [
        {"deliver_policy": "all", "opt_start_seq": 2},
        {"deliver_policy": "last", "opt_start_time": START_TIME},
        {"deliver_policy": "new", "opt_start_seq": 2},
        {"deliver_policy": "by_start_sequence"},
        {"deliver_policy": "by_start_time", "opt_start_time": START_TIME, "opt_start_seq": 1},
    ],
    ids=["all+seq", "last+time", "new+seq", "by-seq-without-seq", "by-time+seq"],
)
async def test_conflicting_start_options_are_rejected_with_10094(nc, names, make_stream, config, observe):
    """A deliver policy conflicting with its opt_start_* is rejected with 400/10094."""
    stream = await make_stream()
    with pytest.raises(ApiError) as rejected:
        await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit", **config)
    assert_refused_as_documented(
        refusal_of(rejected.value), DocumentedRefusal(400, 10094), f"a consumer with {config}", observe
    )


# --- ack policies ------------------------------------------------------------------------------------------------


@pytest.mark.rule("consumers.ack-explicit")
async def test_explicit_ack_acknowledges_only_that_message(nc, js, names, make_stream):
    """With ack explicit, acking the third message leaves the first two pending and the ack floor at 0."""
    stream, consumer = await _third_of_three_acked(nc, js, names, make_stream, "explicit")
    want = {"num_ack_pending": 2, "ack_floor.stream_seq": 0}
    assert await _info_reaches(nc, stream, consumer, want) == want


@pytest.mark.rule("consumers.ack-all")
async def test_ack_all_acknowledges_every_earlier_message(nc, js, names, make_stream):
    """With ack all, acking the third message acknowledges the first two as well."""
    stream, consumer = await _third_of_three_acked(nc, js, names, make_stream, "all")
    want = {"num_ack_pending": 0, "ack_floor.stream_seq": 3}
    assert await _info_reaches(nc, stream, consumer, want) == want


@pytest.mark.rule("consumers.ack-none")
async def test_ack_none_leaves_nothing_pending(nc, js, names, make_stream):
    """With ack none, delivered messages are not pending acknowledgement and the ack floor follows delivery."""
    stream, consumer = await _stream_and_consumer(
        nc, js, names, make_stream, ("a", "a", "a"), ack_policy="none", ack_wait=200 * MS
    )
    assert len(await _fetch(nc, stream, consumer, 3)) == 3
    want = {"num_ack_pending": 0, "ack_floor.stream_seq": 3, "num_redelivered": 0}
    assert await _info_reaches(nc, stream, consumer, want) == want


@pytest.mark.rule("consumers.ack-policy-immutable")
async def test_ack_policy_cannot_be_updated(nc, names, make_stream, observe):
    """Updating a consumer's ack policy is rejected with 500/10012 and the policy stays."""
    stream = await make_stream()
    name = names.consumer()
    await create_consumer(nc, stream.name, durable_name=name, ack_policy="explicit")
    with pytest.raises(ApiError) as rejected:
        await create_consumer(nc, stream.name, durable_name=name, ack_policy="all")
    asked = "an update of ack_policy explicit to all"
    assert_refused_as_documented(refusal_of(rejected.value), DocumentedRefusal(500, 10012), asked, observe)
    assert (await consumer_info(nc, stream.name, name))["config"]["ack_policy"] == "explicit"


@pytest.mark.rule("consumers.mem-storage-immutable")
async def test_mem_storage_cannot_be_updated(nc, names, make_stream):
    """Updating a durable consumer's mem_storage is rejected with 500/10012 and the setting stays."""
    stream = await make_stream()
    name = names.consumer()
    await create_consumer(nc, stream.name, durable_name=name, ack_policy="explicit")
    try:
        await create_consumer(nc, stream.name, durable_name=name, ack_policy="explicit", mem_storage=True)
    except ApiError as exc:
        refused: tuple[int, int] | None = (exc.code, exc.err_code)
        answer = f"rejected with {exc.code}/{exc.err_code}"
    else:
        refused, answer = None, "accepted"
    kept = (await consumer_info(nc, stream.name, name))["config"].get("mem_storage", False)
    assert (refused, kept) == ((500, 10012), False), (
        "mem_storage is documented as not editable: an update from false to true must be rejected (500/10012) and "
        f"leave it false; the update was {answer} and consumer info reports mem_storage {kept}"
    )


# --- acknowledgements and redelivery -----------------------------------------------------------------------------


@pytest.mark.rule("consumers.ack-wait-redelivery")
async def test_unacked_message_is_redelivered_after_ack_wait(nc, js, names, make_stream, observe):
    """A message not acked within ack_wait is redelivered with its delivery count increased."""
    ack_wait = 0.3
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a",), ack_wait=int(ack_wait * NS))
    got = await _deliveries(nc, stream, consumer, 2, wait=ack_wait + 3.0)
    assert len(got) == 2, f"no redelivery within {ack_wait + 3.0:.1f}s of a {ack_wait}s ack_wait"
    (first, t1), (again, t2) = got
    observe("redelivered_after_s", round(t2 - t1, 3))
    assert again.metadata.sequence.stream == first.metadata.sequence.stream == 1
    assert (first.metadata.num_delivered, again.metadata.num_delivered) == (1, 2)
    assert t2 - t1 >= ack_wait * 0.8, f"redelivered after {t2 - t1:.3f}s, inside the {ack_wait}s ack_wait"


async def _redelivery_after(nc, js, names, make_stream, ack_payload: bytes, ack_wait: float, wait: float):
    """Deliver one message, answer it with `ack_payload`; (seconds until it came again or None, the first msg)."""
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a",), ack_wait=int(ack_wait * NS))
    (first,) = await _fetch(nc, stream, consumer, 1)
    await _ack(nc, first, ack_payload)
    again = await _deliveries(nc, stream, consumer, 1, wait=wait)
    if not again:
        return None, stream, consumer
    assert again[0][0].metadata.num_delivered == 2
    return again[0][1], stream, consumer


@pytest.mark.rule("consumers.nak")
async def test_nak_redelivers_at_once(nc, js, names, make_stream, observe):
    """A -NAK redelivers the message at once, long before ack_wait."""
    after, _, _ = await _redelivery_after(nc, js, names, make_stream, b"-NAK", ack_wait=10.0, wait=1.5)
    assert after is not None, "no redelivery within 1.5s of a -NAK (ack_wait 10s)"
    observe("redelivered_after_s", round(after, 3))


@pytest.mark.rule("consumers.nak-delay")
async def test_nak_with_delay_redelivers_after_the_delay(nc, js, names, make_stream, observe):
    """A -NAK {"delay": 500ms} redelivers the message after about 500 ms, not at once and not after ack_wait."""
    delay = 0.5
    payload = b'-NAK {"delay": %d}' % int(delay * NS)
    after, _, _ = await _redelivery_after(nc, js, names, make_stream, payload, ack_wait=10.0, wait=delay + 2.5)
    assert after is not None, f"no redelivery within {delay + 2.5}s of a -NAK with a {delay}s delay (ack_wait 10s)"
    observe("redelivered_after_s", round(after, 3))
    assert after >= delay * 0.8, f"redelivered {after:.3f}s after a -NAK with delay {delay}s"


@pytest.mark.rule("consumers.in-progress")
async def test_in_progress_restarts_the_ack_timer(nc, js, names, make_stream, observe):
    """A +WPI restarts ack_wait: the message comes again only ack_wait after the +WPI."""
    ack_wait, progress_at = 0.6, 0.4
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a",), ack_wait=int(ack_wait * NS))
    (first,) = await _fetch(nc, stream, consumer, 1)
    delivered_at = time.monotonic()
    await asyncio.sleep(progress_at)  # the behaviour under test is the timer: report progress inside ack_wait
    await _ack(nc, first, b"+WPI")
    pulled_at = time.monotonic()
    again = await _deliveries(nc, stream, consumer, 1, wait=ack_wait + 3.0)
    assert again, "the message was never redelivered after +WPI and no ack"
    after = pulled_at - delivered_at + again[0][1]
    observe("redelivered_after_delivery_s", round(after, 3))
    assert after >= progress_at + ack_wait * 0.8, (
        f"redelivered {after:.3f}s after delivery; a +WPI at {progress_at}s should hold it until "
        f"{progress_at + ack_wait:.1f}s (ack_wait {ack_wait}s)"
    )


@pytest.mark.rule("consumers.term")
async def test_term_stops_redelivery(nc, js, names, make_stream):
    """After +TERM the message is not redelivered and not pending acknowledgement."""
    ack_wait = 0.2
    after, stream, consumer = await _redelivery_after(nc, js, names, make_stream, b"+TERM", ack_wait, wait=1.0)
    assert after is None, f"terminated message redelivered {after:.3f}s after +TERM"
    want = {"num_ack_pending": 0}
    assert await _info_reaches(nc, stream, consumer, want) == want


@pytest.mark.rule("consumers.max-deliver")
async def test_message_is_delivered_at_most_max_deliver_times(nc, js, names, make_stream):
    """With max_deliver 2 a never-acked message is delivered twice and then no more."""
    ack_wait = 0.2
    stream, consumer = await _stream_and_consumer(
        nc, js, names, make_stream, ("a",), ack_wait=int(ack_wait * NS), max_deliver=2
    )
    # Six ack_waits: a server ignoring max_deliver redelivers several more times inside this window.
    got = await _deliveries(nc, stream, consumer, 5, wait=ack_wait * 6)
    counts = [m.metadata.num_delivered for m, _ in got]
    assert counts == [1, 2], f"deliveries (num_delivered) {counts}, expected exactly [1, 2] with max_deliver 2"


@pytest.mark.rule("consumers.backoff")
async def test_redeliveries_follow_the_backoff_schedule(nc, js, names, make_stream, observe):
    """With backoff [200ms, 800ms], ack_wait is 200 ms and the second redelivery waits about 800 ms."""
    backoff = [0.2, 0.8]
    stream = await make_stream()
    await _publish(js, stream, "a")
    name = names.consumer()
    created = await create_consumer(
        nc, stream.name, durable_name=name, ack_policy="explicit", max_deliver=3, backoff=[int(b * NS) for b in backoff]
    )
    assert created["config"].get("ack_wait") == int(backoff[0] * NS), f"ack_wait {created['config'].get('ack_wait')}"
    got = await _deliveries(nc, stream, name, 3, wait=sum(backoff) + 3.0)
    assert len(got) == 3, f"only {len(got)} deliveries with backoff {backoff} and max_deliver 3"
    gaps = [round(got[i + 1][1] - got[i][1], 3) for i in range(2)]
    observe("gaps_s", gaps)
    assert backoff[0] * 0.8 <= gaps[0] < backoff[1] * 0.8, f"first redelivery after {gaps[0]}s, backoff {backoff}"
    assert gaps[1] >= backoff[1] * 0.8, f"second redelivery after {gaps[1]}s, backoff {backoff}"


def _backoff_may_equal_max_deliver(version: str) -> bool:
    """server/consumer.go: len(backoff) == max_deliver is refused before 2.10.23, accepted from it on."""
    return parse_version(version) >= parse_version("2.10.23")


@pytest.mark.rule("consumers.backoff-max-deliver")
async def test_backoff_longer_than_max_deliver_is_rejected_with_10116(
    nc, names, make_stream, expected_release, observe
):
    """Three backoff values with max_deliver 2 are rejected with 400/10116; two follow the version's rule."""
    stream = await make_stream()
    backoff = [100 * MS, 200 * MS, 300 * MS]
    with pytest.raises(ApiError) as rejected:
        await create_consumer(
            nc, stream.name, durable_name=names.consumer(), ack_policy="explicit", max_deliver=2, backoff=backoff
        )
    assert_refused_as_documented(
        refusal_of(rejected.value), DocumentedRefusal(400, 10116), "three backoff values with max_deliver 2"
    )
    try:
        equal = await create_consumer(
            nc, stream.name, durable_name=names.consumer(), ack_policy="explicit", max_deliver=2, backoff=backoff[:2]
        )
    except ApiError as exc:
        equal = None
        observe("equal_length", f"rejected {exc.code}/{exc.err_code}")
        assert exc.err_code == 10116, str(exc)
    else:
        observe("equal_length", "accepted")
        assert equal["config"]["backoff"] == backoff[:2]
    accepted = equal is not None
    expected = _backoff_may_equal_max_deliver(expected_release)
    assert accepted == expected, (
        f"as nats-server {expected_release}: backoff of 2 values with max_deliver 2 was "
        f"{'accepted' if accepted else 'rejected'}; "
        f"expected {'accepted (2.10.23+)' if expected else 'rejected (before 2.10.23)'}"
    )


@pytest.mark.rule("consumers.max-ack-pending")
async def test_no_more_than_max_ack_pending_are_delivered_unacked(nc, js, names, make_stream):
    """With max_ack_pending 2, a pull for 5 gets 2; acking one lets exactly one more through."""
    stream, consumer = await _stream_and_consumer(
        nc, js, names, make_stream, ("a", "a", "a", "a", "a"), max_ack_pending=2
    )
    first = await _deliveries(nc, stream, consumer, 5, wait=0.6)
    assert _seqs([m for m, _ in first]) == [1, 2], f"max_ack_pending 2 let through {_seqs([m for m, _ in first])}"
    await _ack(nc, first[0][0])
    more = await _deliveries(nc, stream, consumer, 5, wait=0.6)
    assert _seqs([m for m, _ in more]) == [3], f"after one ack, delivered {_seqs([m for m, _ in more])}"


# --- filters -----------------------------------------------------------------------------------------------------


@pytest.mark.rule("consumers.filter-subject")
async def test_filter_subject_delivers_and_counts_only_matching_messages(nc, js, names, make_stream):
    """A consumer filtered on `<root>.a` counts and delivers only the messages on it."""
    stream = await make_stream()
    await _publish(js, stream, "a", "b", "a", "c")
    consumer = await _consumer(nc, names, stream, filter_subject=stream.subject("a"))
    assert (await consumer_info(nc, stream.name, consumer))["num_pending"] == 2
    assert _seqs(await _deliveries_only(nc, stream, consumer)) == [1, 3]


async def _deliveries_only(nc, stream, consumer: str) -> list[Any]:
    """Everything the consumer delivers to a pull for 10 within a short wait."""
    return [m for m, _ in await _deliveries(nc, stream, consumer, 10, wait=0.6)]


@pytest.mark.rule("consumers.filter-subjects")
async def test_filter_subjects_deliver_only_matching_messages_in_order(nc, js, names, make_stream):
    """A consumer with filter_subjects [a, c] delivers messages on a and c, in stream order."""
    stream = await make_stream()
    await _publish(js, stream, "a", "b", "c", "a")
    consumer = await _consumer(nc, names, stream, filter_subjects=[stream.subject("a"), stream.subject("c")])
    assert (await consumer_info(nc, stream.name, consumer))["num_pending"] == 3
    assert _seqs(await _deliveries_only(nc, stream, consumer)) == [1, 3, 4]


@pytest.mark.rule("consumers.filter-validation")
@pytest.mark.parametrize(
    ("filters", "code"),
    [
        ({"filter_subject": "a", "filter_subjects": ["b"]}, 10136),
        ({"filter_subjects": ["a.*", "a.b"]}, 10138),
        ({"filter_subjects": ["a", ""]}, 10139),
    ],
    ids=["both", "overlap", "empty"],
)  # fmt: skip
async def test_invalid_filters_are_rejected(nc, names, make_stream, filters, code):
    """Both filter forms, overlapping filters and an empty filter are rejected with 400 and their codes."""
    stream = await make_stream()
    rooted = {k: stream.subject(v) if isinstance(v, str) else [stream.subject(s) if s else s for s in v]
              for k, v in filters.items()}  # fmt: skip
    with pytest.raises(ApiError) as rejected:
        await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit", **rooted)
    assert_refused_as_documented(refusal_of(rejected.value), DocumentedRefusal(400, code), f"a consumer with {filters}")


# --- info counters -----------------------------------------------------------------------------------------------


@pytest.mark.rule("consumers.info-pending-counters")
async def test_info_counts_pending_ack_pending_delivered_and_ack_floor(nc, js, names, make_stream):
    """After 5 stored, 3 delivered and the first 2 acked: num_pending 2, num_ack_pending 1, delivered 3, floor 2."""
    stream = await make_stream()
    await _publish(js, stream, "a", "a", "a", "a", "a")
    consumer = await _consumer(nc, names, stream)
    info = await consumer_info(nc, stream.name, consumer)
    assert (info["num_pending"], info["num_ack_pending"]) == (5, 0), f"before delivery: {info}"
    messages = await _fetch(nc, stream, consumer, 3)
    for msg in messages[:2]:
        await _ack(nc, msg)
    want = {
        "num_pending": 2,
        "num_ack_pending": 1,
        "delivered.consumer_seq": 3,
        "delivered.stream_seq": 3,
        "ack_floor.consumer_seq": 2,
        "ack_floor.stream_seq": 2,
    }
    assert await _info_reaches(nc, stream, consumer, want) == want


@pytest.mark.rule("consumers.info-redelivered")
async def test_info_counts_redelivered_messages(nc, js, names, make_stream):
    """Two unacked messages redelivered count num_redelivered 2; acking one leaves 1."""
    ack_wait = 0.2
    stream, consumer = await _stream_and_consumer(nc, js, names, make_stream, ("a", "a"), ack_wait=int(ack_wait * NS))
    got = await _deliveries(nc, stream, consumer, 4, wait=ack_wait + 3.0)
    assert [m.metadata.num_delivered for m, _ in got] == [1, 1, 2, 2], "both messages should be redelivered once"
    want = {"num_redelivered": 2, "num_ack_pending": 2}
    assert await _info_reaches(nc, stream, consumer, want, timeout=ack_wait) == want
    await _ack(nc, got[2][0])
    want = {"num_redelivered": 1, "num_ack_pending": 1}
    assert await _info_reaches(nc, stream, consumer, want, timeout=ack_wait) == want
