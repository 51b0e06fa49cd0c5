"""Per-message TTL and subject delete markers (ADR-43, nats-server 2.11)."""

from __future__ import annotations

import time

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented
from jetcheck.conformance.jsapi import NS, api, eventually, get_message, publish_raw, stream_state, subject_messages
from jetcheck.versions import parse_version

pytestmark = pytest.mark.asyncio

TTL = "Nats-TTL"
MARKER_REASON = "Nats-Marker-Reason"
HOUR_NS = 3600 * NS
SECOND_S = 1.0  # ADR-43's minimum TTL, and the slack an expiry gets past its deadline
EXPIRY_TTL_S = 2  # long enough that a message removed at half of it is seen as early
POLL_S = 0.05
ADR43_ERRORS = "ADR-43 Error Codes"
ADR43_WORDS_SINCE = parse_version("2.11.2")  # the release that gave the 10052 refusals ADR-43's words


async def _ttl_stream(make_stream, **config):
    return await make_stream(allow_msg_ttl=True, **config)


def _adr43_words(words: str, release: str) -> str | None:
    """ADR-43's words for a 10052 refusal where `release` has them (from 2.11.2: nats-server#6741, #6776); None
    before, where the refusal had other words and the table fixes none for 10052 (the check records them)."""
    return words if parse_version(release) >= ADR43_WORDS_SINCE else None


async def _removed_after(nc, stream: str, seq: int, sent_at: float, within: float) -> float | None:
    """Seconds from `sent_at` until message `seq` is seen gone, or None when it is still stored after `within`."""
    seen: list[float] = []

    async def gone() -> bool:
        if await get_message(nc, stream, seq) is None:
            seen.append(time.monotonic() - sent_at)
        return bool(seen)

    await eventually(gone, timeout=within - (time.monotonic() - sent_at), interval=POLL_S)
    return seen[0] if seen else None


@pytest.mark.rule("ttl.disabled-refused")
async def test_a_ttl_on_a_stream_without_allow_msg_ttl_is_refused_with_10166(nc, make_stream):
    """A publish with Nats-TTL to a stream without allow_msg_ttl is refused with 400/10166 and not stored."""
    stream = await make_stream()
    ack = await publish_raw(nc, stream.subject("a"), b"x", {TTL: "5s"})
    assert ack.get("error") == {"code": 400, "err_code": 10166, "description": "per-message TTL is disabled"}, (
        f"ADR-43: a Nats-TTL publish to a stream with the feature disabled is rejected (10166); the server answered "
        f"{ack}"
    )
    assert (await stream_state(nc, stream.name)).messages == 0, "ADR-43: the rejected message was stored"


@pytest.mark.rule("ttl.invalid-refused")
async def test_an_invalid_or_sub_second_ttl_is_refused_with_10165(nc, make_stream, observe):
    """Nats-TTL 0, 500ms and abc are refused with 400/10165; 1, 1s and 2m are stored."""
    stream = await _ttl_stream(make_stream)
    answers = {value: await publish_raw(nc, stream.subject("a"), b"x", {TTL: value}) for value in ("0", "500ms", "abc")}
    observe("refusals", {value: ack.get("error") for value, ack in answers.items()})
    wrong = {v: ack for v, ack in answers.items() if (ack.get("error") or {}).get("err_code") != 10165}
    assert not wrong, (
        f"ADR-43: an unparsable or sub-second Nats-TTL is rejected with 10165; the server answered {wrong}"
    )
    stored = {value: await publish_raw(nc, stream.subject("a"), b"x", {TTL: value}) for value in ("1", "1s", "2m")}
    refused_valid = {v: ack for v, ack in stored.items() if "error" in ack}
    assert not refused_valid, f"ADR-43: a TTL of seconds or a Go duration of at least 1s is stored; got {refused_valid}"
    state = await stream_state(nc, stream.name)
    assert state.messages == 3, f"ADR-43: only the 3 valid TTLs are stored; the stream holds {state.messages}"


@pytest.mark.rule("ttl.expires")
async def test_a_message_is_removed_when_its_ttl_has_passed(nc, make_stream, observe):
    """With max_age 1 h, a message with Nats-TTL 2s is removed 2 s after it was stored: not before, and within 1 s."""
    stream = await _ttl_stream(make_stream, max_age=HOUR_NS)
    sent = time.monotonic()
    ack = await publish_raw(nc, stream.subject("a"), b"x", {TTL: f"{EXPIRY_TTL_S}s"})
    acked = time.monotonic()
    assert "error" not in ack, f"ADR-43: a Nats-TTL of {EXPIRY_TTL_S}s is stored; the server answered {ack}"
    latest = EXPIRY_TTL_S + SECOND_S
    removed = await _removed_after(nc, stream.name, ack["seq"], sent, latest + (acked - sent))
    observe("removed_after_s", removed)
    assert removed is not None, f"ADR-43: a message with Nats-TTL {EXPIRY_TTL_S}s was still stored {latest} s later"
    # sent before it was stored and seen gone after it was removed: `removed` is at least its age then
    assert removed >= EXPIRY_TTL_S, (
        f"ADR-43: a message with Nats-TTL {EXPIRY_TTL_S}s is removed at its deadline; it was gone {removed:.3f} s "
        "after it was sent"
    )


@pytest.mark.rule("ttl.never")
async def test_a_message_with_ttl_never_outlives_max_age(js, nc, make_stream):
    """With max_age 1 s, a message with Nats-TTL never stays after a later one without a TTL is removed."""
    stream = await _ttl_stream(make_stream, max_age=1 * NS)
    kept = await publish_raw(nc, stream.subject("never"), b"kept", {TTL: "never"})
    assert "error" not in kept, f"ADR-43: Nats-TTL never is stored; the server answered {kept}"
    aged = await js.publish(stream.subject("aged"), b"aged")

    async def aged_out() -> bool:
        return await get_message(nc, stream.name, aged.seq) is None

    assert await eventually(aged_out, timeout=1 + 3 * SECOND_S), "max_age 1 s never removed a message without TTL"
    assert await get_message(nc, stream.name, kept["seq"]) is not None, (
        "ADR-43: 'a never message is not removed by the stream's MaxAge setting'; it was removed with the one stored "
        "after it"
    )


@pytest.mark.rule("ttl.cannot-disable")
async def test_allow_msg_ttl_cannot_be_turned_off(nc, make_stream, expected_release, observe):
    """An update turning allow_msg_ttl off is refused with 500/10052 (in ADR-43's words from 2.11.2)."""
    stream = await _ttl_stream(make_stream)
    body = {**stream.config, "allow_msg_ttl": False}
    rejection = await refused(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", body, "turning allow_msg_ttl off")
    words = _adr43_words("message TTL status can not be disabled", expected_release)
    documented = DocumentedRefusal(500, 10052, words, words_from=ADR43_ERRORS if words else None)
    assert_refused_as_documented(rejection, documented, "turning allow_msg_ttl off", observe)
    assert (await api(nc, f"$JS.API.STREAM.INFO.{stream.name}"))["config"].get("allow_msg_ttl") is True


@pytest.mark.rule("ttl.marker-ttl-minimum")
async def test_a_marker_ttl_below_one_second_is_refused(nc, names, expected_release, observe):
    """A stream with subject_delete_marker_ttl 500 ms is refused with 500/10052 (in ADR-43's words from 2.11.2)."""
    name = names.stream()
    body = {"name": name, "subjects": [f"{names.subject()}.>"], "allow_msg_ttl": True,
            "subject_delete_marker_ttl": NS // 2}  # fmt: skip
    rejection = await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, "a subject_delete_marker_ttl of 500 ms")
    words = _adr43_words("subject delete marker TTL must be at least 1 second", expected_release)
    documented = DocumentedRefusal(500, 10052, words, words_from=ADR43_ERRORS if words else None)
    assert_refused_as_documented(rejection, documented, "a subject_delete_marker_ttl of 500 ms", observe)


@pytest.mark.rule("ttl.marker-sets-rollup")
async def test_a_marker_ttl_turns_on_rollups(make_stream):
    """A stream created with subject_delete_marker_ttl and no allow_rollup_hdrs gets allow_rollup_hdrs."""
    stream = await _ttl_stream(make_stream, subject_delete_marker_ttl=1 * NS)
    assert stream.config.get("allow_rollup_hdrs") is True, (
        f"ADR-43: 'AllowRollup must be true, stream update and create should set this'; the stream has "
        f"allow_rollup_hdrs {stream.config.get('allow_rollup_hdrs')}"
    )


@pytest.mark.rule("ttl.max-age-marker")
async def test_max_age_leaves_a_marker_that_expires_in_its_turn(nc, make_stream, observe):
    """When max_age 1 s removes a subject's only message, a MaxAge marker with Nats-TTL 1s takes its place and then
    goes too."""
    stream = await _ttl_stream(make_stream, max_age=1 * NS, subject_delete_marker_ttl=1 * NS)
    subject = stream.subject("k")
    first = await publish_raw(nc, subject, b"v")
    markers: list = []

    async def marked() -> bool:
        markers[:] = [m for m in await subject_messages(nc, stream.name, subject) if m.seq != first["seq"]]
        return bool(markers)

    assert await eventually(marked, timeout=1 + 3 * SECOND_S), (
        "ADR-43: when MaxAge removes the last message of a subject the server places a marker; none came on it"
    )
    marker = markers[0]
    observe("marker_headers", marker.headers)
    got = (marker.headers.get(MARKER_REASON), marker.headers.get(TTL))
    assert got == ("MaxAge", "1s"), (
        f"ADR-43: the marker carries Nats-Marker-Reason: MaxAge and Nats-TTL: 1s (the marker TTL as a Go duration); "
        f"it carries {marker.headers}"
    )

    async def marker_gone() -> bool:
        return await get_message(nc, stream.name, marker.seq) is None

    assert await eventually(marker_gone, timeout=1 + 3 * SECOND_S), "ADR-43: the marker did not expire after its TTL"


@pytest.mark.rule("ttl.clamped-to-marker-ttl")
async def test_a_ttl_below_the_marker_ttl_is_raised_to_it(nc, make_stream):
    """With subject_delete_marker_ttl 5 s, a message with Nats-TTL 1s is stored with Nats-TTL 5."""
    stream = await _ttl_stream(make_stream, subject_delete_marker_ttl=5 * NS)
    ack = await publish_raw(nc, stream.subject("k"), b"v", {TTL: "1s"})
    assert "error" not in ack, f"ADR-43: a Nats-TTL below the marker TTL is not rejected; the server answered {ack}"
    stored = await subject_messages(nc, stream.name, stream.subject("k"))
    headers = stored[0].headers if stored else {}
    assert headers.get(TTL) == "5", (
        f"ADR-43: the effective TTL is raised to the marker TTL and the stored Nats-TTL rewritten to it in whole "
        f"seconds ('5'); the stored message carries {headers}"
    )
