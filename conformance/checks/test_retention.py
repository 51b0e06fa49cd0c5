"""Interest and WorkQueue retention: when messages go, and which consumers a WorkQueue stream accepts."""

from __future__ import annotations

import nats.errors
import pytest

from jetcheck.conformance.documented_errors import DocumentedRefusal, Refusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import ApiError, api, eventually, stream_state
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio


FETCH_S = 2.0
REMOVAL_S = 2.0
NOT_UNIQUE = DocumentedRefusal(400, 10100)


async def _consumer(nc, stream, name: str, **config) -> dict:
    """A durable consumer created through the API (explicit ack unless told otherwise)."""
    body = {"stream_name": stream.name, "config": {"durable_name": name, "ack_policy": "explicit", **config}}
    return await api(nc, f"$JS.API.CONSUMER.DURABLE.CREATE.{stream.name}.{name}", body)


async def _rejected_consumer(nc, stream, name: str, **config) -> Refusal:
    with pytest.raises(ApiError) as rejected:
        await _consumer(nc, stream, name, **config)
    return refusal_of(rejected.value)


async def _fetch_one(js, stream, durable: str):
    sub = await js.pull_subscribe_bind(durable=durable, stream=stream.name)
    (msg,) = await sub.fetch(1, timeout=FETCH_S)
    return msg


async def _messages_become(nc, stream, count: int) -> bool:
    async def reached() -> bool:
        return (await stream_state(nc, stream.name)).messages == count

    return await eventually(reached, timeout=REMOVAL_S)


@pytest.mark.rule("retention.interest-dropped-without-interest")
async def test_interest_stream_without_consumers_keeps_nothing(js, nc, make_stream):
    """Publishes to an Interest stream without consumers are acknowledged with sequences but not kept."""
    stream = await make_stream(retention="interest")
    seqs = [(await js.publish(stream.subject("a"), b"m")).seq for _ in range(3)]
    assert seqs == [1, 2, 3]
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.last_seq) == (0, 3), f"state: {state}"


@pytest.mark.rule("retention.interest-removed-when-all-acked")
async def test_interest_message_goes_once_every_consumer_acked(js, nc, make_stream, names):
    """A message on an Interest stream with two consumers stays after one ack and goes after both."""
    stream = await make_stream(retention="interest")
    first, second = names.consumer(), names.consumer()
    await _consumer(nc, stream, first)
    await _consumer(nc, stream, second)
    await js.publish(stream.subject("a"), b"m")
    await (await _fetch_one(js, stream, first)).ack_sync()
    assert (await stream_state(nc, stream.name)).messages == 1, "removed after one of two consumers acked"
    pending = await _fetch_one(js, stream, second)
    assert (await stream_state(nc, stream.name)).messages == 1, "removed before the second consumer acked"
    await pending.ack_sync()
    assert await _messages_become(nc, stream, 0), "still stored after both consumers acked"


@pytest.mark.rule("retention.interest-follows-filters")
async def test_interest_is_held_by_matching_consumers_only(js, nc, make_stream, names):
    """With consumers on `a` and `b`, a message on `c` is not kept and `a` goes when its consumer acks."""
    stream = await make_stream(retention="interest")
    on_a, on_b = names.consumer(), names.consumer()
    await _consumer(nc, stream, on_a, filter_subject=stream.subject("a"))
    await _consumer(nc, stream, on_b, filter_subject=stream.subject("b"))
    for token in ("a", "b", "c"):
        await js.publish(stream.subject(token), b"m")
    state = await stream_state(nc, stream.name)
    assert state.subjects == {stream.subject("a"): 1, stream.subject("b"): 1}, f"kept: {state.subjects}"
    await (await _fetch_one(js, stream, on_a)).ack_sync()
    assert await _messages_become(nc, stream, 1), "message on `a` still stored after its only consumer acked"
    assert (await stream_state(nc, stream.name)).subjects == {stream.subject("b"): 1}


@pytest.mark.rule("retention.interest-rollup")
async def test_a_rollup_no_consumer_wants_still_purges_an_interest_stream(js, nc, make_stream, names):
    """On an Interest stream, a Nats-Rollup: all message on a subject no consumer filters purges every earlier one."""
    stream = await make_stream(retention="interest", allow_rollup_hdrs=True)
    await _consumer(nc, stream, names.consumer(), filter_subject=stream.subject("a"))
    await js.publish(stream.subject("a"), b"kept until the rollup")
    await js.publish(stream.subject("b"), b"rollup", headers={"Nats-Rollup": "all"})
    purged = await _messages_become(nc, stream, 0)
    state = await stream_state(nc, stream.name)
    assert purged, (
        f"a Nats-Rollup: all message no consumer is interested in: the docs have it purge the whole stream (its own "
        f"interest aside); {state.messages} message(s) still stored from seq {state.first_seq}"
    )


@pytest.mark.rule("retention.workqueue-removed-on-ack")
async def test_workqueue_message_goes_when_acked(js, nc, make_stream, names):
    """Of two delivered WorkQueue messages, the acknowledged one goes and the other stays."""
    stream = await make_stream(retention="workqueue")
    durable = names.consumer()
    await _consumer(nc, stream, durable)
    await js.publish(stream.subject("a"), b"1")
    await js.publish(stream.subject("b"), b"2")
    sub = await js.pull_subscribe_bind(durable=durable, stream=stream.name)
    first, _second = await sub.fetch(2, timeout=FETCH_S)
    await first.ack_sync()
    assert await _messages_become(nc, stream, 1), "acknowledged WorkQueue message still stored"
    state = await stream_state(nc, stream.name)
    assert (state.first_seq, state.subjects) == (2, {stream.subject("b"): 1}), f"state: {state}"


@pytest.mark.rule("retention.workqueue-max-deliver-stays")
async def test_workqueue_message_past_max_deliver_stays(js, nc, make_stream, names):
    """A WorkQueue message nak'ed on both of its max_deliver 2 deliveries stays stored and is not sent again."""
    stream = await make_stream(retention="workqueue")
    durable = names.consumer()
    await _consumer(nc, stream, durable, max_deliver=2)
    await js.publish(stream.subject("a"), b"m")
    sub = await js.pull_subscribe_bind(durable=durable, stream=stream.name)
    for delivery in (1, 2):
        (msg,) = await sub.fetch(1, timeout=FETCH_S)
        assert msg.metadata.num_delivered == delivery
        await msg.nak()
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=0.5)
    await answering(nc)  # no delivery is the rule's answer only from a server that still answers
    assert (await stream_state(nc, stream.name)).messages == 1


@pytest.mark.rule("retention.interest-max-deliver-stays")
async def test_interest_message_past_one_consumers_max_deliver_stays_when_another_acks(js, nc, make_stream, names):
    """On an Interest stream, a message nak'ed by a max_deliver 1 consumer stays stored after a later consumer acks."""
    stream = await make_stream(retention="interest")
    exhausted, acking = names.consumer(), names.consumer()
    await _consumer(nc, stream, exhausted, max_deliver=1)
    await js.publish(stream.subject("a"), b"m")
    sub = await js.pull_subscribe_bind(durable=exhausted, stream=stream.name)
    (msg,) = await sub.fetch(1, timeout=FETCH_S)
    await msg.nak()
    try:
        again = await sub.fetch(1, timeout=0.5)
    except nats.errors.TimeoutError:  # asked again, it has no delivery left
        await answering(nc)
        again = []
    assert not again, f"max_deliver 1: the nak'ed message was delivered again ({len(again)} more)"
    await _consumer(nc, stream, acking)
    await (await _fetch_one(js, stream, acking)).ack_sync()
    removed = await _messages_become(nc, stream, 0)  # the server removes acked interest messages after the ack
    assert not removed, (
        "a message one consumer had max_deliver (1) times without acking, acked by the other: the docs keep a "
        f"message that reached max_deliver in the stream; it was removed within {REMOVAL_S:g} s of the ack"
    )


@pytest.mark.rule("retention.workqueue-explicit-ack")
@pytest.mark.parametrize(("ack_policy", "push"), [("none", True), ("all", False), ("all", True)])
async def test_workqueue_consumer_without_explicit_ack_is_rejected(nc, make_stream, names, ack_policy, push):
    """A WorkQueue consumer with ack none (push) or all is refused with 400/10098."""
    stream = await make_stream(retention="workqueue")
    extra = {"deliver_subject": names.subject("deliver")} if push else {}
    rejection = await _rejected_consumer(nc, stream, names.consumer(), ack_policy=ack_policy, **extra)
    asked = f"a WorkQueue {'push' if push else 'pull'} consumer with ack {ack_policy}"
    assert_refused_as_documented(rejection, DocumentedRefusal(400, 10098), asked)


@pytest.mark.rule("retention.workqueue-pull-ack-none")
async def test_workqueue_pull_consumer_with_ack_none_is_rejected_with_10084(nc, make_stream, names, observe):
    """A pull consumer with ack none on a WorkQueue stream is refused with 400/10084."""
    stream = await make_stream(retention="workqueue")
    code, err_code, description = await _rejected_consumer(nc, stream, names.consumer(), ack_policy="none")
    observe("description", description)  # its words changed in 2.11.0 (the rule's `varies`); the codes did not
    assert (code, err_code) == (400, 10084), f"refused with {code}/{err_code} ({description}), not 400/10084"


@pytest.mark.rule("retention.workqueue-deliver-all")
@pytest.mark.parametrize("deliver_policy", ["new", "last", "last_per_subject"])
async def test_workqueue_consumer_must_deliver_all(nc, make_stream, names, deliver_policy):
    """A WorkQueue consumer with a deliver policy other than all is refused with 400/10101."""
    stream = await make_stream(retention="workqueue")
    extra = {"filter_subject": stream.subject("a")} if deliver_policy == "last_per_subject" else {}
    rejection = await _rejected_consumer(nc, stream, names.consumer(), deliver_policy=deliver_policy, **extra)
    assert_refused_as_documented(
        rejection, DocumentedRefusal(400, 10101), f"a WorkQueue consumer delivering {deliver_policy}"
    )


@pytest.mark.rule("retention.workqueue-one-unfiltered")
async def test_workqueue_accepts_one_unfiltered_consumer(nc, make_stream, names):
    """A second unfiltered consumer on a WorkQueue stream is refused with 400/10099."""
    stream = await make_stream(retention="workqueue")
    await _consumer(nc, stream, names.consumer())
    rejection = await _rejected_consumer(nc, stream, names.consumer())
    assert_refused_as_documented(rejection, DocumentedRefusal(400, 10099), "a second unfiltered WorkQueue consumer")


@pytest.mark.rule("retention.workqueue-overlapping-filters")
async def test_workqueue_rejects_filters_that_contain_each_other(nc, make_stream, names):
    """WorkQueue filters must be disjoint: a.> against a.b, or any filter next to an unfiltered one, is refused."""
    stream = await make_stream(retention="workqueue")
    await _consumer(nc, stream, names.consumer(), filter_subject=stream.subject("a", "b"))
    await _consumer(nc, stream, names.consumer(), filter_subject=stream.subject("c", "*"))
    for overlapping in (stream.subject("a", ">"), stream.subject("a", "b"), stream.subject("c", "d")):
        rejection = await _rejected_consumer(nc, stream, names.consumer(), filter_subject=overlapping)
        assert_refused_as_documented(rejection, NOT_UNIQUE, f"a consumer filtered on {overlapping}")
    unfiltered = await make_stream(retention="workqueue")
    await _consumer(nc, unfiltered, names.consumer())
    rejection = await _rejected_consumer(nc, unfiltered, names.consumer(), filter_subject=unfiltered.subject("a"))
    assert_refused_as_documented(rejection, NOT_UNIQUE, "a filtered consumer next to an unfiltered one")


@pytest.mark.rule("retention.workqueue-partially-overlapping-filters")
async def test_workqueue_rejects_partially_overlapping_filters(nc, make_stream, names):
    """WorkQueue filters a.*.c and a.b.* overlap on a.b.c: the second is refused, also among filter_subjects."""
    stream = await make_stream(retention="workqueue")
    await _consumer(nc, stream, names.consumer(), filter_subject=stream.subject("a", "*", "c"))
    rejection = await _rejected_consumer(nc, stream, names.consumer(), filter_subject=stream.subject("a", "b", "*"))
    assert_refused_as_documented(rejection, NOT_UNIQUE, "a consumer filtered on a.b.* next to a.*.c")
    several = [stream.subject("x"), stream.subject("*", "b", "c")]
    rejection = await _rejected_consumer(nc, stream, names.consumer(), filter_subjects=several)
    assert_refused_as_documented(rejection, NOT_UNIQUE, "filter_subjects with *.b.c next to a.*.c")
    await _consumer(nc, stream, names.consumer(), filter_subjects=[stream.subject("x"), stream.subject("a", "b", "d")])
