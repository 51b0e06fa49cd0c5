"""Pull requests on `$JS.API.CONSUMER.MSG.NEXT`: batch, max_bytes, expires, no_wait and every status they can end with.

Requests are sent raw from an inbox and status headers read exactly, as ADR-13 and ADR-37 describe them.
"""

from __future__ import annotations

from typing import Any

import pytest

from jetcheck.conformance.jsapi import NS, PullReply, RawPull, api, consumer_info, create_consumer, eventually, pull
from jetcheck.versions import parse_version

pytestmark = pytest.mark.asyncio

MS = 1_000_000
PENDING_MSGS = "Nats-Pending-Messages"
PENDING_BYTES = "Nats-Pending-Bytes"


async def _stream_with(js, make_stream, count: int, payload: bytes = b"x"):
    stream = await make_stream()
    for _ in range(count):
        await js.publish(stream.subject("a"), payload)
    return stream


async def _consumer(nc, names, stream, **config: Any) -> str:
    name = names.consumer()
    await create_consumer(nc, stream.name, durable_name=name, **{"ack_policy": "explicit", **config})
    return name


def _status(reply: PullReply) -> tuple[str, str]:
    return (reply.status.code, reply.status.description) if reply.status else ("", "")


def _assert_documented_status(reply: PullReply, code: str, description: str, *, no_messages: bool = False) -> None:
    """The pull ended with the documented status `code description` (and, with `no_messages`, brought nothing)."""
    assert (not no_messages or not reply.messages) and _status(reply) == (code, description), (
        f"documented status {code} {description}; got {_status(reply)}"
    )


@pytest.mark.rule("pull.empty-body-one")
async def test_empty_request_delivers_exactly_one_message(nc, js, names, make_stream):
    """An empty pull request delivers one message and is then done."""
    stream = await _stream_with(js, make_stream, 3)
    consumer = await _consumer(nc, names, stream)
    # No expires: the request ends by its batch; a short wait shows no second delivery came.
    reply = await pull(nc, stream.name, consumer, None, wait=0.5)
    assert len(reply.messages) == 1, f"an empty request delivered {len(reply.messages)} messages"
    info = await consumer_info(nc, stream.name, consumer)
    assert (info["delivered"]["stream_seq"], info["num_waiting"]) == (1, 0), f"after the request: {info}"


@pytest.mark.rule("pull.batch")
async def test_batch_request_delivers_exactly_batch_messages(nc, js, names, make_stream):
    """A pull for batch 3 with 5 available delivers exactly 3 and is then done."""
    stream = await _stream_with(js, make_stream, 5)
    consumer = await _consumer(nc, names, stream)
    reply = await pull(nc, stream.name, consumer, {"batch": 3, "expires": 2 * NS}, wait=0.5)
    assert len(reply.messages) == 3, f"batch 3 delivered {len(reply.messages)} (status {_status(reply)})"
    assert [m.metadata.sequence.stream for m in reply.messages] == [1, 2, 3]
    info = await consumer_info(nc, stream.name, consumer)
    assert (info["num_pending"], info["num_waiting"]) == (2, 0), f"after the batch: {info}"


def _size(msg: Any) -> int:
    """A delivery's size as the server counts it against max_bytes: subject, ack reply, headers and payload.

    The messages of these checks are published without headers, so the header block counts 0."""
    assert not msg.headers, "the size of a delivery with headers is not known here"
    return len(msg.subject) + len(msg.reply) + len(msg.data)


@pytest.mark.rule("pull.max-bytes")
async def test_max_bytes_bounds_delivery_and_ends_with_409(nc, js, names, make_stream, observe):
    """With max_bytes 350 and 100-byte messages, at most 3 come, then 409 Message Size Exceeds MaxBytes."""
    max_bytes = 350
    stream = await _stream_with(js, make_stream, 10, payload=b"p" * 100)
    consumer = await _consumer(nc, names, stream)
    reply = await pull(nc, stream.name, consumer, {"batch": 10, "max_bytes": max_bytes, "expires": 2 * NS}, wait=1.5)
    delivered, used = len(reply.messages), sum(_size(m) for m in reply.messages)
    observe("delivered", [delivered, used])
    assert 1 <= delivered <= 3 and used <= max_bytes, f"max_bytes {max_bytes} let {delivered} ({used} bytes) through"
    if used == max_bytes:
        # server/consumer.go: a request whose max_bytes is used up exactly is complete and ends without a status.
        assert reply.status is None, f"status {_status(reply)} after an exact fit"
    else:
        _assert_documented_status(reply, "409", "Message Size Exceeds MaxBytes")
        pending = (reply.status.headers.get(PENDING_MSGS), reply.status.headers.get(PENDING_BYTES))
        assert pending == (str(10 - delivered), str(max_bytes - used)), f"pending headers {reply.status.headers}"
    # A first message larger than max_bytes: nothing is delivered, the same status ends the request.
    too_small = await pull(nc, stream.name, consumer, {"batch": 1, "max_bytes": 50, "expires": 2 * NS}, wait=1.5)
    assert not too_small.messages and _status(too_small) == ("409", "Message Size Exceeds MaxBytes"), (
        f"documented status 409 Message Size Exceeds MaxBytes for a first message above max_bytes; got "
        f"{_status(too_small)} after {len(too_small.messages)} messages"
    )


@pytest.mark.rule("pull.expires-timeout")
async def test_expired_request_ends_with_408_and_pending_headers(nc, js, names, make_stream, observe):
    """An unfilled request ends at expires with 408 Request Timeout and what is left of batch and max_bytes."""
    stream = await _stream_with(js, make_stream, 2)
    consumer = await _consumer(nc, names, stream)
    reply = await pull(nc, stream.name, consumer, {"batch": 5, "max_bytes": 100_000, "expires": 300 * MS}, wait=2.0)
    assert len(reply.messages) == 2, f"the request delivered {len(reply.messages)} of the 2 stored messages"
    _assert_documented_status(reply, "408", "Request Timeout")
    headers = reply.status.headers
    observe("headers", headers)
    assert headers.get(PENDING_MSGS) == "3", f"{PENDING_MSGS} should be the 3 left of batch 5: {headers}"
    assert 0 < int(headers.get(PENDING_BYTES, "0")) < 100_000, f"{PENDING_BYTES} should be max_bytes left: {headers}"
    empty = await pull(nc, stream.name, consumer, {"batch": 4, "expires": 300 * MS}, wait=2.0)
    _assert_documented_status(empty, "408", "Request Timeout", no_messages=True)
    assert (empty.status.headers.get(PENDING_MSGS), empty.status.headers.get(PENDING_BYTES)) == ("4", "0")


@pytest.mark.rule("pull.no-wait-empty")
async def test_no_wait_with_nothing_pending_is_answered_404(nc, js, names, make_stream):
    """A no_wait request with nothing to deliver ends at once with 404 No Messages."""
    stream = await make_stream()
    consumer = await _consumer(nc, names, stream)
    reply = await pull(nc, stream.name, consumer, {"batch": 1, "no_wait": True}, wait=1.0)
    _assert_documented_status(reply, "404", "No Messages", no_messages=True)


def _partial_no_wait_status(version: str) -> tuple[str, str]:
    v = parse_version(version)
    if parse_version("2.11.11") <= v < parse_version("2.12.0") or v >= parse_version("2.12.2"):
        return "404", "No Messages"
    return "408", "Request Timeout"


@pytest.mark.rule("pull.no-wait-partial")
async def test_no_wait_delivers_what_is_available_then_ends(nc, js, names, make_stream, expected_release, observe):
    """A no_wait request for 5 with 2 available delivers the 2 and ends at once with its version's status."""
    stream = await _stream_with(js, make_stream, 2)
    consumer = await _consumer(nc, names, stream)
    reply = await pull(nc, stream.name, consumer, {"batch": 5, "no_wait": True}, wait=1.0)
    observe("status", list(_status(reply)))
    assert len(reply.messages) == 2, f"no_wait delivered {len(reply.messages)} of the 2 available"
    expected = _partial_no_wait_status(expected_release)
    assert _status(reply) == expected, (
        f"as nats-server {expected_release}: expected {expected} within 1s, got {_status(reply)}"
    )


@pytest.mark.rule("pull.max-waiting")
async def test_requests_beyond_max_waiting_are_refused_409(nc, names, make_stream):
    """Pull consumers default max_waiting to 512; with max_waiting 1 a second waiting request gets 409."""
    stream = await make_stream()
    default = await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit")
    assert default["config"].get("max_waiting") == 512, f"default max_waiting {default['config'].get('max_waiting')}"
    consumer = await _consumer(nc, names, stream, max_waiting=1)
    waiting = await RawPull(nc, stream.name, consumer).send({"batch": 1, "expires": 3 * NS})
    try:
        second = await pull(nc, stream.name, consumer, {"batch": 1, "expires": 3 * NS}, wait=1.0)
    finally:
        await waiting.close()
    _assert_documented_status(second, "409", "Exceeded MaxWaiting")


@pytest.mark.rule("pull.max-request-batch")
async def test_batch_above_max_batch_is_refused_409(nc, js, names, make_stream):
    """A request for batch 3 to a consumer with max_batch 2 gets 409 Exceeded MaxRequestBatch of 2."""
    stream = await _stream_with(js, make_stream, 3)
    consumer = await _consumer(nc, names, stream, max_batch=2)
    reply = await pull(nc, stream.name, consumer, {"batch": 3, "expires": 500 * MS}, wait=1.0)
    _assert_documented_status(reply, "409", "Exceeded MaxRequestBatch of 2", no_messages=True)


@pytest.mark.rule("pull.max-request-expires")
async def test_expires_above_max_expires_is_refused_409(nc, names, make_stream):
    """A request expiring in 2s to a consumer with max_expires 1s gets 409 Exceeded MaxRequestExpires of 1s."""
    stream = await make_stream()
    consumer = await _consumer(nc, names, stream, max_expires=1 * NS)
    reply = await pull(nc, stream.name, consumer, {"batch": 1, "expires": 2 * NS}, wait=1.0)
    _assert_documented_status(reply, "409", "Exceeded MaxRequestExpires of 1s")


@pytest.mark.rule("pull.max-request-max-bytes")
async def test_max_bytes_above_the_consumers_is_refused_409(nc, js, names, make_stream):
    """A request with max_bytes 200 to a consumer with max_bytes 100 gets 409 Exceeded MaxRequestMaxBytes of 100."""
    stream = await _stream_with(js, make_stream, 1)
    consumer = await _consumer(nc, names, stream, max_bytes=100)
    reply = await pull(nc, stream.name, consumer, {"batch": 1, "max_bytes": 200, "expires": 500 * MS}, wait=1.0)
    _assert_documented_status(reply, "409", "Exceeded MaxRequestMaxBytes of 100", no_messages=True)


@pytest.mark.rule("pull.consumer-deleted")
async def test_waiting_request_ends_409_when_the_consumer_is_deleted(nc, names, make_stream):
    """Deleting a consumer ends its waiting pull request with 409 Consumer Deleted."""
    stream = await make_stream()
    consumer = await _consumer(nc, names, stream)
    waiting = await RawPull(nc, stream.name, consumer).send({"batch": 1, "expires": 5 * NS})

    async def is_waiting() -> bool:  # the server queues a pull request before the consumer takes it
        return (await consumer_info(nc, stream.name, consumer))["num_waiting"] == 1

    try:
        assert await eventually(is_waiting, timeout=5), "the pull request never showed as waiting on the consumer"
        await api(nc, f"$JS.API.CONSUMER.DELETE.{stream.name}.{consumer}")
        reply = await waiting.collect(wait=3.0)
    finally:
        await waiting.close()
    _assert_documented_status(reply, "409", "Consumer Deleted")


@pytest.mark.rule("pull.push-based")
async def test_pull_request_to_a_push_consumer_is_refused_409(nc, names, make_stream):
    """A pull request to a push consumer gets 409 Consumer is push based."""
    stream = await make_stream()
    consumer = await _consumer(nc, names, stream, deliver_subject=names.subject("push"))
    reply = await pull(nc, stream.name, consumer, {"batch": 1, "expires": 500 * MS}, wait=1.0)
    _assert_documented_status(reply, "409", "Consumer is push based")


@pytest.mark.rule("pull.bad-request")
async def test_unreadable_request_is_refused_400(nc, js, names, make_stream):
    """A request whose batch is not a number gets 400 'Bad Request - <reason>'."""
    stream = await _stream_with(js, make_stream, 1)
    consumer = await _consumer(nc, names, stream)
    reply = await pull(nc, stream.name, consumer, b'{"batch": "three"}', wait=1.0)
    code, description = _status(reply)
    documented = "documented status 400 'Bad Request - <reason>'"
    assert not reply.messages and code == "400", f"{documented}; got {(code, description)}"
    assert description.startswith("Bad Request - ") and len(description) > len("Bad Request - "), (
        f"{documented}; got {(code, description)}"
    )
