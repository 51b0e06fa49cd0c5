"""Message deduplication by Nats-Msg-Id and the duplicate window."""

from __future__ import annotations

import asyncio
import time

import pytest

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import NS, ApiError, create_stream, purge, stream_state

pytestmark = pytest.mark.asyncio

DEFAULT_WINDOW_NS = 120 * NS
SHORT_WINDOW_S = 0.5


@pytest.mark.rule("dedup.duplicate-acked")
async def test_repeated_msg_id_is_acked_as_duplicate_of_the_original(js, nc, make_stream):
    """A repeated Nats-Msg-Id inside the window is acked duplicate with the original sequence, not stored."""
    stream = await make_stream()
    first = await js.publish(stream.subject("a"), b"x", headers={"Nats-Msg-Id": "id-1"})
    await js.publish(stream.subject("a"), b"y")
    again = await js.publish(stream.subject("a"), b"x", headers={"Nats-Msg-Id": "id-1"})
    assert again.duplicate is True, f"repeated id not flagged duplicate: {again}"
    assert again.seq == first.seq == 1, f"duplicate must carry the original sequence {first.seq}, got {again.seq}"
    assert again.stream == stream.name
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.last_seq) == (2, 2), f"the duplicate was stored: {state}"


@pytest.mark.rule("dedup.by-id-not-payload")
async def test_dedup_is_by_id_not_payload(js, nc, make_stream):
    """The same id with another payload is a duplicate; the same payload with another id or none is stored."""
    stream = await make_stream()
    await js.publish(stream.subject("a"), b"payload", headers={"Nats-Msg-Id": "id-1"})
    other_payload = await js.publish(stream.subject("a"), b"different", headers={"Nats-Msg-Id": "id-1"})
    other_id = await js.publish(stream.subject("a"), b"payload", headers={"Nats-Msg-Id": "id-2"})
    no_id = await js.publish(stream.subject("a"), b"payload")
    assert other_payload.duplicate is True and other_payload.seq == 1
    assert not other_id.duplicate and other_id.seq == 2
    assert not no_id.duplicate and no_id.seq == 3
    assert (await stream_state(nc, stream.name)).messages == 3


@pytest.mark.rule("dedup.default-window")
async def test_default_duplicate_window_is_two_minutes(make_stream):
    """A stream created without duplicate_window gets a 2-minute window."""
    stream = await make_stream()
    assert stream.config["duplicate_window"] == DEFAULT_WINDOW_NS


@pytest.mark.rule("dedup.window-follows-max-age")
async def test_duplicate_window_follows_a_max_age_below_two_minutes(make_stream):
    """Without duplicate_window, a max_age below 2 minutes becomes the window."""
    max_age = 30 * NS
    stream = await make_stream(max_age=max_age)
    assert stream.config["duplicate_window"] == max_age


@pytest.mark.rule("dedup.window-bounds")
@pytest.mark.parametrize(
    "config",
    [{"max_age": 1 * NS, "duplicate_window": 2 * NS}, {"duplicate_window": 50_000_000}],
    ids=["above-max-age", "below-100ms"],
)
async def test_duplicate_window_out_of_bounds_is_rejected_with_10052(nc, names, config, observe):
    """A duplicate window above max_age or below 100 ms is rejected with 500/10052."""
    name = names.stream()
    with pytest.raises(ApiError) as rejected:
        await create_stream(nc, name, [f"{names.subject()}.>"], **config)
    assert_refused_as_documented(
        refusal_of(rejected.value), DocumentedRefusal(500, 10052), f"a stream with {config}", observe
    )


async def _stored_again(js, subject: str, msg_id: str, deadline_s: float, every_s: float) -> tuple[object, float]:
    """Republish `msg_id` every `every_s` until it is stored anew; (PubAck, seconds waited) or (None, waited)."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        ack = await js.publish(subject, b"x", headers={"Nats-Msg-Id": msg_id})
        if not ack.duplicate:
            return ack, time.monotonic() - started
        await asyncio.sleep(every_s)
    return None, time.monotonic() - started


@pytest.mark.rule("dedup.window-expiry")
async def test_msg_id_is_a_duplicate_for_the_window_and_stored_again_after_it(js, make_stream, observe):
    """A Nats-Msg-Id is a duplicate until the duplicate window has passed, and is stored as a new message after."""
    stream = await make_stream(duplicate_window=int(SHORT_WINDOW_S * NS))
    subject = stream.subject("a")
    started = time.monotonic()  # before the store: the id cannot have been tracked longer than since then
    first = await js.publish(subject, b"x", headers={"Nats-Msg-Id": "expiring"})
    inside = await js.publish(subject, b"x", headers={"Nats-Msg-Id": "expiring"})
    assert inside.duplicate, "inside the window the id must still be a duplicate"
    # a look halfway through the window, then looks more slowly than the window, so that a server that (wrongly)
    # extends it on a duplicate still expires it (dedup.window-not-extended is that rule)
    await asyncio.sleep(SHORT_WINDOW_S / 2)
    again, _ = await _stored_again(
        js, subject, "expiring", deadline_s=10 * SHORT_WINDOW_S, every_s=SHORT_WINDOW_S * 1.2
    )
    tracked_at_most = time.monotonic() - started
    observe("stored_again_after_s", round(tracked_at_most, 3))
    assert again is not None, f"id still a duplicate {tracked_at_most:.1f}s after a {SHORT_WINDOW_S}s window"
    assert tracked_at_most >= SHORT_WINDOW_S, (
        f"id stored again at most {tracked_at_most:.3f}s after it was first stored, inside its {SHORT_WINDOW_S}s "
        "duplicate window"
    )
    assert again.seq == first.seq + 1


@pytest.mark.rule("dedup.window-not-extended")
async def test_duplicates_do_not_extend_the_window(js, make_stream, observe):
    """However often an id is repeated, it is stored again once the window from its first store has passed."""
    window = 1.0
    stream = await make_stream(duplicate_window=int(window * NS))
    subject = stream.subject("a")
    await js.publish(subject, b"x", headers={"Nats-Msg-Id": "hot"})
    stored_at = time.monotonic()
    # Repeat far faster than the window: a server that restarted the window on each duplicate never expires it.
    again, _ = await _stored_again(js, subject, "hot", deadline_s=4 * window, every_s=window / 10)
    waited = time.monotonic() - stored_at
    observe("stored_again_after_s", round(waited, 3))
    assert again is not None, f"id repeated every {window / 10}s was still a duplicate {waited:.1f}s later"
    assert waited >= window * 0.9, f"id forgotten after {waited:.2f}s, inside its {window}s window"


@pytest.mark.rule("dedup.ids-survive-purge")
async def test_msg_ids_survive_a_purge(js, nc, make_stream):
    """After a purge, an id stored before it is still acknowledged as a duplicate."""
    stream = await make_stream()
    first = await js.publish(stream.subject("a"), b"x", headers={"Nats-Msg-Id": "kept"})
    await purge(nc, stream.name)
    again = await js.publish(stream.subject("a"), b"x", headers={"Nats-Msg-Id": "kept"})
    assert again.duplicate is True, "the purge made the server forget the id"
    assert again.seq == first.seq
    assert (await stream_state(nc, stream.name)).messages == 0
