"""Distributed counters (ADR-49, nats-server 2.12)."""

from __future__ import annotations

import json

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_in
from jetcheck.conformance.jsapi import eventually, publish_raw, stream_state, subject_messages
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

INCR = "Nats-Incr"
COUNTER_SOURCES = "Nats-Counter-Sources"
ADR49 = "ADR-49"
CATCH_UP_S = 5.0
INVALID = ("abc", "1.5")  # Nats-Incr values that are no integer
INVALID_INCREMENT = DocumentedRefusal(400, 10171)
MISSING_INCREMENT = DocumentedRefusal(400, 10169)
FORBIDDEN = {
    "Nats-Rollup": "sub",
    "Nats-Expected-Last-Sequence": "0",
    "Nats-Expected-Last-Subject-Sequence": "0",
    "Nats-Expected-Stream": "",  # the stream's own name, set below
    "Nats-Expected-Last-Msg-Id": "none",
}


async def _counter(make_stream, **config):
    return await make_stream(allow_msg_counter=True, **config)


@pytest.mark.rule("counters.increment")
async def test_increments_add_up_per_subject(nc, make_stream):
    """+5, -2 and 0 on `a` are acked 5, 3, 3 and `a` stores {"val": "3"} with its Nats-Incr; +7 on `b` is 7."""
    stream = await _counter(make_stream)
    acks = [await publish_raw(nc, stream.subject("a"), b"", {INCR: delta}) for delta in ("+5", "-2", "0")]
    other = await publish_raw(nc, stream.subject("b"), b"", {INCR: "+7"})
    got = [ack.get("val", ack.get("error")) for ack in (*acks, other)]
    assert got == ["5", "3", "3", "7"], (
        f"{ADR49}: each increment's PubAck carries the subject's new total as val (5, 3, 3; b: 7); got {got}"
    )
    last = (await subject_messages(nc, stream.name, stream.subject("a")))[-1]
    assert (json.loads(last.payload), last.headers.get(INCR)) == ({"val": "3"}, "0"), (
        f'{ADR49}: the stored body is the total as {{"val": "3"}} and the Nats-Incr header is preserved; the last '
        f"message holds {last.payload!r} with headers {last.headers}"
    )


@pytest.mark.rule("counters.big-values")
async def test_totals_beyond_2_to_the_64_stay_exact(nc, make_stream):
    """Twice 2^64 - 1 is 36893488147419103230, exactly."""
    stream = await _counter(make_stream)
    top = str(2**64 - 1)
    acks = [await publish_raw(nc, stream.subject("a"), b"", {INCR: f"+{top}"}) for _ in range(2)]
    got = [ack.get("val", ack.get("error")) for ack in acks]
    assert got == [top, str(2 * (2**64 - 1))], f"{ADR49}: counters are big integers, exact beyond 2^64; got {got}"


@pytest.mark.rule("counters.invalid-refused")
async def test_an_increment_that_is_no_integer_or_none_is_rejected(nc, make_stream, observe):
    """Nats-Incr abc and 1.5 are rejected with 400/10171, a publish without Nats-Incr with 400/10169, and nothing is
    stored."""
    stream = await _counter(make_stream)
    acks = {f"Nats-Incr {value}": await publish_raw(nc, stream.subject("a"), b"", {INCR: value}) for value in INVALID}
    acks["no Nats-Incr"] = await publish_raw(nc, stream.subject("a"), b"", None)
    observe("rejections", {sent: ack.get("error") for sent, ack in acks.items()})
    stored = {sent: ack for sent, ack in acks.items() if "error" not in ack}
    assert not stored, f"{ADR49}: an increment that fails to parse, or none, is rejected with an error; acked {stored}"
    for sent, ack in acks.items():
        documented = MISSING_INCREMENT if sent == "no Nats-Incr" else INVALID_INCREMENT
        assert_refused_as_documented(refusal_in(ack), documented, f"{ADR49}: a counter publish with {sent}")
    assert (await stream_state(nc, stream.name)).messages == 0, f"{ADR49}: a rejected increment was stored"


@pytest.mark.rule("counters.disabled-refused")
async def test_an_increment_to_a_stream_without_counters_is_rejected(nc, make_stream, observe):
    """Nats-Incr +1 to a plain stream is rejected and not stored."""
    stream = await make_stream()
    ack = await publish_raw(nc, stream.subject("a"), b"", {INCR: "+1"})
    observe("rejection", ack.get("error"))
    assert "error" in ack, f"{ADR49}: a Nats-Incr publish to a stream without counters is rejected; it was acked {ack}"
    assert (await stream_state(nc, stream.name)).messages == 0, f"{ADR49}: the rejected increment was stored"


@pytest.mark.rule("counters.forbidden-headers")
async def test_an_increment_with_rollup_or_expectations_is_rejected(nc, make_stream, observe):
    """+1 with each of Nats-Rollup and the four Nats-Expected-* headers is rejected."""
    stream = await _counter(make_stream)
    acks = {}
    for header, value in FORBIDDEN.items():
        headers = {INCR: "+1", header: value or stream.name}
        acks[header] = await publish_raw(nc, stream.subject("a"), b"", headers)
    observe("rejections", {header: ack.get("error") for header, ack in acks.items()})
    stored = {header: ack for header, ack in acks.items() if "error" not in ack}
    assert not stored, f"{ADR49}: a counter message with {', '.join(FORBIDDEN)} must be rejected; acked: {stored}"


@pytest.mark.rule("counters.config")
async def test_counters_refuse_other_retentions_discard_new_ttls_and_updates(nc, make_stream, names):
    """allow_msg_counter with interest retention, discard new or allow_msg_ttl, and an update of it, are refused."""
    rejections = {}
    for what, extra in (("interest retention", {"retention": "interest"}), ("discard new", {"discard": "new"}),
                        ("allow_msg_ttl", {"allow_msg_ttl": True})):  # fmt: skip
        name = names.stream()
        body = {"name": name, "subjects": [f"{names.subject()}.>"], "allow_msg_counter": True, **extra}
        rejections[what] = await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, f"a counter stream with {what}")
    plain, counter = await make_stream(), await _counter(make_stream)
    for what, stream, value in (("turning counters on", plain, True), ("turning counters off", counter, False)):
        body = {**stream.config, "allow_msg_counter": value}
        rejections[what] = await refused(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", body, f"an update {what}")
    wrong = {what: r for what, r in rejections.items() if r[:2] != (500, 10052)}
    assert not wrong, f"{ADR49}: refused as an invalid stream config (500/10052); got {wrong}"


@pytest.mark.rule("counters.api-level")
async def test_a_counter_stream_requires_api_level_2(make_stream):
    """A counter stream's _nats.req.level is 2."""
    stream = await _counter(make_stream)
    level = (stream.config.get("metadata") or {}).get("_nats.req.level")
    assert level == "2", f"{ADR49}: a counter stream requires API level 2; its _nats.req.level is {level}"


@pytest.mark.rule("counters.sourced-aggregate")
async def test_a_counter_stream_of_sources_holds_their_sum(nc, make_stream, names):
    """Sourcing A (+2 +3, only its last message kept: val 5, Nats-Incr +3) and B (+7) onto one subject gives 12,
    with Nats-Counter-Sources {A: {a subject: "5"}, B: {b subject: "7"}}."""
    first = await _counter(make_stream, max_msgs_per_subject=1)
    second = await _counter(make_stream)
    for stream, deltas in ((first, ("+2", "+3")), (second, ("+7",))):
        for delta in deltas:
            await publish_raw(nc, stream.subject("hits"), b"", {INCR: delta})
    root = names.subject()
    sources = [
        {"name": stream.name, "subject_transforms": [{"src": f"{stream.root}.>", "dest": f"{root}.>"}]}
        for stream in (first, second)
    ]
    aggregate = await _counter(make_stream, sources=sources)
    subject = f"{root}.hits"
    held: list = []

    async def summed() -> bool:
        held[:] = await subject_messages(nc, aggregate.name, subject)
        return bool(held) and json.loads(held[-1].payload) == {"val": "12"}

    if not await eventually(summed, timeout=CATCH_UP_S):
        await answering(nc)
        last = (held[-1].payload, held[-1].headers) if held else "nothing"
        pytest.fail(
            f"{ADR49}: a counter stream sourcing counters holds the sum of their values (5 + 7 = 12, each source's "
            f"Nats-Incr rewritten to the delta from its last seen value); after {CATCH_UP_S} s {subject} holds {last}"
        )
    recorded = held[-1].headers.get(COUNTER_SOURCES)
    expected = {first.name: {first.subject("hits"): "5"}, second.name: {second.subject("hits"): "7"}}
    assert recorded is not None and json.loads(recorded) == expected, (
        f"{ADR49}: a counter stream sourcing counters records each source's last value by stream and original subject "
        f"in Nats-Counter-Sources, {expected}; "
        f"the aggregate's last message has {COUNTER_SOURCES}: {recorded}"
    )


@pytest.mark.rule("counters.mirror-refused")
async def test_a_mirror_with_counters_is_refused(nc, make_stream, names):
    """A mirror with allow_msg_counter is refused with 400/10173."""
    upstream = await _counter(make_stream)
    name = names.stream()
    body = {"name": name, "mirror": {"name": upstream.name}, "allow_msg_counter": True}
    got = await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, "a mirror with allow_msg_counter")
    assert got[:2] == (400, 10173), f"{ADR49}: a mirror with allow_msg_counter is refused (400/10173); got {got}"


@pytest.mark.rule("counters.sourced-verbatim")
async def test_a_plain_source_and_a_mirror_store_counters_verbatim(nc, make_stream):
    """A counter stream holding only {"val": "5"} with Nats-Incr +3 is copied as that by a plain stream sourcing it
    and by its mirror, with no Nats-Counter-Sources."""
    upstream = await _counter(make_stream, max_msgs_per_subject=1)
    for delta in ("+2", "+3"):
        await publish_raw(nc, upstream.subject("hits"), b"", {INCR: delta})
    copies = {
        "a plain stream sourcing it": await make_stream(sources=[{"name": upstream.name}]),
        "its mirror": await make_stream(mirror={"name": upstream.name}),
    }
    expected = ({"val": "5"}, "+3", None)
    held: dict = {}

    async def copied() -> bool:
        for what, copy in copies.items():
            found = await subject_messages(nc, copy.name, upstream.subject("hits"))
            held[what] = [(json.loads(m.payload), m.headers.get(INCR), m.headers.get(COUNTER_SOURCES)) for m in found]
        return all(got == [expected] for got in held.values())

    if not await eventually(copied, timeout=CATCH_UP_S):
        await answering(nc)
        wrong = {what: got for what, got in held.items() if got != [expected]}
        pytest.fail(
            f"{ADR49}: a counter message received over a source without counters, or a mirror, is stored verbatim "
            f"(body, Nats-Incr, Nats-Counter-Sources) {expected}; after {CATCH_UP_S} s they hold {wrong}"
        )
