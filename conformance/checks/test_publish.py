"""Publishing into a stream: the PubAck and the expected-value headers."""

from __future__ import annotations

import pytest
from nats.js.errors import BadRequestError

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import purge, stream_state
from jetcheck.versions import parse_version

pytestmark = pytest.mark.asyncio


@pytest.mark.rule("publish.puback-fields")
async def test_puback_names_the_stream_and_the_next_sequence(js, make_stream):
    """A publish is acknowledged with the stream name and the next sequence, and no duplicate flag."""
    stream = await make_stream()
    acks = [await js.publish(stream.subject("a"), b"x") for _ in range(3)]
    assert [a.stream for a in acks] == [stream.name] * 3
    assert [a.seq for a in acks] == [1, 2, 3]
    assert not any(a.duplicate for a in acks), f"first publishes flagged duplicate: {acks}"


@pytest.mark.rule("publish.expected-stream")
async def test_expected_stream_mismatch_is_rejected_with_10060(js, nc, make_stream):
    """A publish expecting another stream is rejected with 400/10060 and not stored."""
    stream = await make_stream()
    with pytest.raises(BadRequestError) as rejected:
        await js.publish(stream.subject("a"), b"x", headers={"Nats-Expected-Stream": stream.name + "_other"})
    assert (rejected.value.code, rejected.value.err_code) == (400, 10060)
    ack = await js.publish(stream.subject("a"), b"x", headers={"Nats-Expected-Stream": stream.name})
    assert ack.seq == 1
    assert (await stream_state(nc, stream.name)).messages == 1


@pytest.mark.rule("publish.expected-last-sequence")
async def test_expected_last_sequence_mismatch_is_rejected_with_10071(js, nc, make_stream):
    """A publish expecting another last sequence is rejected with 400/10071 'wrong last sequence: N'."""
    stream = await make_stream()
    await js.publish(stream.subject("a"), b"1")
    await js.publish(stream.subject("b"), b"2")
    with pytest.raises(BadRequestError) as rejected:
        await js.publish(stream.subject("a"), b"3", headers={"Nats-Expected-Last-Sequence": "1"})
    asked = "a publish expecting last sequence 1 where it is 2"
    assert_refused_as_documented(
        refusal_of(rejected.value), DocumentedRefusal(400, 10071, "wrong last sequence: 2"), asked
    )
    ack = await js.publish(stream.subject("a"), b"3", headers={"Nats-Expected-Last-Sequence": "2"})
    assert ack.seq == 3
    assert (await stream_state(nc, stream.name)).messages == 3


@pytest.mark.rule("publish.expected-last-subject-sequence")
async def test_expected_last_subject_sequence_uses_stream_sequences_and_zero_for_none(js, nc, make_stream):
    """Expected-Last-Subject-Sequence is the subject's last stream sequence; 0 means none, also after a purge."""
    stream = await make_stream()
    a, b = stream.subject("a"), stream.subject("b")
    await js.publish(a, b"1", headers={"Nats-Expected-Last-Subject-Sequence": "0"})  # seq 1: none on `a` yet
    await js.publish(b, b"2")  # seq 2
    with pytest.raises(BadRequestError) as rejected:
        await js.publish(a, b"3", headers={"Nats-Expected-Last-Subject-Sequence": "2"})  # 2 is b's, not a's
    assert (rejected.value.code, rejected.value.err_code) == (400, 10071)
    with pytest.raises(BadRequestError) as rejected_zero:
        await js.publish(a, b"3", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    assert rejected_zero.value.err_code == 10071
    ack = await js.publish(a, b"3", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
    assert ack.seq == 3
    await purge(nc, stream.name, filter=a)
    ack = await js.publish(a, b"4", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    assert ack.seq == 4, "after purging the subject, 0 must mean 'no message on this subject'"


@pytest.mark.rule("publish.expected-last-subject-sequence-subject")
async def test_expected_last_subject_sequence_of_another_subject_holds_in_any_header_order(js, make_stream):
    """With Expected-Last-Subject-Sequence-Subject the sequence expected is that subject's, in either header order."""
    stream = await make_stream()
    a, b = stream.subject("a"), stream.subject("b")
    await js.publish(a, b"1")  # seq 1, the last (and only) message on `a`
    wrong = {"Nats-Expected-Last-Subject-Sequence-Subject": a, "Nats-Expected-Last-Subject-Sequence": "5"}
    right = {"Nats-Expected-Last-Subject-Sequence-Subject": a, "Nats-Expected-Last-Subject-Sequence": "1"}
    for headers in (wrong, dict(reversed(wrong.items()))):
        outcome = await _outcome(js.publish(b, b"2", headers=headers))
        assert outcome == (400, 10071), (
            f"a publish to {b} expecting {a}'s last sequence to be 5 (it is 1), headers in the order {list(headers)}: "
            f"the docs have the server enforce the sequence against {a} and refuse with 400/10071; it was {outcome}"
        )
    assert await _outcome(js.publish(b, b"2", headers=right)) == "stored at 2"


async def _outcome(publish) -> tuple[int, int] | str:
    """(code, err_code) of a refused publish, or where the stored one went."""
    try:
        ack = await publish
    except BadRequestError as exc:
        return exc.code, exc.err_code
    return f"stored at {ack.seq}"


@pytest.mark.rule("publish.expected-last-msg-id")
async def test_expected_last_msg_id_mismatch_is_rejected_with_10070(js, nc, make_stream):
    """A publish expecting another last Nats-Msg-Id is rejected with 400/10070 and not stored."""
    stream = await make_stream()
    await js.publish(stream.subject("a"), b"1", headers={"Nats-Msg-Id": "first"})
    with pytest.raises(BadRequestError) as rejected:
        await js.publish(stream.subject("a"), b"2", headers={"Nats-Expected-Last-Msg-Id": "other"})
    assert (rejected.value.code, rejected.value.err_code) == (400, 10070)
    try:
        ack = await js.publish(stream.subject("a"), b"2", headers={"Nats-Expected-Last-Msg-Id": "first"})
    except BadRequestError as error:
        pytest.fail(
            "a publish expecting the last Nats-Msg-Id 'first', the one the stream's last message carries, is "
            f"documented to be stored; the server refused it: {error}"
        )
    assert ack.seq == 2
    assert (await stream_state(nc, stream.name)).messages == 2


EXPECTED_FIRST_SINCE = parse_version("2.12.0")


@pytest.mark.rule("publish.expected-checks-before-dedup")
@pytest.mark.parametrize("replicas", [1, pytest.param(3, marks=pytest.mark.needs("cluster"))], ids=["r1", "r3"])
async def test_check_order_of_expected_last_sequence_and_dedup_follows_the_server_version(
    js, nc, make_stream, server_info, expected_release, observe, replicas
):
    """An unreplicated stream on a server >= 2.12.0 checks Expected-Last-Sequence before dedup; earlier servers
    and replicated streams dedup first."""
    stream = await make_stream(num_replicas=replicas)
    await js.publish(stream.subject("a"), b"1", headers={"Nats-Msg-Id": "retry"})
    await js.publish(stream.subject("a"), b"2")
    stale = {"Nats-Msg-Id": "retry", "Nats-Expected-Last-Sequence": "1"}
    try:
        ack = await js.publish(stream.subject("a"), b"1", headers=stale)
        seen = f"dedup first (duplicate PubAck, seq {ack.seq}, duplicate={ack.duplicate})"
        order = "dedup-first"
        assert ack.duplicate and ack.seq == 1, f"neither rejected nor a duplicate of seq 1: {ack}"
    except BadRequestError as exc:
        assert exc.err_code == 10071, f"rejected with {exc.code}/{exc.err_code}, not 10071"
        seen, order = "expected-last-sequence first (400/10071)", "expected-first"
    observe("check_order", order)
    # the R1 path is a single server's, in a cluster too: only a replicated stream proposes through raft
    expected = (
        "expected-first" if replicas == 1 and parse_version(expected_release) >= EXPECTED_FIRST_SINCE else "dedup-first"
    )
    assert order == expected, (
        f"as nats-server {expected_release}, R{replicas} stream{' in a cluster' if server_info.cluster else ''}: "
        f"should check {expected}; it checked {seen}"
    )
    assert (await stream_state(nc, stream.name)).messages == 2
