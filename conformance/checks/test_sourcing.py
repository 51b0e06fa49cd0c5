"""Mirrors and sources (ADR-59): copies of other streams, kept by the server; subject transforms in streams,
mirrors and sources (ADR-36); reliable sourcing of WorkQueue and Interest streams through durable flow-control
consumers (ADR-60)."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import (
    ApiError,
    api,
    eventually,
    held_within,
    publish_raw,
    stored_messages,
    stream_state,
    subject_messages,
)

pytestmark = pytest.mark.asyncio

ADR59 = "ADR-59"
CATCH_UP_S = 5.0
SOURCE = "Nats-Stream-Source"
NO_MESSAGE = 10037


async def _caught_up(nc, name: str, count: int, what: str) -> dict:
    """Stream `name`'s info once it holds `count` messages; fails, while the server answers, when it does not."""

    async def holds() -> bool:
        return (await stream_state(nc, name)).messages >= count

    if not await held_within(holds, CATCH_UP_S, nc):
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


# --- subject transforms in streams, mirrors and sources (ADR-36, nats-server 2.10) --------------------------------

ADR36 = "ADR-36"


async def _held(nc, name: str) -> list[tuple[str, bytes]]:
    """(subject, payload) of every message stream `name` holds, in order."""
    return [(m.subject, m.payload) for m in await stored_messages(nc, name)]


@pytest.mark.rule("sourcing.stream-transform")
async def test_a_stream_transform_rewrites_matching_subjects_as_they_are_stored(nc, make_stream, names):
    """A stream transforming `<root>.in.*.*` into `<root>.out.{{wildcard(2)}}.{{wildcard(1)}}` stores `<root>.in.a.b`
    on `<root>.out.b.a` and `<root>.other` on its own subject."""
    root = names.subject()
    transform = {"src": f"{root}.in.*.*", "dest": f"{root}.out.{{{{wildcard(2)}}}}.{{{{wildcard(1)}}}}"}
    stream = await make_stream(root, subject_transform=transform)
    await publish_raw(nc, f"{root}.in.a.b", b"moved")
    await publish_raw(nc, f"{root}.other", b"kept")
    held = await _held(nc, stream.name)
    wanted = [(f"{root}.out.b.a", b"moved"), (f"{root}.other", b"kept")]
    assert held == wanted, (
        f"{ADR36}: a stream's subject_transform rewrites a matching subject as it is stored and does not filter the "
        f"others; wanted {wanted}, the stream holds {held}"
    )


@pytest.mark.rule("sourcing.mirror-transform")
async def test_a_mirror_with_transforms_holds_only_what_they_match(nc, make_stream):
    """A mirror transforming `<root>.foo` into `<root>.foo-t`, with `<root>.bar` untransformed, holds those two of
    the upstream's `foo`, `bar`, `baz`."""
    upstream = await make_stream()
    for tag in ("foo", "bar", "baz"):
        await publish_raw(nc, upstream.subject(tag), tag.encode())
    transforms = [
        {"src": upstream.subject("foo"), "dest": upstream.subject("foo-t")},
        {"src": upstream.subject("bar"), "dest": ""},
    ]
    mirror = await make_stream(mirror={"name": upstream.name, "subject_transforms": transforms})
    await _caught_up(nc, mirror.name, 2, "a mirror with subject_transforms")
    held = await _held(nc, mirror.name)
    wanted = [(upstream.subject("foo-t"), b"foo"), (upstream.subject("bar"), b"bar")]
    assert held == wanted, (
        f"{ADR36}: a mirror's subject_transforms filter and rewrite (an empty dest only filters); wanted {wanted}, the "
        f"mirror holds {held}"
    )


@pytest.mark.rule("sourcing.source-same-stream-twice")
async def test_a_stream_can_source_one_stream_twice(nc, make_stream):
    """A stream sourcing U once for `<root>.foo` and once for `<root>.bar` holds both of U's messages."""
    upstream = await make_stream()
    for tag in ("foo", "bar", "baz"):
        await publish_raw(nc, upstream.subject(tag), tag.encode())
    sources = [{"name": upstream.name, "filter_subject": upstream.subject(tag)} for tag in ("foo", "bar")]
    aggregate = await make_stream(sources=sources)
    await _caught_up(nc, aggregate.name, 2, "a stream sourcing one stream twice")
    held = sorted(await _held(nc, aggregate.name))
    wanted = sorted([(upstream.subject("foo"), b"foo"), (upstream.subject("bar"), b"bar")])
    assert held == wanted, (
        f"{ADR36}: a stream may source the same stream more than once, each with its own filter; wanted {wanted}, "
        f"it holds {held}"
    )


@pytest.mark.rule("sourcing.transform-refusals")
async def test_overlapping_or_doubled_filters_are_refused(nc, make_stream, names):
    """Overlapping subject_transforms are refused (10147 source, 10152 mirror), and so are subject_transforms beside
    a filter_subject (10144 source, 10150 mirror)."""
    upstream = await make_stream()
    overlapping = [{"src": upstream.subject("*"), "dest": ""}, {"src": upstream.subject("a"), "dest": ""}]
    one = [{"src": upstream.subject("a"), "dest": ""}]
    doubled = {"filter_subject": upstream.subject("b")}
    cases = {
        "a source with overlapping transforms": ("sources", overlapping, {}, 10147),
        "a mirror with overlapping transforms": ("mirror", overlapping, {}, 10152),
        "a source with transforms and a filter_subject": ("sources", one, doubled, 10144),
        "a mirror with transforms and a filter_subject": ("mirror", one, doubled, 10150),
    }
    got = {}
    for asked, (kind, transforms, extra, _) in cases.items():
        name = names.stream()
        origin = {"name": upstream.name, "subject_transforms": transforms, **extra}
        body = {"name": name, "storage": "file", kind: [origin] if kind == "sources" else origin}
        got[asked] = (await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, asked))[:2]
    wrong = {asked: code for asked, code in got.items() if code != (400, cases[asked][3])}
    assert not wrong, (
        f"{ADR36}: filters of one source or mirror cannot overlap (10147, 10152) and subject_transforms exclude a "
        f"filter_subject (10144, 10150); got {wrong}"
    )


# --- reliable sourcing of WorkQueue and Interest streams (ADR-60, nats-server 2.14) -------------------------------

ADR60 = "ADR-60"
FLOW_CONTROL = "flow_control"


async def _consumers(nc, stream: str, prefix: str) -> list[dict]:
    """The consumer infos of `stream` whose name begins with `prefix`."""
    listed = (await api(nc, f"$JS.API.CONSUMER.LIST.{stream}")).get("consumers") or []
    return [info for info in listed if info["name"].startswith(prefix)]


async def _sourcing_consumer(nc, stream: str, prefix: str, documented: str) -> dict:
    """The consumer named `prefix`<suffix> the server made on `stream`; fails, saying `documented`, when none came."""
    found: list[dict] = []

    async def appeared() -> bool:
        found[:] = await _consumers(nc, stream, prefix)
        return bool(found)

    if not await held_within(appeared, CATCH_UP_S, nc):
        listed = (await api(nc, f"$JS.API.CONSUMER.NAMES.{stream}")).get("consumers") or []
        pytest.fail(f"{ADR60}: {documented}; none appeared within {CATCH_UP_S} s (its consumers: {listed})")
    return found[0]


def _durable_flow_control(info: dict, prefix: str) -> dict:
    config = info["config"]
    metadata = config.get("metadata") or {}
    key = _metadata_key(prefix)
    return {
        "durable": config.get("durable_name") == info["name"],
        "ack_policy": config.get("ack_policy"),
        "max_deliver": config.get("max_deliver"),
        f"{key}.stream": metadata.get(f"{key}.stream"),
        f"{key}.acc": bool(metadata.get(f"{key}.acc")),
    }


def _metadata_key(prefix: str) -> str:
    """The metadata key stem naming the sourcing stream on a JS_SRC_ (source) or JS_MIRROR_ (mirror) consumer."""
    return "_nats.src" if prefix == "JS_SRC_" else "_nats.mirror"


async def _upstream_consumer(nc, upstream: str, prefix: str, sourcing: str, documented: str) -> tuple[dict, dict, dict]:
    """The durable `prefix` consumer the server made on `upstream` for the stream `sourcing`: (its info, what it has,
    what ADR-60 documents: durable, acking by flow control, unlimited deliveries, metadata naming `sourcing`)."""
    info = await _sourcing_consumer(nc, upstream, prefix, documented)
    key = _metadata_key(prefix)
    wanted = {"durable": True, "ack_policy": FLOW_CONTROL, "max_deliver": -1} | {
        f"{key}.stream": sourcing,
        f"{key}.acc": True,
    }
    return info, _durable_flow_control(info, prefix), wanted


@pytest.mark.rule("sourcing.durable-upstream-consumer")
@pytest.mark.parametrize("retention", ["workqueue", "interest"])
async def test_a_sourced_work_queue_or_interest_stream_gets_a_durable_flow_control_consumer(nc, make_stream, retention):
    """Sourcing a WorkQueue (Interest) stream makes on it a durable JS_SRC_ consumer acking by flow control."""
    upstream = await make_stream(retention=retention)
    aggregate = await make_stream(sources=[{"name": upstream.name}])
    documented = "a sourced WorkQueue or Interest stream gets a durable JS_SRC_<suffix> consumer"
    info, got, wanted = await _upstream_consumer(nc, upstream.name, "JS_SRC_", aggregate.name, documented)
    assert got == wanted, (
        f"{ADR60}: {documented} with ack_policy flow_control, max_deliver -1 and metadata naming the sourcing "
        f"stream ({wanted}); {info['name']} on the {retention} stream has {got}"
    )


@pytest.mark.rule("sourcing.durable-mirror-consumer")
async def test_a_mirrored_work_queue_stream_gets_a_durable_flow_control_consumer(nc, make_stream):
    """Mirroring a WorkQueue stream makes on it a durable JS_MIRROR_ consumer acking by flow control."""
    upstream = await make_stream(retention="workqueue")
    mirror = await make_stream(mirror={"name": upstream.name})
    documented = "a mirrored WorkQueue stream gets a durable JS_MIRROR_<suffix> consumer"
    info, got, wanted = await _upstream_consumer(nc, upstream.name, "JS_MIRROR_", mirror.name, documented)
    assert got == wanted, (
        f"{ADR60}: {documented} with ack_policy flow_control and metadata naming the mirror ({wanted}); "
        f"{info['name']} has {got}"
    )


async def _drained(nc, sourcing: str, upstream: str, consumer: str | None, count: int) -> dict:
    """Wait until `sourcing` holds `count` messages, `upstream` none and `consumer`'s (a name, or the JS_SRC_
    consumer when None) ack floor is at `count`; what was last seen of the three."""
    seen: dict = {}

    async def drained() -> bool:
        if consumer is None:
            infos = await _consumers(nc, upstream, "JS_SRC_")
        else:
            infos = [await api(nc, f"$JS.API.CONSUMER.INFO.{upstream}.{consumer}")]
        seen["sourcing stream holds"] = (await stream_state(nc, sourcing)).messages
        seen["upstream holds"] = (await stream_state(nc, upstream)).messages
        seen["consumer's ack floor"] = ((infos[0] if infos else {}).get("ack_floor") or {}).get("stream_seq")
        return seen == {"sourcing stream holds": count, "upstream holds": 0, "consumer's ack floor": count}

    await held_within(drained, CATCH_UP_S, nc)  # what it saw, once the server has answered after the wait
    return seen


@pytest.mark.rule("sourcing.upstream-acked")
@pytest.mark.parametrize("retention", ["workqueue", "interest"])
async def test_a_sourced_work_queue_or_interest_stream_is_emptied_once_its_messages_are_stored(
    nc, make_stream, retention
):
    """3 messages of a sourced WorkQueue (Interest) stream end up in the sourcing stream, the upstream empty."""
    upstream = await make_stream(retention=retention)
    if retention == "workqueue":
        for n in range(3):
            await publish_raw(nc, upstream.subject("a"), f"a{n}".encode())
    aggregate = await make_stream(sources=[{"name": upstream.name}])
    if retention == "interest":  # an Interest stream keeps what is published once the source's consumer is there

        async def interest() -> bool:
            return bool(await _consumers(nc, upstream.name, "JS_SRC_"))

        await eventually(interest, timeout=CATCH_UP_S)
        for n in range(3):
            await publish_raw(nc, upstream.subject("a"), f"a{n}".encode())
    seen = await _drained(nc, aggregate.name, upstream.name, None, 3)
    assert seen == {"sourcing stream holds": 3, "upstream holds": 0, "consumer's ack floor": 3}, (
        f"{ADR60}: a sourced {retention} stream's messages are stored by the sourcing stream and then acked by flow "
        f"control and removed from the upstream; after {CATCH_UP_S} s: {seen}"
    )


UPDATE_SUBJECT = "$JS.API.STREAM.UPDATE.{}"


@pytest.mark.rule("sourcing.durable-consumer-removed")
async def test_removing_a_work_queue_source_deletes_its_consumer(nc, make_stream):
    """A stream that stops sourcing a WorkQueue stream leaves no JS_SRC_ consumer on it."""
    upstream = await make_stream(retention="workqueue")
    aggregate = await make_stream(sources=[{"name": upstream.name}])
    documented = "a sourced WorkQueue stream gets a durable JS_SRC_<suffix> consumer"
    name = (await _sourcing_consumer(nc, upstream.name, "JS_SRC_", documented))["name"]
    config = {key: value for key, value in aggregate.config.items() if key != "sources"}
    await api(nc, UPDATE_SUBJECT.format(aggregate.name), config)

    async def removed() -> bool:
        return not await _consumers(nc, upstream.name, "JS_SRC_")

    if not await held_within(removed, CATCH_UP_S, nc):
        pytest.fail(
            f"{ADR60}: removing the source deletes the sourcing consumer the server made; {name} is still on the "
            f"WorkQueue stream {CATCH_UP_S} s after the update"
        )


@pytest.mark.rule("sourcing.durable-source-config")
async def test_a_durable_source_with_a_start_or_filter_is_refused(nc, make_stream, names):
    """A source (mirror) naming a consumer and an opt_start_seq, opt_start_time or filter is refused 10215 (10213)."""
    upstream = await make_stream()
    consumer = {"name": names.consumer(), "deliver_subject": names.subject()}
    fields = {
        "opt_start_seq": 2,
        "opt_start_time": "2026-01-01T00:00:00Z",
        "filter_subject": upstream.subject("a"),
    }
    got, wanted = {}, {}
    for field, value in fields.items():
        for kind, code in (("sources", 10215), ("mirror", 10213)):
            origin = {"name": upstream.name, "consumer": consumer, field: value}
            name = names.stream()
            body = {"name": name, "storage": "file", kind: [origin] if kind == "sources" else origin}
            asked = f"a {kind} naming a consumer with {field}"
            got[asked] = (await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, asked))[:2]
            wanted[asked] = (400, code)
    wrong = {asked: code for asked, code in got.items() if code != wanted[asked]}
    assert not wrong, (
        f"{ADR60}: a durable source's start and filter belong to its consumer: refused with 10215 (source) or 10213 "
        f"(mirror); got {wrong}"
    )


async def _flow_control_consumer(nc, stream: str, names, **config) -> tuple[str, str]:
    """A durable push consumer of `stream` acking by flow control, with `config`; (its name, deliver subject)."""
    name, deliver = names.consumer(), names.subject()
    body = {"durable_name": name, "ack_policy": FLOW_CONTROL, "deliver_subject": deliver, **config}
    await api(nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", {"stream_name": stream, "config": body})
    return name, deliver


@pytest.mark.rule("sourcing.durable-source")
async def test_a_source_through_a_precreated_consumer_takes_the_messages_through_it(nc, make_stream, names):
    """A source through a flow_control consumer of a WorkQueue of 3 holds all 3, the consumer acked, the WQ empty."""
    upstream = await make_stream(retention="workqueue")
    for n in range(3):
        await publish_raw(nc, upstream.subject("a"), f"a{n}".encode())
    try:
        consumer, deliver = await _flow_control_consumer(nc, upstream.name, names)
    except ApiError as error:
        pytest.fail(f"{ADR60}: a push consumer with ack_policy flow_control is documented as valid; refused: {error}")
    source = {"name": upstream.name, "consumer": {"name": consumer, "deliver_subject": deliver}}
    aggregate = await make_stream(sources=[source])
    seen = await _drained(nc, aggregate.name, upstream.name, consumer, 3)
    assert seen == {"sourcing stream holds": 3, "upstream holds": 0, "consumer's ack floor": 3}, (
        f"{ADR60}: a source naming a pre-created consumer takes the upstream's messages through it (stored, acked by "
        f"flow control, removed from the WorkQueue); after {CATCH_UP_S} s: {seen}"
    )


@pytest.mark.rule("sourcing.ack-flow-control")
async def test_a_flow_control_consumer_with_ack_wait_backoff_or_max_deliver_is_refused(nc, make_stream, names):
    """A flow_control consumer with ack_wait or backoff is refused with 10221, with max_deliver with 10222."""
    stream = await make_stream()
    cases = {
        "ack_wait": ({"ack_wait": 5_000_000_000}, (400, 10221)),
        "backoff": ({"backoff": [1_000_000_000]}, (400, 10221)),
        "max_deliver": ({"max_deliver": 5}, (400, 10222)),
    }
    got = {}
    for field, (extra, _) in cases.items():
        name = names.consumer()
        config = {"durable_name": name, "ack_policy": FLOW_CONTROL, "deliver_subject": names.subject(), **extra}
        body = {"stream_name": stream.name, "config": config}
        asked = f"a flow_control consumer with {field}"
        got[field] = (await refused(nc, f"$JS.API.CONSUMER.CREATE.{stream.name}.{name}", body, asked))[:2]
    wrong = {field: code for field, code in got.items() if code != cases[field][1]}
    assert not wrong, (
        f"{ADR60}: a flow_control consumer has no ack_wait or backoff (10221) and no max_deliver (10222); got {wrong}"
    )
