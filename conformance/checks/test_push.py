"""Push consumers: durable, ephemeral, and shared by a queue group. The client rules go through the client adapter
(--client); the durable-resumes server rule uses the suite's own nats-py connection."""

from __future__ import annotations

import asyncio
import time

import nats.errors
import pytest

from jetcheck.conformance.checks.answers import who
from jetcheck.conformance.clients.base import PushOptions, Unsupported, connected, refusal
from jetcheck.conformance.jsapi import api, assert_removed_once_inactive, eventually
from jetcheck.conformance.silence import answering, deliveries

pytestmark = pytest.mark.asyncio

RECEIVE_TIMEOUT_S = 1.0
QUIET_S = 0.3  # how long a member must stay silent once every message has been received


async def consumer_config(nc, stream: str, name: str) -> dict:
    return (await api(nc, f"$JS.API.CONSUMER.INFO.{stream}.{name}"))["config"]


async def received(nc, sub, count: int) -> list:
    """The next `count` messages of `sub` (on connection `nc`); a missing one fails the check with what did arrive,
    while the server still answers."""
    messages = []
    for _ in range(count):
        try:
            messages.append(await sub.next_msg(timeout=RECEIVE_TIMEOUT_S))
        except nats.errors.TimeoutError:
            break  # judged below, outside the handler
    if len(messages) < count:
        await answering(nc)
        got = [m.data for m in messages]
        pytest.fail(f"expected {count} messages, got {got} and nothing more within {RECEIVE_TIMEOUT_S}s")
    return messages


async def publish_numbered(js, subject: str, numbers: range) -> None:
    for n in numbers:
        await js.publish(subject, str(n).encode())


async def client_push(client, session, stream: str, subject: str, options: PushOptions):
    """The client's push consumer; its absence is a failure: the server documents push consumers."""
    try:
        return await session.push(stream, subject, options)
    except Unsupported as exc:
        pytest.fail(f"push consumers are not implemented by {who(client)} ({exc}); the server documents them")


async def quiet(session, sub) -> list[bytes]:
    """Every payload `sub` delivers until it has been silent for QUIET_S, while `session` still answers."""
    while True:
        try:
            await sub.inbox.next(QUIET_S)
        except TimeoutError:
            break
    await answering(session)
    return [d.payload for d in sub.inbox.deliveries]


async def delivered(client, session, sub, count: int) -> list[bytes]:
    """The payloads `sub` delivered: `count` of them, then nothing more for QUIET_S (a duplicate would show)."""
    await deliveries(sub, count, RECEIVE_TIMEOUT_S * count, session)
    got = await quiet(session, sub)
    if len(got) != count:
        pytest.fail(f"{who(client)}'s push consumer delivered {got}: expected {count} messages, each once")
    return got


@pytest.mark.rule("push.durable-config")
async def test_durable_subscribe_creates_a_named_push_consumer(client, target, js, nc, make_stream, names):
    """The client's durable push consumer d has a deliver subject and the filter, and delivers in order."""
    stream = await make_stream()
    durable = names.consumer()
    await publish_numbered(js, stream.subject("a"), range(1, 4))
    async with connected(client, target.url, target.credentials) as s:
        sub = await client_push(client, s, stream.name, stream.subject("a"), PushOptions(durable=durable))
        assert await delivered(client, s, sub, 3) == [b"1", b"2", b"3"]
        config = await consumer_config(nc, stream.name, durable)
        got = (config.get("durable_name"), bool(config.get("deliver_subject")), config.get("filter_subject"))
        assert got == (durable, True, stream.subject("a")), f"{who(client)}'s durable push consumer: {config}"


@pytest.mark.rule("push.durable-resumes")
async def test_durable_push_consumer_resumes_after_the_last_ack(js, nc, target, make_stream, names):
    """After the first subscriber's connection closes, a new subscription resumes after its acknowledged messages."""
    stream = await make_stream()
    subject, durable = stream.subject("a"), names.consumer()
    await publish_numbered(js, subject, range(1, 3))
    first = await target.connect()
    try:
        sub = await first.jetstream().subscribe(subject, durable=durable, manual_ack=True)
        for message in await received(first, sub, 2):
            try:
                await message.ack_sync()
            except nats.errors.NoRespondersError:
                pytest.fail(f"an ack reaches the consumer that delivered the message; {message.data!r}'s reached none")
    finally:
        await first.close()

    async def unbound() -> bool:
        return not (await api(nc, f"$JS.API.CONSUMER.INFO.{stream.name}.{durable}")).get("push_bound", False)

    assert await eventually(unbound, timeout=5), "the consumer stayed push-bound after its connection closed"
    await publish_numbered(js, subject, range(3, 5))
    sub = await js.subscribe(subject, durable=durable, manual_ack=True)
    try:
        messages = await received(nc, sub, 2)
        assert [m.data for m in messages] == [b"3", b"4"], "the durable did not resume after its last ack"
        try:
            extra = await sub.next_msg(timeout=QUIET_S)
        except nats.errors.TimeoutError:
            await answering(nc)  # silence is the rule's answer only from a server that still answers
            return
        pytest.fail(f"an acknowledged message came again: {extra.data!r}")
    finally:
        await sub.unsubscribe()


@pytest.mark.rule("push.ephemeral")
async def test_ephemeral_push_consumer_goes_once_unsubscribed(client, target, js, nc, make_stream, observe):
    """The client's ephemeral push consumer has no durable_name, and is removed after inactive_threshold, not
    before."""
    stream = await make_stream()
    await publish_numbered(js, stream.subject("a"), range(1, 3))
    # long enough that even a loaded machine looks again well before it: a removal sooner can only be seen then
    threshold = 2.0
    async with connected(client, target.url, target.credentials) as s:
        sub = await client_push(client, s, stream.name, stream.subject("a"), PushOptions(inactive_threshold=threshold))
        assert await delivered(client, s, sub, 2) == [b"1", b"2"]
        name = sub.inbox.deliveries[0].consumer
        config = await consumer_config(nc, stream.name, name)
        assert not config.get("durable_name") and config.get("deliver_subject"), (
            f"{who(client)}'s ephemeral push consumer: {config}"
        )
        stopped = time.monotonic()  # before the unsubscribe: the consumer cannot have been inactive longer
        await sub.stop()

    await assert_removed_once_inactive(
        nc,
        stream.name,
        name,
        threshold,
        stopped,
        observe,
        lambda inactive_at_most: (
            f"{who(client)}'s ephemeral push consumer was removed at most "
            f"{inactive_at_most:.3f} s after its subscription stopped; its inactive_threshold is {threshold} s"
        ),
    )


@pytest.mark.rule("push.queue-group")
async def test_queue_group_members_share_the_messages(client, target, js, nc, make_stream, names, observe):
    """Two members of a queue share one consumer with deliver_group; each message reaches exactly one of them."""
    stream = await make_stream()
    subject, queue = stream.subject("a"), names.consumer()
    async with connected(client, target.url, target.credentials) as s:
        members = [await client_push(client, s, stream.name, subject, PushOptions(durable=queue, queue=queue))]
        config = await consumer_config(nc, stream.name, queue)
        assert config.get("deliver_group") == queue, (
            f"a queue's push consumer has the queue as its deliver_group; {who(client)}'s queue {queue} made {config}"
        )
        members.append(await client_push(client, s, stream.name, subject, PushOptions(durable=queue, queue=queue)))
        total = 20
        await publish_numbered(js, subject, range(total))
        # Each member is read until it has been silent for QUIET_S, so a duplicate would still be seen.
        shares = await asyncio.gather(*(quiet(s, member) for member in members))
        observe("measured_shares", [len(share) for share in shares])
        together = sorted(shares[0] + shares[1], key=int)
        assert together == [str(n).encode() for n in range(total)], (
            f"{who(client)}'s queue members received {shares}: each message must reach exactly one member"
        )


@pytest.mark.rule("push.queue-group-enforced")
async def test_subscriptions_must_match_the_consumers_deliver_group(client, target, nc, make_stream, names, observe):
    """Binding a grouped consumer without its queue, and an ungrouped one with a queue, are refused."""
    stream = await make_stream()
    subject, queue, ungrouped = stream.subject("a"), names.consumer(), names.consumer()
    async with connected(client, target.url, target.credentials) as s:
        await client_push(client, s, stream.name, subject, PushOptions(durable=queue, queue=queue))
        await client_push(client, s, stream.name, subject, PushOptions(durable=ungrouped))
        wrong, refusals = [], []
        for durable in (queue, ungrouped):
            # The mismatch is asked of the group the consumer has (the server's part is push.queue-group's).
            group = (await consumer_config(nc, stream.name, durable)).get("deliver_group")
            wanted = None if group else queue
            asked = f"{durable} (deliver_group {group}) with queue {wanted}"
            refused = await refusal(s.push(stream.name, subject, PushOptions(durable=durable, queue=wanted)))
            if refused is None:
                wrong.append(f"accepted {asked}")
            elif isinstance(refused, Unsupported):
                wrong.append(f"cannot be asked to bind {asked}: {refused}")
            elif refused.kind != "invalid":  # the client's own refusal, before any subscription (PROTOCOL.md)
                wrong.append(f"refused {asked} for another reason: {refused.kind}: {refused}")
            else:
                refusals.append(str(refused))
        observe("refusals", refusals)
        assert not wrong, (
            "a push subscription must match its consumer's deliver_group (nats.go PR #794, nats-py's subscribe): "
            f"the client refuses one that does not; {who(client)} {'; '.join(wrong)}"
        )
