"""Purge and its variants (ADR-10): what goes, what stays, what the stream and its consumers look like after."""

from __future__ import annotations

import pytest

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import ApiError, api, purge, stream_state
from jetcheck.conformance.model import StreamState

pytestmark = pytest.mark.asyncio

# Stream sequence:     1    2    3     4     5     6
LAYOUT = ("a", "b", "a", "c.x", "a", "c.y")


async def _filled(js, make_stream, **config):
    stream = await make_stream(**config)
    for token in LAYOUT:
        await js.publish(stream.subject(*token.split(".")), b"m")
    return stream


def _state(stream, messages: int, first_seq: int, subjects: dict[str, int]) -> StreamState:
    """The expected state, with subjects given relative to the stream's root."""
    return StreamState(
        messages, first_seq, len(LAYOUT), {stream.subject(*k.split(".")): v for k, v in subjects.items()}
    )


async def _purge_and_state(nc, stream, **request):
    reply = await purge(nc, stream.name, **request)
    return reply, await stream_state(nc, stream.name)


@pytest.mark.rule("purge.all")
async def test_purge_without_options_removes_everything(js, nc, make_stream):
    """A plain purge removes all messages and leaves first sequence = last sequence + 1."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream)
    assert reply["success"] is True
    assert reply["purged"] == 6
    assert state == StreamState(0, 7, 6, {})


@pytest.mark.rule("purge.filter")
@pytest.mark.parametrize(
    ("filter_", "purged", "first_seq", "left"),
    [
        ("a", 3, 2, {"b": 1, "c.x": 1, "c.y": 1}),
        ("c.*", 2, 1, {"a": 3, "b": 1}),
        ("c.>", 2, 1, {"a": 3, "b": 1}),
        ("*", 4, 4, {"c.x": 1, "c.y": 1}),
    ],
    ids=["literal", "star", "gt", "star-one-token"],
)
async def test_purge_with_filter_removes_only_matching_subjects(js, nc, make_stream, filter_, purged, first_seq, left):
    """A filtered purge removes exactly the messages whose subject matches the filter, wildcards included."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream, filter=stream.subject(*filter_.split(".")))
    assert reply["purged"] == purged
    assert state == _state(stream, 6 - purged, first_seq, left)


@pytest.mark.rule("purge.seq")
async def test_purge_with_seq_removes_everything_below_it(js, nc, make_stream):
    """A purge with seq 4 removes sequences 1-3 and keeps 4 and later."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream, seq=4)
    assert reply["purged"] == 3
    assert state == _state(stream, 3, 4, {"a": 1, "c.x": 1, "c.y": 1})


@pytest.mark.rule("purge.seq-one")
@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_purge_with_seq_one_removes_nothing(js, nc, make_stream, storage, server_info):
    """A purge with seq 1 removes nothing: no message lies below sequence 1."""
    stream = await _filled(js, make_stream, storage=storage)
    reply, state = await _purge_and_state(nc, stream, seq=1)
    assert (reply["purged"], state.messages) == (0, 6), (
        f"purge seq=1 on {storage} storage removed {reply['purged']} of 6 messages on nats-server "
        f"{server_info.version}; ADR-10 purges only messages below seq (known server bug on file storage before "
        f"2.14.2)"
    )
    assert state == _state(stream, 6, 1, {"a": 3, "b": 1, "c.x": 1, "c.y": 1})


@pytest.mark.rule("purge.keep")
async def test_purge_with_keep_leaves_the_newest_messages(js, nc, make_stream):
    """A purge with keep 2 leaves the newest 2 messages."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream, keep=2)
    assert reply["purged"] == 4
    assert state == _state(stream, 2, 5, {"a": 1, "c.y": 1})


@pytest.mark.rule("purge.keep")
async def test_purge_with_keep_counts_messages_not_the_deleted_sequences_between(js, nc, make_stream):
    """A purge with keep 5 on a memory stream whose even sequences were deleted leaves its newest 5 messages."""
    stream = await make_stream(storage="memory")
    for _ in range(50):
        await js.publish(stream.subject("a"), b"m")
    for seq in range(2, 51, 2):
        await api(nc, f"$JS.API.STREAM.MSG.DELETE.{stream.name}", {"seq": seq})
    reply, state = await _purge_and_state(nc, stream, keep=5)
    assert (reply["purged"], state.messages, state.first_seq) == (20, 5, 41), (
        f"purge keep 5 of the 25 odd sequences 1-49 on memory storage: ADR-10 keeps the newest 5 messages (purged 20, "
        f"5 left from seq 41); it purged {reply['purged']}, leaving {state.messages} from seq {state.first_seq}"
    )


@pytest.mark.rule("purge.keep-at-least-count")
@pytest.mark.parametrize("keep", [6, 50])
async def test_purge_with_keep_at_or_above_count_removes_nothing(js, nc, make_stream, keep):
    """A purge keeping at least as many messages as the stream holds removes nothing."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream, keep=keep)
    assert reply["purged"] == 0
    assert state == _state(stream, 6, 1, {"a": 3, "b": 1, "c.x": 1, "c.y": 1})


@pytest.mark.rule("purge.filter-seq")
async def test_purge_with_filter_and_seq_removes_matching_messages_below_seq(js, nc, make_stream):
    """A purge with filter `a` and seq 5 removes `a` at 1 and 3 and keeps `a` at 5."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream, filter=stream.subject("a"), seq=5)
    assert reply["purged"] == 2
    assert state == _state(stream, 4, 2, {"a": 1, "b": 1, "c.x": 1, "c.y": 1})


@pytest.mark.rule("purge.filter-keep")
@pytest.mark.parametrize(
    ("filter_", "keep", "purged", "first_seq", "left"),
    [
        ("a", 1, 2, 2, {"a": 1, "b": 1, "c.x": 1, "c.y": 1}),
        ("c.*", 1, 1, 1, {"a": 3, "b": 1, "c.y": 1}),
    ],
    ids=["literal", "wildcard"],
)
async def test_purge_with_filter_and_keep_leaves_newest_matching(
    js, nc, make_stream, filter_, keep, purged, first_seq, left
):
    """A purge with filter and keep N leaves the newest N matching messages and all others."""
    stream = await _filled(js, make_stream)
    reply, state = await _purge_and_state(nc, stream, filter=stream.subject(*filter_.split(".")), keep=keep)
    assert reply["purged"] == purged
    assert state == _state(stream, 6 - purged, first_seq, left)


@pytest.mark.rule("purge.seq-keep-rejected")
async def test_purge_with_seq_and_keep_is_rejected_with_10003(js, nc, make_stream):
    """A purge giving both seq and keep is rejected with 400/10003 and removes nothing."""
    stream = await _filled(js, make_stream)
    with pytest.raises(ApiError) as rejected:
        await purge(nc, stream.name, seq=3, keep=1)
    assert (rejected.value.code, rejected.value.err_code) == (400, 10003)
    assert (await stream_state(nc, stream.name)).messages == 6


@pytest.mark.rule("purge.unknown-stream")
async def test_purge_of_an_unknown_stream_is_rejected_with_10059(nc, names):
    """Purging a stream that does not exist is rejected with 404/10059."""
    with pytest.raises(ApiError) as rejected:
        await purge(nc, names.stream("MISSING"))
    assert_refused_as_documented(
        refusal_of(rejected.value), DocumentedRefusal(404, 10059), "a purge of a missing stream"
    )


@pytest.mark.rule("purge.consumer-moves-forward")
async def test_purge_moves_a_consumer_past_the_purged_messages(js, nc, make_stream, names):
    """After a purge below seq 4, the consumer has 3 pending and its next delivery is sequence 4."""
    stream = await _filled(js, make_stream)
    durable = names.consumer()
    sub = await js.pull_subscribe(stream.subject(">"), durable=durable, stream=stream.name)
    (first,) = await sub.fetch(1, timeout=5)
    await first.ack_sync()
    assert first.metadata.sequence.stream == 1
    await purge(nc, stream.name, seq=4)
    info = await js.consumer_info(stream.name, durable)
    assert info.num_pending == 3, f"pending after purge: {info.num_pending}, expected 3 (sequences 4-6)"
    (after,) = await sub.fetch(1, timeout=5)
    assert after.metadata.sequence.stream == 4, f"delivered {after.metadata.sequence.stream} after the purge"
    await after.ack_sync()
