"""Atomic batch publish (ADR-50, nats-server 2.12 and 2.14)."""

from __future__ import annotations

import json

import pytest

from jetcheck.conformance.jsapi import API_TIMEOUT_S, stream_state, subject_messages

pytestmark = pytest.mark.asyncio

ID, SEQUENCE, COMMIT = "Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit"
ADR50 = "ADR-50"


async def _send(nc, subject: str, batch: str, seq: int | None, payload: bytes = b"m", **headers: str) -> dict | None:
    """One batch message as a request: None for the empty reply of a staged message, else the PubAck JSON."""
    header = {ID: batch, **({SEQUENCE: str(seq)} if seq is not None else {}), **headers}
    reply = await nc.request(subject, payload, timeout=API_TIMEOUT_S, headers=header)
    return json.loads(reply.data) if reply.data else None


def _code(ack: dict | None) -> tuple[int, int] | None:
    error = (ack or {}).get("error")
    return (error.get("code"), error.get("err_code")) if error else None


def _assert_rejected(ack: dict | None, err_code: int, description: str) -> None:
    """The server answered the batch message 400 with `err_code` (ADR-50's `description` of it)."""
    assert _code(ack) == (400, err_code), f"{ADR50}: {err_code} '{description}'; the server answered {ack}"


async def _atomic(make_stream, **config):
    return await make_stream(allow_atomic=True, **config)


@pytest.mark.rule("batch.disabled-refused")
async def test_a_batch_to_a_stream_without_atomic_publish_is_rejected(nc, make_stream):
    """A batch's first message to a stream without allow_atomic is rejected with 400/10174."""
    stream = await make_stream()
    ack = await _send(nc, stream.subject("a"), "b1", 1)
    _assert_rejected(ack, 10174, "Batch publish not enabled on stream")
    assert (await stream_state(nc, stream.name)).messages == 0, f"{ADR50}: the rejected batch message was stored"


@pytest.mark.rule("batch.commit")
async def test_a_batch_is_stored_whole_at_its_commit(nc, make_stream):
    """Two staged messages are invisible and answered empty; the commit stores all three on sequences 1-3."""
    stream = await _atomic(make_stream)
    subject = stream.subject("a")
    staged = [await _send(nc, subject, "b1", n, f"m{n}".encode()) for n in (1, 2)]
    visible = (await stream_state(nc, stream.name)).messages
    assert (staged, visible) == ([None, None], 0), (
        f"{ADR50}: a batch is stored at its commit, its other messages answered with an empty reply; before the "
        f"commit they were answered {staged} and the stream held {visible}"
    )
    ack = await _send(nc, subject, "b1", 3, b"m3", **{COMMIT: "1"})
    got = {k: (ack or {}).get(k) for k in ("seq", "batch", "count")}
    assert got == {"seq": 3, "batch": "b1", "count": 3}, (
        f"{ADR50}: the commit's pub ack includes Batch and Count, with the final message's sequence; got {ack}"
    )
    stored = [(m.seq, m.payload) for m in await subject_messages(nc, stream.name, subject)]
    assert stored == [(1, b"m1"), (2, b"m2"), (3, b"m3")], (
        f"{ADR50}: the batch's messages are stored in order on the sequences before the final one; stored {stored}"
    )


@pytest.mark.rule("batch.incomplete-abandoned")
async def test_a_batch_with_a_gap_or_no_start_is_rejected_whole(nc, make_stream):
    """Sequences 1 then 3, and a batch starting at 2, are rejected at commit with 400/10176 and store nothing."""
    stream = await _atomic(make_stream)
    await _send(nc, stream.subject("a"), "gap", 1)
    acks = {
        "a gap (1, 3)": await _send(nc, stream.subject("a"), "gap", 3, **{COMMIT: "1"}),
        "an unknown batch (2)": await _send(nc, stream.subject("a"), "unknown", 2, **{COMMIT: "1"}),
    }
    wrong = {what: ack for what, ack in acks.items() if _code(ack) != (400, 10176)}
    assert not wrong, f"{ADR50}: 10176 'Batch publish is incomplete and was abandoned'; got {wrong}"
    assert (await stream_state(nc, stream.name)).messages == 0, f"{ADR50}: an abandoned batch was stored"


@pytest.mark.rule("batch.id-limit")
async def test_a_batch_id_over_64_characters_is_rejected(nc, make_stream):
    """A 65-character batch id is rejected with 400/10179; a 64-character one commits."""
    stream = await _atomic(make_stream)
    long = await _send(nc, stream.subject("a"), "x" * 65, 1)
    assert _code(long) == (400, 10179), f"{ADR50}: 10179 for an id over 64 characters; the server answered {long}"
    fits = await _send(nc, stream.subject("a"), "y" * 64, 1, **{COMMIT: "1"})
    assert _code(fits) is None and (fits or {}).get("count") == 1, (
        f"{ADR50}: 'Maximum length of the ID is 64 characters'; a 64-character batch was answered {fits}"
    )


@pytest.mark.rule("batch.sequence-missing")
async def test_a_batch_message_without_a_sequence_is_rejected(nc, make_stream):
    """A batch message without Nats-Batch-Sequence is rejected with 400/10175."""
    stream = await _atomic(make_stream)
    ack = await _send(nc, stream.subject("a"), "b1", None)
    _assert_rejected(ack, 10175, "Batch publish sequence is missing")


@pytest.mark.rule("batch.unsupported-header")
async def test_a_batch_with_expected_last_msg_id_is_rejected(nc, make_stream):
    """A batch message with Nats-Expected-Last-Msg-Id is rejected with 400/10177."""
    stream = await _atomic(make_stream)
    ack = await _send(nc, stream.subject("a"), "b1", 1, **{"Nats-Expected-Last-Msg-Id": "z", COMMIT: "1"})
    _assert_rejected(ack, 10177, "Batch publish unsupported header used (Nats-Expected-Last-Msg-Id)")


@pytest.mark.rule("batch.expected-last-sequence")
async def test_a_failed_expectation_rejects_the_whole_batch(nc, make_stream):
    """A batch whose first message expects last sequence 5 of an empty stream is rejected; nothing is stored."""
    stream = await _atomic(make_stream)
    await _send(nc, stream.subject("a"), "b1", 1, **{"Nats-Expected-Last-Sequence": "5"})
    ack = await _send(nc, stream.subject("a"), "b1", 2, **{COMMIT: "1"})
    stored = (await stream_state(nc, stream.name)).messages
    assert _code(ack) is not None and stored == 0, (
        f"{ADR50}: a batch any message of which fails its checks is rejected at commit; the commit was answered "
        f"{ack} and the stream holds {stored}"
    )


@pytest.mark.rule("batch.duplicate-msg-id")
async def test_a_batch_with_a_message_id_twice_is_rejected(nc, make_stream):
    """A batch whose two messages have Nats-Msg-Id `d` is rejected with 400/10201."""
    stream = await _atomic(make_stream)
    await _send(nc, stream.subject("a"), "b1", 1, **{"Nats-Msg-Id": "d"})
    ack = await _send(nc, stream.subject("a"), "b1", 2, **{"Nats-Msg-Id": "d", COMMIT: "1"})
    _assert_rejected(ack, 10201, "Batch publish contains duplicate message id")


@pytest.mark.rule("batch.eob-commit")
async def test_an_eob_commit_stores_the_batch_without_its_last_message(nc, make_stream):
    """Two messages then an eob commit: count 2, and message 2 stored last with Nats-Batch-Commit: 1."""
    stream = await _atomic(make_stream)
    subject = stream.subject("a")
    for n in (1, 2):
        await _send(nc, subject, "b1", n, f"m{n}".encode())
    ack = await _send(nc, subject, "b1", 3, b"", **{COMMIT: "eob"})
    stored = await subject_messages(nc, stream.name, subject)
    got = ((ack or {}).get("count"), [m.payload for m in stored], stored[-1].headers.get(COMMIT) if stored else None)
    assert got == (2, [b"m1", b"m2"], "1"), (
        f"{ADR50}: an eob commit stores the batch without its final message, counts the others and marks the last "
        f"stored one Nats-Batch-Commit: 1; got count, payloads, mark {got} (ack {ack})"
    )


@pytest.mark.rule("batch.api-level")
async def test_an_atomic_stream_requires_api_level_2(make_stream):
    """A stream with allow_atomic has _nats.req.level 2."""
    stream = await _atomic(make_stream)
    level = (stream.config.get("metadata") or {}).get("_nats.req.level")
    assert level == "2", f"{ADR50}: atomic batch publish needs API level 2; the stream's _nats.req.level is {level}"
