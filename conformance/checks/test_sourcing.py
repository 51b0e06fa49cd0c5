"""Mirrors and sources (ADR-59): copies of other streams, kept by the server."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import ApiError, api, eventually, publish_raw, stream_state, subject_messages
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

ADR59 = "ADR-59"
CATCH_UP_S = 5.0
SOURCE = "Nats-Stream-Source"
NO_MESSAGE = 10037


async def _caught_up(nc, name: str, count: int, what: str) -> dict:
    """Stream `name`'s info once it holds `count` messages; fails, while the server answers, when it does not."""

    async def holds() -> bool:
        return (await stream_state(nc, name)).messages >= count

    if not await eventually(holds, timeout=CATCH_UP_S):
        await answering(nc)
        held = (await stream_state(nc, name)).messages
        pytest.fail(f"{ADR59}: {what} replicates its upstream; it holds {held} of {count} after {CATCH_UP_S} s")
    return await api(nc, f"$JS.API.STREAM.INFO.{name}")


async def _upstream(nc, make_stream, count: int, tag: str):
    stream = await make_stream()
    for n in range(count):
        await publish_raw(nc, stream.subject(tag), f"{tag}{n}".encode())
    return stream


async def _message(nc, name: str, seq: int) -> tuple | None:
    """(subject, data, time) of message `seq` of stream `name`, None when it holds none there."""
    try:
        message = (await api(nc, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq}))["message"]
    except ApiError as error:
        if error.err_code == NO_MESSAGE:
            return None
        raise
    return message["subject"], message.get("data"), message["time"]


@pytest.mark.rule("sourcing.mirror-copy")
async def test_a_mirror_keeps_sequences_subjects_and_timestamps(nc, make_stream, names):
    """A mirror of a stream of 3 messages (the 2nd deleted) holds 1 and 3 as the upstream does, with lag 0."""
    upstream = await _upstream(nc, make_stream, 3, "a")
    await api(nc, f"$JS.API.STREAM.MSG.DELETE.{upstream.name}", {"seq": 2})
    mirror = await make_stream(mirror={"name": upstream.name})
    info = await _caught_up(nc, mirror.name, 2, "a mirror")
    copies = {seq: (await _message(nc, upstream.name, seq), await _message(nc, mirror.name, seq)) for seq in (1, 2, 3)}
    differ = {seq: pair for seq, pair in copies.items() if pair[0] != pair[1]}
    assert not differ, (
        f"{ADR59}: a mirror's messages have the upstream's sequence numbers and timestamps; (upstream, mirror) "
        f"differ at {differ}"
    )
    lag = (info.get("mirror") or {}).get("lag")
    assert lag == 0, f"{ADR59}: a caught-up mirror's info shows lag 0; it shows {info.get('mirror')}"


@pytest.mark.rule("sourcing.mirror-restrictions")
async def test_a_mirror_with_subjects_or_sources_is_refused(nc, make_stream, names):
    """A mirror with subjects is refused with 400/10034, one with sources with 400/10031."""
    upstream, other = await make_stream(), await make_stream()
    cases = {
        "a mirror with subjects": ({"subjects": [f"{names.subject()}.>"]}, (400, 10034)),
        "a mirror with sources": ({"sources": [{"name": other.name}]}, (400, 10031)),
    }
    got = {}
    for asked, (extra, _) in cases.items():
        name = names.stream()
        body = {"name": name, "mirror": {"name": upstream.name}, "storage": "file", **extra}
        got[asked] = (await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, asked))[:2]
    wrong = {asked: code for asked, code in got.items() if code != cases[asked][1]}
    assert not wrong, f"{ADR59}: refused with 10034 (subjects) and 10031 (sources); got {wrong}"


@pytest.mark.rule("sourcing.sources-aggregate")
async def test_a_stream_of_sources_holds_each_in_its_order(nc, make_stream):
    """A stream sourcing 3 and 2 messages holds all 5, each source's in order, with each source's lag 0."""
    first, second = await _upstream(nc, make_stream, 3, "a"), await _upstream(nc, make_stream, 2, "b")
    aggregate = await make_stream(sources=[{"name": first.name}, {"name": second.name}])
    info = await _caught_up(nc, aggregate.name, 5, "a stream of sources")
    held = [m.payload for m in await subject_messages(nc, aggregate.name, ">")]
    orders = ([p for p in held if p.startswith(b"a")], [p for p in held if p.startswith(b"b")])
    assert orders == ([b"a0", b"a1", b"a2"], [b"b0", b"b1"]), (
        f"{ADR59}: each source's messages keep their relative ordering; the stream holds {held}"
    )
    lags = {s.get("name"): s.get("lag") for s in info.get("sources") or []}
    assert lags == {first.name: 0, second.name: 0}, f"{ADR59}: caught-up sources show lag 0; info shows {lags}"


async def _source_header(nc, make_stream) -> tuple[object, list[str]]:
    """An upstream of 2 messages on `<root>.a`, and the Nats-Stream-Source tokens of its 2nd message, sourced."""
    upstream = await _upstream(nc, make_stream, 2, "a")
    aggregate = await make_stream(sources=[{"name": upstream.name}])
    await _caught_up(nc, aggregate.name, 2, "a stream of sources")
    return upstream, ((await subject_messages(nc, aggregate.name, ">"))[-1].headers.get(SOURCE) or "").split()


@pytest.mark.rule("sourcing.source-header")
async def test_a_sourced_message_names_its_origin(nc, make_stream):
    """Sourced message 2 of upstream U carries Nats-Stream-Source `U 2 > > ...`."""
    upstream, tokens = await _source_header(nc, make_stream)
    wanted = [upstream.name, "2", ">", ">"]
    assert tokens[:4] == wanted, (
        f"{ADR59}: Nats-Stream-Source begins '<stream> <sequence> <filter> <dest>' ({' '.join(wanted)}); the sourced "
        f"message carries {' '.join(tokens)!r}"
    )


@pytest.mark.rule("sourcing.source-header-subject")
async def test_a_sourced_messages_origin_names_its_subject(nc, make_stream):
    """Sourced message 2 of upstream U on `<root>.a` carries Nats-Stream-Source `U 2 > > <root>.a`."""
    upstream, tokens = await _source_header(nc, make_stream)
    assert tokens[4:5] == [upstream.subject("a")], (
        f"{ADR59}: Nats-Stream-Source's fifth field is the original subject ({upstream.subject('a')}); the sourced "
        f"message carries {' '.join(tokens)!r}"
    )


@pytest.mark.rule("sourcing.source-transform")
async def test_a_source_transform_rewrites_the_stored_subject(nc, make_stream, names):
    """A source transforming `<root>.>` into `<copy>.>` stores `<root>.a`'s messages on `<copy>.a`."""
    upstream = await _upstream(nc, make_stream, 2, "a")
    copy = names.subject()
    transform = [{"src": f"{upstream.root}.>", "dest": f"{copy}.>"}]
    aggregate = await make_stream(sources=[{"name": upstream.name, "subject_transforms": transform}])
    await _caught_up(nc, aggregate.name, 2, "a stream of sources")
    held = [m.payload for m in await subject_messages(nc, aggregate.name, f"{copy}.a")]
    assert held == [b"a0", b"a1"], (
        f"{ADR59}: a source's subject_transforms rewrite the stored subject ({upstream.subject('a')} to {copy}.a); "
        f"{copy}.a holds {held}"
    )
