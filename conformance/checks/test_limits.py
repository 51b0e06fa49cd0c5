"""Stream limits and discard policies: what is kept, what is refused and with which error."""

from __future__ import annotations

import time

import pytest
from nats.js.errors import APIError

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import NS, ApiError, api, create_stream, eventually, stream_state

pytestmark = pytest.mark.asyncio


STORAGES = pytest.mark.parametrize("storage", ["file", "memory"])
REJECTED_STORE = DocumentedRefusal(503, 10077)
INVALID_CONFIG = DocumentedRefusal(500, 10052)
MAX_AGE_S = 2.0  # long enough that even a loaded machine looks well before it: a removal sooner is seen then
# how long after max_age the server may take to remove expired messages (its expiry runs on a timer)
EXPIRY_SLACK_S = 3.0


async def _publish_all(js, stream, *tokens: str, payload: bytes = b"m") -> list[int]:
    return [(await js.publish(stream.subject(*token.split(".")), payload)).seq for token in tokens]


async def _rejected_publish(js, subject: str, payload: bytes = b"m", headers=None) -> APIError:
    with pytest.raises(APIError) as rejected:
        await js.publish(subject, payload, headers=headers)
    return rejected.value


def _subjects(stream, counts: dict[str, int]) -> dict[str, int]:
    return {stream.subject(*k.split(".")): v for k, v in counts.items()}


@pytest.mark.rule("limits.max-msgs-discard-old")
@STORAGES
async def test_max_msgs_with_discard_old_keeps_the_newest(js, nc, make_stream, storage):
    """With max_msgs 3 and discard old, five publishes are accepted and sequences 3-5 remain."""
    stream = await make_stream(storage=storage, max_msgs=3)
    assert await _publish_all(js, stream, *"abcde") == [1, 2, 3, 4, 5]
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (3, 3, 5), f"state: {state}"


@pytest.mark.rule("limits.max-msgs-discard-new")
@STORAGES
async def test_max_msgs_with_discard_new_rejects_with_10077(js, nc, make_stream, storage):
    """With max_msgs 3 and discard new, the fourth publish is refused with 503/10077 'maximum messages exceeded'."""
    stream = await make_stream(storage=storage, max_msgs=3, discard="new")
    await _publish_all(js, stream, *"abc")
    error = await _rejected_publish(js, stream.subject("d"))
    assert_refused_as_documented(refusal_of(error), REJECTED_STORE, "a publish beyond max_msgs with discard new")
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (3, 1, 3), f"state: {state}"


# Three 1000-byte payloads (plus per-message overhead well under 100 bytes) fit in 3500 bytes; four do not.
MAX_BYTES = 3500
PAYLOAD = b"x" * 1000


@pytest.mark.rule("limits.max-bytes-discard-old")
@STORAGES
async def test_max_bytes_with_discard_old_removes_the_oldest(js, nc, make_stream, storage):
    """With max_bytes for three messages and discard old, five publishes leave the newest three within the limit."""
    stream = await make_stream(storage=storage, max_bytes=MAX_BYTES)
    assert await _publish_all(js, stream, *"abcde", payload=PAYLOAD) == [1, 2, 3, 4, 5]
    info = await api(nc, f"$JS.API.STREAM.INFO.{stream.name}")
    state = info["state"]
    assert (state["messages"], state["first_seq"], state["last_seq"]) == (3, 3, 5), f"state: {state}"
    assert state["bytes"] <= MAX_BYTES


@pytest.mark.rule("limits.max-bytes-discard-new")
@STORAGES
async def test_max_bytes_with_discard_new_rejects_with_10077(js, nc, make_stream, storage):
    """With max_bytes for three messages and discard new, the fourth is refused with 'maximum bytes exceeded'."""
    stream = await make_stream(storage=storage, max_bytes=MAX_BYTES, discard="new")
    await _publish_all(js, stream, *"abc", payload=PAYLOAD)
    error = await _rejected_publish(js, stream.subject("d"), PAYLOAD)
    assert_refused_as_documented(refusal_of(error), REJECTED_STORE, "a publish beyond max_bytes with discard new")
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.last_seq) == (3, 3), f"state: {state}"


@pytest.mark.rule("limits.max-age")
@STORAGES
async def test_max_age_removes_messages_once_they_are_older_and_not_before(js, nc, make_stream, storage, observe):
    """With max_age 2 s, messages are kept until they are 2 s old, then removed within a few seconds, and the first
    sequence moves past them."""
    stream = await make_stream(storage=storage, max_age=int(MAX_AGE_S * NS))
    sent = time.monotonic()  # before the publishes: the server stamps each message later than this
    await _publish_all(js, stream, "a", "b")
    seen_at = sent

    async def expired() -> bool:
        nonlocal seen_at
        gone = (await stream_state(nc, stream.name)).messages == 0
        seen_at = time.monotonic()
        return gone

    assert await eventually(expired, timeout=MAX_AGE_S + EXPIRY_SLACK_S), (
        f"messages older than max_age {MAX_AGE_S} s still stored {MAX_AGE_S + EXPIRY_SLACK_S:.0f} s after publishing"
    )
    # seen gone at most this long after the messages were stamped: they were removed younger than that
    oldest_possible = seen_at - sent
    observe("removed_by_s", round(oldest_possible, 3))
    assert oldest_possible >= MAX_AGE_S, (
        f"max_age {MAX_AGE_S} s: the messages were removed before they were {oldest_possible:.3f} s old"
    )
    state = await stream_state(nc, stream.name)
    assert (state.first_seq, state.last_seq) == (3, 2), f"state after expiry: {state}"
    ack = await js.publish(stream.subject("c"), b"m")
    assert ack.seq == 3


@pytest.mark.rule("limits.max-age-minimum")
async def test_max_age_below_100ms_is_rejected_with_10052(nc, names):
    """A max_age of 50 ms is refused with 500/10052 'max age needs to be >= 100ms'."""
    with pytest.raises(ApiError) as rejected:
        await create_stream(nc, names.stream(), [f"{names.subject()}.>"], max_age=50_000_000)
    assert_refused_as_documented(refusal_of(rejected.value), INVALID_CONFIG, "a max_age of 50 ms")


@pytest.mark.rule("limits.max-msg-size")
@STORAGES
async def test_max_msg_size_counts_payload_and_headers(js, nc, make_stream, storage):
    """With max_msg_size 100, a 100-byte payload is stored; 101 bytes, or 90 bytes with headers, are refused."""
    stream = await make_stream(storage=storage, max_msg_size=100)
    assert (await js.publish(stream.subject("a"), b"x" * 100)).seq == 1
    too_large = (
        (b"x" * 101, None),
        (b"x" * 90, {"X-Padding": "0123456789"}),
    )
    for payload, headers in too_large:
        error = await _rejected_publish(js, stream.subject("a"), payload, headers)
        asked = f"a publish over max_msg_size (headers={headers})"
        assert_refused_as_documented(refusal_of(error), DocumentedRefusal(400, 10054), asked)
    assert (await stream_state(nc, stream.name)).messages == 1


@pytest.mark.rule("limits.max-msgs-per-subject-discard-old")
@STORAGES
async def test_max_msgs_per_subject_keeps_the_newest_per_subject(js, nc, make_stream, storage):
    """With max_msgs_per_subject 2, three publishes to `a` leave its newest two and `b` untouched."""
    stream = await make_stream(storage=storage, max_msgs_per_subject=2)
    await _publish_all(js, stream, "a", "b", "a", "a")
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.subjects) == (3, 2, _subjects(stream, {"a": 2, "b": 1}))


@pytest.mark.rule("limits.per-subject-replaces-at-max-msgs")
@STORAGES
async def test_subject_at_its_limit_replaces_its_oldest_at_max_msgs(js, nc, make_stream, storage):
    """At max_msgs with discard new, a publish to a subject at its per-subject limit replaces its oldest message."""
    stream = await make_stream(storage=storage, max_msgs=3, max_msgs_per_subject=2, discard="new")
    await _publish_all(js, stream, "a", "a", "b")
    assert (await js.publish(stream.subject("a"), b"m")).seq == 4
    error = await _rejected_publish(js, stream.subject("c"))
    assert_refused_as_documented(refusal_of(error), REJECTED_STORE, "a publish beyond max_msgs with discard new")
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.subjects) == (3, _subjects(stream, {"a": 2, "b": 1})), f"state: {state}"


@pytest.mark.rule("limits.discard-new-per-subject")
@STORAGES
async def test_discard_new_per_subject_rejects_a_full_subject(js, nc, make_stream, storage):
    """With discard_new_per_subject and a limit of 1, a second publish to `a` is refused; `b` is still stored."""
    stream = await make_stream(storage=storage, discard="new", max_msgs_per_subject=1, discard_new_per_subject=True)
    await _publish_all(js, stream, "a")
    error = await _rejected_publish(js, stream.subject("a"))
    asked = "a publish to a full subject with discard_new_per_subject"
    assert_refused_as_documented(refusal_of(error), REJECTED_STORE, asked)
    assert (await js.publish(stream.subject("b"), b"m")).seq == 2
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.subjects) == (2, _subjects(stream, {"a": 1, "b": 1})), f"state: {state}"


@pytest.mark.rule("limits.discard-new-per-subject-needs-discard-new")
async def test_discard_new_per_subject_without_discard_new_is_rejected(nc, names):
    """discard_new_per_subject with discard old is refused with 500/10052."""
    with pytest.raises(ApiError) as rejected:
        await create_stream(
            nc, names.stream(), [f"{names.subject()}.>"], max_msgs_per_subject=1, discard_new_per_subject=True
        )
    asked = "discard_new_per_subject with discard old"
    assert_refused_as_documented(refusal_of(rejected.value), INVALID_CONFIG, asked)


@pytest.mark.rule("limits.discard-new-per-subject-needs-per-subject-limit")
async def test_discard_new_per_subject_without_a_per_subject_limit_is_rejected(nc, names):
    """discard_new_per_subject without max_msgs_per_subject is refused with 500/10052."""
    with pytest.raises(ApiError) as rejected:
        await create_stream(nc, names.stream(), [f"{names.subject()}.>"], discard="new", discard_new_per_subject=True)
    asked = "discard_new_per_subject without max_msgs_per_subject"
    assert_refused_as_documented(refusal_of(rejected.value), INVALID_CONFIG, asked)


@pytest.mark.rule("limits.lowered-limit-applies")
async def test_lowering_max_msgs_on_update_trims_the_stream(js, nc, make_stream):
    """Lowering max_msgs to 2 on a stream of five leaves sequences 4 and 5."""
    stream = await make_stream()
    await _publish_all(js, stream, *"abcde")
    await api(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", {**stream.config, "max_msgs": 2})
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 4, 5), f"state: {state}"


@pytest.mark.rule("limits.per-subject-limit-set-by-update")
async def test_setting_max_msgs_per_subject_by_update_trims_every_subject(js, nc, make_stream):
    """Setting max_msgs_per_subject 1 by update on a stream created without one leaves each subject its newest."""
    stream = await make_stream()
    await _publish_all(js, stream, "a", "a", "a", "b")
    await api(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", {**stream.config, "max_msgs_per_subject": 1})
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 3, 4), (
        f"max_msgs_per_subject set to 1 by update on 3 messages of one subject and 1 of another: the docs make the "
        f"limit editable and applied at once (each subject keeps its newest, 2 messages from seq 3); the stream "
        f"holds {state.messages} from seq {state.first_seq}"
    )


@pytest.mark.rule("limits.interest-stream")
async def test_limits_apply_on_an_interest_stream(js, nc, make_stream, names):
    """An Interest stream with max_msgs 2 and an interested consumer keeps only the newest two messages."""
    stream = await make_stream(retention="interest", max_msgs=2)
    durable = names.consumer()
    await api(
        nc,
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream.name}.{durable}",
        {"stream_name": stream.name, "config": {"durable_name": durable, "ack_policy": "explicit"}},
    )
    await _publish_all(js, stream, *"abcd")
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 3, 4), f"state: {state}"


@pytest.mark.rule("limits.workqueue-stream")
async def test_limits_apply_on_a_workqueue_stream(js, nc, make_stream):
    """A WorkQueue stream keeps the newest max_msgs with discard old and refuses more with discard new."""
    old = await make_stream(retention="workqueue", max_msgs=2)
    await _publish_all(js, old, *"abcd")
    state = await stream_state(nc, old.name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 3, 4), f"discard old state: {state}"
    new = await make_stream(retention="workqueue", max_msgs=2, discard="new")
    await _publish_all(js, new, "a", "b")
    error = await _rejected_publish(js, new.subject("c"))
    asked = "a publish beyond max_msgs with discard new on a WorkQueue stream"
    assert_refused_as_documented(refusal_of(error), REJECTED_STORE, asked)
    assert (await stream_state(nc, new.name)).messages == 2
