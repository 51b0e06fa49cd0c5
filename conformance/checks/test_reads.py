"""Reading stored messages (get by sequence or subject, direct get) and deleting single messages."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import nats.errors
import pytest
from nats.aio.msg import Msg

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import ApiError, api, epoch_seconds, purge, rfc3339, stream_state
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio


NO_MESSAGE = DocumentedRefusal(404, 10037)
DIRECT_TIMEOUT_S = 1.0
NO_REPLY_TIMEOUT_S = 0.5
DIRECT_HEADERS = ("Nats-Stream", "Nats-Sequence", "Nats-Subject", "Nats-Time-Stamp")
PENDING, LAST, UP_TO = "Nats-Num-Pending", "Nats-Last-Sequence", "Nats-UpTo-Sequence"
MULTI_LAST_LIMIT = 1024  # ADR-31: a multi-subject request may match up to 1024 subjects

# Stream sequence:  1    2    3    4
LAYOUT = (("a", b"one"), ("b", b"two"), ("a", b"three"), ("c", b"four"))
# Stream sequence: 1    2    3    4    5    6
SIX_SUBJECTS = ("a", "b", "a", "c", "b", "d")


async def _filled(js, make_stream, **config):
    stream = await make_stream(**config)
    for token, payload in LAYOUT:
        await js.publish(stream.subject(token), payload, headers={"X-Token": token})
    return stream


async def _get(nc, stream, **request) -> dict:
    """The message MSG.GET answers `request` with, for a request a stored message meets: a refusal fails the check."""
    try:
        return (await api(nc, f"$JS.API.STREAM.MSG.GET.{stream.name}", request))["message"]
    except ApiError as error:
        pytest.fail(f"MSG.GET {request} is documented to answer a stored message; the server refused it: {error}")


async def _get_refused(nc, stream, documented: DocumentedRefusal, **request) -> None:
    """MSG.GET `request` is refused as `documented`."""
    with pytest.raises(ApiError) as rejected:
        await api(nc, f"$JS.API.STREAM.MSG.GET.{stream.name}", request)
    assert_refused_as_documented(refusal_of(rejected.value), documented, f"MSG.GET {request}")


def _seq_and_payload(message: dict) -> tuple[int, bytes]:
    return message["seq"], base64.b64decode(message.get("data") or b"")


async def _direct(nc, subject: str, body: dict | None = None):
    payload = b"" if body is None else json.dumps(body).encode()
    return await nc.request(subject, payload, timeout=DIRECT_TIMEOUT_S)


def _status(msg: Msg | None) -> str | None:
    return None if msg is None else (msg.headers or {}).get("Status")


def _header(msg: Msg, name: str) -> str | None:
    return (msg.headers or {}).get(name)


def _seq(msg: Msg) -> int | None:
    """A reply's Nats-Sequence (None without one)."""
    seq = _header(msg, "Nats-Sequence")
    return None if seq is None else int(seq)


@dataclass(frozen=True)
class DirectAnswer:
    """What a DIRECT.GET request is answered with: its messages, and the status message that ends them (None: none
    came)."""

    messages: list[Msg]
    end: Msg | None

    @property
    def seqs(self) -> list[int | None]:
        """Each message's Nats-Sequence (None for one without)."""
        return [_seq(m) for m in self.messages]

    @property
    def status(self) -> str | None:
        return _status(self.end)

    def __str__(self) -> str:
        """The answer in a failure's words: its messages' sequences, then its status."""
        return _answer(self.seqs, self.status)


async def _direct_replies(nc, stream, body: dict) -> DirectAnswer:
    """Send one DIRECT.GET request; what it is answered with.

    A request without batch or multi_last is answered with one message or one status, so reading stops there; a
    batch or multi_last answer is read until its status (204 EOB, or an error status).
    """
    single = "batch" not in body and "multi_last" not in body
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        await nc.publish(f"$JS.API.DIRECT.GET.{stream.name}", json.dumps(body).encode(), reply=inbox)
        messages: list[Msg] = []
        while True:
            try:
                msg = await sub.next_msg(timeout=DIRECT_TIMEOUT_S)
            except nats.errors.TimeoutError:
                await answering(nc)
                return DirectAnswer(messages, None)
            if _status(msg) is not None:
                return DirectAnswer(messages, msg)
            messages.append(msg)
            if single:
                return DirectAnswer(messages, None)
    finally:
        await sub.unsubscribe()


async def _direct_seqs(nc, stream, body: dict) -> tuple[list[int | None], str | None]:
    """The sequences a DIRECT.GET request is answered with (None for a reply without Nats-Sequence) and the status
    that ends them (None: none came)."""
    answer = await _direct_replies(nc, stream, body)
    return answer.seqs, answer.status


async def _stored_time(nc, stream, seq: int) -> str:
    """The server's timestamp of message `seq`, as it wrote it (RFC 3339 with nanoseconds)."""
    return (await _get(nc, stream, seq=seq))["time"]


def _answer(seqs: list[int | None], status: str | None) -> str:
    messages = f"messages {seqs}" if seqs else "no message"
    return f"{messages}, then status {status}" if status else f"{messages} and no status"


async def _assert_direct_answer(nc, stream, body: dict, seqs: list[int], status: str, documented: str) -> None:
    """A DIRECT.GET of `body` is answered with the messages `seqs`, then `status`, as `documented` (the failure's
    words, after the body and before what came)."""
    answer = await _direct_replies(nc, stream, body)
    assert (answer.seqs, answer.status) == (seqs, status), f"{body}: {documented}; got {answer}"


async def _delete(nc, stream, seq: int, **request) -> dict:
    return await api(nc, f"$JS.API.STREAM.MSG.DELETE.{stream.name}", {"seq": seq, **request})


async def _deleted(nc, stream, seq: int, **request) -> dict:
    """MSG.DELETE of stored message `seq`, which a check needs done; a refusal fails the check in words."""
    try:
        return await _delete(nc, stream, seq, **request)
    except ApiError as error:
        pytest.fail(f"MSG.DELETE of stored message {seq} is documented to remove it; the server refused it: {error}")


@pytest.mark.rule("reads.get-by-sequence")
async def test_get_by_sequence_returns_the_stored_message(js, nc, make_stream):
    """MSG.GET with seq 2 returns subject, sequence, payload, headers and time of message 2."""
    stream = await _filled(js, make_stream)
    message = await _get(nc, stream, seq=2)
    assert (message["subject"], *_seq_and_payload(message)) == (stream.subject("b"), 2, b"two")
    headers = base64.b64decode(message.get("hdrs") or b"").decode()
    assert "X-Token: b" in headers, f"stored headers not returned: {headers!r}"
    assert message.get("time"), "no time in the stored message"


@pytest.mark.rule("reads.get-missing")
async def test_get_of_a_missing_sequence_is_rejected_with_10037(js, nc, make_stream):
    """MSG.GET of a deleted sequence, or one beyond the last, is refused with 404/10037."""
    stream = await _filled(js, make_stream)
    await _deleted(nc, stream, 2)
    for seq in (2, 99):
        await _get_refused(nc, stream, NO_MESSAGE, seq=seq)


@pytest.mark.rule("reads.get-last-by-subject")
async def test_get_last_by_subject_returns_the_newest_on_it(js, nc, make_stream):
    """MSG.GET last_by_subj `a` returns sequence 3; a subject with no message is refused with 404/10037."""
    stream = await _filled(js, make_stream)
    message = await _get(nc, stream, last_by_subj=stream.subject("a"))
    found = (message["subject"], *_seq_and_payload(message))
    assert found == (stream.subject("a"), 3, b"three"), (
        f"ADR-31: last_by_subj returns the last message having the subject, seq 3 b'three'; got {found}"
    )
    await _get_refused(nc, stream, NO_MESSAGE, last_by_subj=stream.subject("none"))


@pytest.mark.rule("reads.get-last-by-subject")
async def test_get_last_by_subject_returns_the_newest_after_deletes_and_new_stores(js, nc, make_stream):
    """After a subject's newest messages were deleted and new ones stored, last_by_subj returns the newest stored."""
    stream = await make_stream()
    subject = stream.subject("a")

    async def looked_at() -> int:
        """The subject's count, first and last asked for, as a client following it would; its last's sequence."""
        await api(nc, f"$JS.API.STREAM.INFO.{stream.name}", {"subjects_filter": subject})
        await _get(nc, stream, seq=1, next_by_subj=subject)
        return (await _get(nc, stream, last_by_subj=subject))["seq"]

    async def store(count: int = 1) -> None:
        for _ in range(count):
            await js.publish(subject, b"m")

    async def delete(*seqs: int) -> None:
        for seq in seqs:
            await _deleted(nc, stream, seq, no_erase=True)

    # nats-server's own test of a subject's first and last (TestStoreSubjectStateConsistency), through the API
    await store(4)
    await looked_at()
    for seq in (1, 4, 2):
        await delete(seq)
        await looked_at()
    await store(3)  # 5, 6, 7
    await looked_at()
    await delete(7, 3, 5)
    await looked_at()
    await store()  # 8
    await delete(8)
    await store()  # 9: the subject holds 6 and 9
    last = await looked_at()
    assert last == 9, (
        f"the subject holds sequences 6 and 9: ADR-31's last_by_subj returns 'the last message having the subject', "
        f"9; it returned seq {last}"
    )


@pytest.mark.rule("reads.get-next-by-subject")
async def test_get_next_by_subject_returns_the_first_at_or_after_seq(js, nc, make_stream):
    """MSG.GET with next_by_subj `a` returns sequence 1 from seq 1, 3 from seq 2, and nothing from seq 4."""
    stream = await _filled(js, make_stream)
    subject = stream.subject("a")
    assert _seq_and_payload(await _get(nc, stream, seq=1, next_by_subj=subject)) == (1, b"one")
    assert _seq_and_payload(await _get(nc, stream, seq=2, next_by_subj=subject)) == (3, b"three")
    await _get_refused(nc, stream, NO_MESSAGE, seq=4, next_by_subj=subject)


@pytest.mark.rule("reads.get-bad-request")
@pytest.mark.parametrize("request_", [{}, {"seq": 1, "last_by_subj": "a"}], ids=["empty", "seq-and-last"])
async def test_get_without_or_with_conflicting_options_is_rejected_with_10003(js, nc, make_stream, request_):
    """MSG.GET without a selector, or with both seq and last_by_subj, is refused with 400/10003."""
    stream = await _filled(js, make_stream)
    if "last_by_subj" in request_:
        request_ = {**request_, "last_by_subj": stream.subject("a")}
    await _get_refused(nc, stream, DocumentedRefusal(400, 10003), **request_)


@pytest.mark.rule("reads.direct-get")
async def test_direct_get_returns_the_raw_message_with_its_headers(js, nc, make_stream):
    """DIRECT.GET by seq and by last_by_subj answers with the payload and the Nats-* headers."""
    stream = await _filled(js, make_stream, allow_direct=True)
    cases = (({"seq": 2}, ("b", 2, b"two")), ({"last_by_subj": stream.subject("a")}, ("a", 3, b"three")))
    for body, (token, seq, payload) in cases:
        msg = await _direct(nc, f"$JS.API.DIRECT.GET.{stream.name}", body)
        headers = msg.headers or {}
        assert _status(msg) is None, f"{body}: status {_status(msg)}"
        assert all(h in headers for h in DIRECT_HEADERS), f"{body}: headers {sorted(headers)}"
        found = (headers["Nats-Stream"], headers["Nats-Subject"], int(headers["Nats-Sequence"]), msg.data)
        assert found == (stream.name, stream.subject(token), seq, payload), f"{body}: {found}"
        assert headers.get("X-Token") == token, f"{body}: stored header missing"


@pytest.mark.rule("reads.direct-get-subject-appended")
async def test_direct_get_with_the_subject_appended_returns_its_last_message(js, nc, make_stream):
    """DIRECT.GET.<stream>.<subject> returns the last message on the subject; with a payload it answers 408."""
    stream = await _filled(js, make_stream, allow_direct=True)
    subject = f"$JS.API.DIRECT.GET.{stream.name}.{stream.subject('a')}"
    msg = await _direct(nc, subject)
    assert _status(msg) is None, f"status {_status(msg)}"
    found = ((msg.headers or {}).get("Nats-Sequence"), msg.data)
    assert found == ("3", b"three"), (
        f"ADR-31: the last message on the subject, Nats-Sequence 3 b'three'; got {found} with headers {msg.headers}"
    )
    assert _status(await _direct(nc, subject, {"seq": 1})) == "408"


@pytest.mark.rule("reads.direct-get-not-found")
async def test_direct_get_of_a_missing_message_answers_404(js, nc, make_stream):
    """DIRECT.GET for a missing sequence or subject answers status 404 without payload; an empty request 408."""
    stream = await _filled(js, make_stream, allow_direct=True)
    api_subject = f"$JS.API.DIRECT.GET.{stream.name}"
    for body in ({"seq": 99}, {"last_by_subj": stream.subject("none")}):
        msg = await _direct(nc, api_subject, body)
        assert (_status(msg), msg.data) == ("404", b""), f"{body}: status {_status(msg)}, payload {msg.data!r}"
    assert _status(await _direct(nc, api_subject)) == "408"


@pytest.mark.rule("reads.direct-get-start-time-after-last")
async def test_a_direct_get_with_a_start_time_after_the_last_message_finds_none(js, nc, make_stream):
    """On a memory stream holding one message, a direct get with start_time after it answers 404."""
    stream = await make_stream(storage="memory", allow_direct=True)
    await js.publish(stream.subject("a"), b"one")
    after = rfc3339(epoch_seconds(await _stored_time(nc, stream, 1)) + 1)
    for body in ({"start_time": after}, {"start_time": after, "next_by_subj": stream.subject("a"), "batch": 1}):
        documented = "a start time after the last message (seq 1) matches no message, documented answer 404"
        await _assert_direct_answer(nc, stream, body, [], "404", documented)


@pytest.mark.rule("reads.direct-get-multi-last-up-to-time-before-first")
async def test_a_multi_last_up_to_a_time_before_the_first_message_finds_none(js, nc, make_stream):
    """A direct get multi_last with up_to_time before the stream's first message answers 404."""
    stream = await _filled(js, make_stream, allow_direct=True)
    before = rfc3339(epoch_seconds(await _stored_time(nc, stream, 1)) - 1)
    body = {"multi_last": [stream.subject("a")], "up_to_time": before}
    documented = "no message is stored up to a time before the first one, documented answer 404"
    await _assert_direct_answer(nc, stream, body, [], "404", documented)


@pytest.mark.rule("reads.direct-get-batch-from-deleted-sequence")
async def test_a_batched_direct_get_from_a_deleted_sequence_returns_the_messages_after_it(js, nc, make_stream):
    """A batched direct get whose start seq was purged or deleted returns the stored messages after it, then 204."""
    stream = await make_stream(allow_direct=True)
    for token in ("a", "b", "c"):
        await js.publish(stream.subject(token), b"purged")
    await purge(nc, stream.name)
    for token in ("d", "e", "f"):  # sequences 4, 5 and 6
        await js.publish(stream.subject(token), b"stored")
    await _deleted(nc, stream, 5)
    for start, expected in ((1, [4, 6]), (5, [6])):
        body = {"seq": start, "batch": 10}
        seqs, status = await _direct_seqs(nc, stream, body)
        assert (seqs, status) == (expected, "204"), (
            f"{body} with 1-3 purged and 5 deleted: documented the messages from seq {start} on, {expected}, "
            f"then 204 EOB; got {_answer(seqs, status)}"
        )


async def _six(js, make_stream, payload: bytes = b"m"):
    """A direct-get stream holding SIX_SUBJECTS, one message each, without headers."""
    stream = await make_stream(allow_direct=True)
    for token in SIX_SUBJECTS:
        await js.publish(stream.subject(token), payload)
    return stream


def _ints(messages: list[Msg], name: str) -> list[int | None]:
    return [None if _header(m, name) is None else int(_header(m, name)) for m in messages]


def _eob(end: Msg | None, *names: str) -> tuple:
    """What an end of batch says: status, description, the headers `names` and the payload."""
    if end is None:
        return (None,)
    return (_status(end), _header(end, "Description"), *(_header(end, n) for n in names), end.data)


@pytest.mark.rule("reads.direct-get-batch")
async def test_a_batched_direct_get_returns_its_messages_then_an_end_of_batch(js, nc, make_stream, observe):
    """{seq 2, batch 3} of six messages returns 2, 3 and 4 with their pending and previous sequence, then 204 EOB."""
    stream = await _six(js, make_stream)
    body = {"seq": 2, "batch": 3}
    answer = await _direct_replies(nc, stream, body)
    assert (answer.seqs, answer.status) == ([2, 3, 4], "204"), (
        f"{body} of 6 messages, a batch of 3 from seq 2: documented messages [2, 3, 4], then 204 EOB; got {answer}"
    )
    missing = {
        seq: [h for h in (*DIRECT_HEADERS, PENDING, LAST) if _header(m, h) is None]
        for seq, m in zip(answer.seqs, answer.messages, strict=True)
    }
    assert not any(missing.values()), (
        f"a batch of 3 from seq 2: each message carries {(*DIRECT_HEADERS, PENDING, LAST)}; missing {missing}"
    )
    subjects = [_header(m, "Nats-Subject") for m in answer.messages]
    assert subjects == [stream.subject(t) for t in SIX_SUBJECTS[1:4]], f"a batch of 3 from seq 2: subjects {subjects}"
    previous = _ints(answer.messages, LAST)
    assert previous == [0, 2, 3], (
        f"a batch of 3 from seq 2: Nats-Last-Sequence is the previous message's sequence, 0 on the first: [0, 2, 3]; "
        f"got {previous}"
    )
    eob = _eob(answer.end, PENDING, LAST)
    assert eob == ("204", "EOB", "2", "4", b""), (
        f"a batch of 3 from seq 2: the end of batch is status 204 'EOB' with no payload, Nats-Num-Pending 2 (5 and 6 "
        f"left) and Nats-Last-Sequence 4 (the last sent); got (status, description, pending, last, payload) {eob}"
    )
    pending = _ints(answer.messages, PENDING)
    counts = {"after it": [4, 3, 2], "from it on (2.11.x)": [5, 4, 3]}
    counted = next((how for how, expected in counts.items() if pending == expected), None)
    assert counted, (
        f"a batch of 3 from seq 2: each message's Nats-Num-Pending counts the matching messages left, [4, 3, 2] after "
        f"each ([5, 4, 3] from it on, as 2.11.x counts); got {pending}"
    )
    observe("num_pending_counts", counted)


@pytest.mark.rule("reads.direct-get-batch-max-bytes")
async def test_max_bytes_bounds_a_batched_direct_get(js, nc, make_stream):
    """A batch of 6 with max_bytes the size of two messages returns messages 1 and 2, then 204 EOB with 4 pending."""
    payload = b"x" * 100
    stream = await _six(js, make_stream, payload)
    two_messages = 2 * (len(stream.subject("a")) + len(payload))  # every subject has the same length
    body = {"seq": 1, "batch": 6, "max_bytes": two_messages}
    answer = await _direct_replies(nc, stream, body)
    assert (answer.seqs, _eob(answer.end, PENDING, LAST)) == ([1, 2], ("204", "EOB", "4", "2", b"")), (
        f"{body}: max_bytes of two messages' size (subject and payload) bounds the batch to messages [1, 2], then "
        f"204 EOB with Nats-Num-Pending 4 and Nats-Last-Sequence 2; got {answer}, end of batch "
        f"(status, description, pending, last, payload) {_eob(answer.end, PENDING, LAST)}"
    )


@pytest.mark.rule("reads.direct-get-batch-start-time")
async def test_a_batched_direct_get_from_a_start_time_returns_the_messages_from_then(js, nc, make_stream):
    """A batch from message 3's time returns 3 to 6 (with next_by_subj `b`, message 5), then 204 EOB."""
    stream = await _six(js, make_stream)
    third = await _stored_time(nc, stream, 3)  # the server's own nanoseconds: message 3 is at, not after, it
    cases = (
        ({"start_time": third, "batch": 10}, [3, 4, 5, 6]),
        ({"start_time": third, "batch": 10, "next_by_subj": stream.subject("b")}, [5]),
    )
    for body, expected in cases:
        documented = (
            f"a batch from message 3's time returns the messages stored at or after it, {expected}, then 204 EOB"
        )
        await _assert_direct_answer(nc, stream, body, expected, "204", documented)


def _multi_last_end(end: Msg | None) -> tuple[str | None, str | None, str | None, int | None]:
    """The end of a multi_last answer: status, Nats-Num-Pending, Nats-Last-Sequence and Nats-UpTo-Sequence."""
    if end is None:
        return None, None, None, None
    up_to = _header(end, UP_TO)
    return _status(end), _header(end, PENDING), _header(end, LAST), None if up_to is None else int(up_to)


@pytest.mark.rule("reads.direct-get-multi-last")
async def test_multi_last_returns_the_last_message_of_each_subject(js, nc, make_stream):
    """multi_last of `a` and `b` returns 3 and 5; of `*` 3, 4, 5 and 6; then 204 EOB with Nats-UpTo-Sequence."""
    stream = await _six(js, make_stream)
    cases = (
        ({"multi_last": [stream.subject("a"), stream.subject("b")]}, [3, 5]),
        ({"multi_last": [stream.subject("*")]}, [3, 4, 5, 6]),
        ({"multi_last": [stream.subject("d"), stream.subject("a"), stream.subject("none")]}, [3, 6]),
    )
    for body, expected in cases:
        answer = await _direct_replies(nc, stream, body)
        assert (answer.seqs, answer.status) == (expected, "204"), (
            f"{body}: multi_last returns the last message of each subject, in sequence order {expected}, then 204 "
            f"EOB; got {answer}"
        )
        subjects = [_header(m, "Nats-Subject") for m in answer.messages]
        assert subjects == [stream.subject(SIX_SUBJECTS[s - 1]) for s in expected], (
            f"{body}: multi_last returns the last message of each subject, each with its Nats-Subject; got {subjects}"
        )
        _, pending, last, up_to = _multi_last_end(answer.end)
        assert (pending, last) == ("0", str(expected[-1])) and up_to is not None and expected[-1] <= up_to <= 6, (
            f"{body}: multi_last ends with 204 EOB, Nats-Num-Pending 0, Nats-Last-Sequence {expected[-1]} and a "
            f"Nats-UpTo-Sequence from {expected[-1]} to 6; got pending {pending}, last {last}, up to {up_to}"
        )


@pytest.mark.rule("reads.direct-get-multi-last-up-to")
async def test_multi_last_up_to_a_sequence_or_a_time_reads_the_subjects_as_they_were(js, nc, make_stream):
    """multi_last of `a` and `b` up to seq 4, or up to a time between messages 4 and 5, returns 2 and 3."""
    stream = await _six(js, make_stream)
    fourth, fifth = [epoch_seconds(await _stored_time(nc, stream, seq)) for seq in (4, 5)]
    # acked publishes are far more than the microseconds rfc3339 rounds to apart: the midpoint lies between them
    between = rfc3339((fourth + fifth) / 2)
    subjects = [stream.subject("a"), stream.subject("b")]
    for bound in ({"up_to_seq": 4}, {"up_to_time": between}):
        body = {"multi_last": subjects, **bound}
        answer = await _direct_replies(nc, stream, body)
        status, _, _, up_to = _multi_last_end(answer.end)
        assert (answer.seqs, status) == ([2, 3], "204") and up_to is not None and 3 <= up_to <= 4, (
            f"{body}: up to seq 4 (or a time between 4 and 5) subject `b`'s last is 2 and `a`'s 3: documented "
            f"messages [2, 3], then 204 EOB with a Nats-UpTo-Sequence of at most 4; got {answer}, "
            f"Nats-UpTo-Sequence {up_to}"
        )


@pytest.mark.rule("reads.direct-get-multi-last-up-to-time-inclusive")
async def test_multi_last_up_to_a_messages_own_time_includes_it(js, nc, make_stream):
    """multi_last of `a` and `b` up to message 3's own time returns 2 and 3: up_to_time is at or before."""
    stream = await _six(js, make_stream)
    third = await _stored_time(nc, stream, 3)  # the server's own nanoseconds
    body = {"multi_last": [stream.subject("a"), stream.subject("b")], "up_to_time": third}
    documented = (
        "up_to_time reads the last message 'less than or equal to the up to time' (ADR-31), and message 3 "
        "was stored at it: documented messages [2, 3] (b's 2, a's 3), then 204 EOB"
    )
    await _assert_direct_answer(nc, stream, body, [2, 3], "204", documented)


@pytest.mark.rule("reads.direct-get-multi-last-too-many")
async def test_multi_last_matching_more_than_1024_subjects_answers_413(js, nc, make_stream):
    """multi_last matching 1024 subjects returns their 1024 messages; matching 1025, it answers 413 alone."""
    stream = await make_stream(allow_direct=True)
    for n in range(MULTI_LAST_LIMIT):
        await js.publish(stream.subject("k", str(n)), b"v")
    body = {"multi_last": [stream.subject("k", ">")]}
    seqs, status = await _direct_seqs(nc, stream, body)
    assert (len(seqs), status) == (MULTI_LAST_LIMIT, "204"), (
        f"{body} matching {MULTI_LAST_LIMIT} subjects (the documented limit): their {MULTI_LAST_LIMIT} last messages "
        f"then 204 EOB; got {len(seqs)} messages, then status {status}"
    )
    await js.publish(stream.subject("k", "over"), b"v")
    seqs, status = await _direct_seqs(nc, stream, body)
    assert (seqs, status) == ([], "413"), (
        f"{body} matching {MULTI_LAST_LIMIT + 1} subjects, more than the 1024 allowed: documented status 413 and no "
        f"message; got {len(seqs)} messages, then status {status}"
    )


@pytest.mark.rule("reads.direct-get-no-headers")
async def test_a_direct_get_with_no_hdr_returns_the_body_without_headers(js, nc, make_stream):
    """no_hdr returns message 2's body without headers; in a batch too, whose 204 EOB keeps its headers."""
    stream = await _filled(js, make_stream, allow_direct=True)
    answer = await _direct_replies(nc, stream, {"seq": 2, "no_hdr": True})
    found = [(m.data, m.headers) for m in answer.messages]
    assert (found, answer.end) == ([(b"two", None)], None), (
        f"no_hdr: message 2 (stored with an X-Token header) is documented to come as its body alone, no header; "
        f"got {found}{f', then status {answer.status}' if answer.end else ''}"
    )
    body = {"seq": 3, "batch": 10, "no_hdr": True}
    answer = await _direct_replies(nc, stream, body)
    found = [(m.data, m.headers) for m in answer.messages]
    assert (found, answer.status) == ([(b"three", None), (b"four", None)], "204"), (
        f"{body}: no_hdr in a batch: messages 3 and 4 as their bodies alone, no header, then 204 EOB; got {found}, "
        f"then status {answer.status}"
    )
    eob = _eob(answer.end, PENDING, LAST)
    assert eob == ("204", "EOB", "0", "4", b""), (
        f"{body}: the end of a no_hdr batch keeps 'the usual batch control headers' (ADR-52): nothing is left after "
        f"message 4, so Nats-Num-Pending 0 and Nats-Last-Sequence 4; got (status, description, pending, last, "
        f"payload) {eob}"
    )


@pytest.mark.rule("reads.direct-get-needs-allow-direct")
async def test_direct_get_without_allow_direct_has_no_responder(js, nc, make_stream, observe):
    """Without allow_direct, a DIRECT.GET request gets no reply message: no responders or a timeout."""
    stream = await _filled(js, make_stream)
    try:
        msg = await nc.request(f"$JS.API.DIRECT.GET.{stream.name}", b'{"seq":1}', timeout=NO_REPLY_TIMEOUT_S)
    except nats.errors.NoRespondersError:
        observe("no_reply", "no responders")
    except nats.errors.TimeoutError:
        await answering(nc)  # a timeout is the rule's "no reply" only from a server that still answers
        observe("no_reply", "timeout")
    else:
        pytest.fail(f"a stream without allow_direct answered DIRECT.GET: headers {msg.headers}, payload {msg.data!r}")


@pytest.mark.rule("reads.delete-message")
@pytest.mark.parametrize("no_erase", [False, True], ids=["erase", "no-erase"])
async def test_delete_message_removes_exactly_that_message(js, nc, make_stream, no_erase):
    """Deleting sequence 2 and then 1 leaves 3 and 4: a gap is counted, then the first sequence moves."""
    stream = await _filled(js, make_stream)
    request = {"no_erase": True} if no_erase else {}
    assert (await _deleted(nc, stream, 2, **request))["success"] is True
    await _get_refused(nc, stream, NO_MESSAGE, seq=2)
    info = await api(nc, f"$JS.API.STREAM.INFO.{stream.name}")
    state = info["state"]
    assert (state["messages"], state["first_seq"], state.get("num_deleted")) == (3, 1, 1), f"state: {state}"
    assert (await _deleted(nc, stream, 1, **request))["success"] is True
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 3, 4), f"state: {state}"
    assert _seq_and_payload(await _get(nc, stream, seq=3)) == (3, b"three")


@pytest.mark.rule("reads.delete-missing")
async def test_delete_of_a_missing_sequence_is_rejected(js, nc, make_stream):
    """Deleting a removed first (10057) or inner (10043) sequence, or one beyond the last (10057), changes nothing."""
    stream = await _filled(js, make_stream)
    await _deleted(nc, stream, 1)
    await _deleted(nc, stream, 3)
    # below the first and beyond the last: 10057, whose words (`{err}` in the errors table) are nats-server's
    expected = {
        1: DocumentedRefusal(500, 10057),
        3: DocumentedRefusal(400, 10043, "sequence 3 not found"),
        99: DocumentedRefusal(500, 10057),
    }
    for seq, documented in expected.items():
        with pytest.raises(ApiError) as rejected:
            await _delete(nc, stream, seq)
        assert_refused_as_documented(refusal_of(rejected.value), documented, f"deleting missing seq {seq}")
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.first_seq, state.last_seq) == (2, 2, 4), f"state: {state}"


@pytest.mark.rule("reads.delete-denied")
async def test_delete_on_a_deny_delete_stream_is_rejected(js, nc, make_stream):
    """With deny_delete, deleting a message is refused with 500/10057 and the message stays."""
    stream = await _filled(js, make_stream, deny_delete=True)
    with pytest.raises(ApiError) as rejected:
        await _delete(nc, stream, 1)
    assert_refused_as_documented(refusal_of(rejected.value), DocumentedRefusal(500, 10057), "a delete with deny_delete")
    assert _seq_and_payload(await _get(nc, stream, seq=1)) == (1, b"one")
