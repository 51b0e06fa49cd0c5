"""The read paths of a Key-Value bucket as ADR-8 documents them on the wire, each read into kv_model's terms.

A watch, the key list and a key's history are ADR-8's consumers, created here by raw request: an ephemeral push
consumer on the bucket stream (last_per_subject for a watch and the key list, headers only for the key list, deliver
all on the key's subject for a history). Its initial data is what the server says it holds when it answers the
create: the deliveries it already made plus those pending; the end of initial data is the delivery whose reply says
nothing is pending (ADR-8 Watchers Implementation Detail). Counting from the create reply, not from a later consumer
info, keeps the reading free of the race between deliveries and API replies that nats-py's own watcher has (see
test_kv.DeliveriesBehindInfo).
"""

from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass

import nats.errors
import pytest
from nats.aio.client import Client

from jetcheck.conformance.jsapi import NS, ApiError, api, create_consumer, message_headers, stream_state
from jetcheck.conformance.kv_model import PUT, Entry
from jetcheck.conformance.silence import answering

KV_OPERATION = "KV-Operation"
NO_MESSAGE = 10037  # JSNoMessageFoundErr
DELIVERY_WAIT_S = 2.0
CONSUMER_IDLE_S = 5  # a consumer left behind by a failed check goes away by itself


def operation_of(headers: dict[str, str] | None) -> str:
    """ADR-8's operation of a message: its KV-Operation header, PUT without one."""
    return (headers or {}).get(KV_OPERATION, PUT)


@dataclass(frozen=True)
class ConsumerRead:
    """What an ADR-8 consumer delivered as its initial data, and the pending count each delivery's reply carried."""

    entries: list[Entry]
    pending: list[int]

    @property
    def ended(self) -> bool:
        """Whether the initial data ended as ADR-8 says: at once when there was none, else at a delivery whose reply
        says nothing is pending."""
        return not self.pending or self.pending[-1] == 0


async def consumer_read(
    nc: Client, bucket: str, keys: str, deliver_policy: str, headers_only: bool = False
) -> ConsumerRead:
    """The initial data of an ephemeral push consumer of KV_<bucket> on $KV.<bucket>.<keys>: as many deliveries as
    the create reply says were delivered or pending. Fewer within DELIVERY_WAIT_S fail the check while the server
    answers."""
    stream, prefix = f"KV_{bucket}", f"$KV.{bucket}."
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    config = {
        "deliver_subject": inbox,
        "deliver_policy": deliver_policy,
        "ack_policy": "none",
        "filter_subject": prefix + keys,
        "headers_only": headers_only,
        "inactive_threshold": CONSUMER_IDLE_S * NS,
        "mem_storage": True,
    }
    info: dict = {}
    try:
        info = await create_consumer(nc, stream, **config)
        expected = info["delivered"]["consumer_seq"] + info["num_pending"]
        entries, pending = [], []
        while len(entries) < expected:
            try:
                msg = await sub.next_msg(timeout=DELIVERY_WAIT_S)
            except nats.errors.TimeoutError:
                break  # judged below, outside the handler
            meta = msg.metadata
            value = b"" if headers_only else msg.data
            entries.append(Entry(msg.subject[len(prefix) :], meta.sequence.stream, operation_of(msg.headers), value))
            pending.append(meta.num_pending)
        if len(entries) < expected:
            await answering(nc)
            shown = ", ".join(map(str, entries))
            pytest.fail(
                f"ADR-8: a {deliver_policy} consumer of {prefix}{keys} delivers the {expected} messages its create "
                f"reply counted; it delivered [{shown}] and then nothing for {DELIVERY_WAIT_S} s"
            )
        return ConsumerRead(entries, pending)
    finally:
        await sub.unsubscribe()
        if info:
            # a consumer that is gone already, or a delete left unanswered, is no matter: it expires by itself
            with contextlib.suppress(ApiError, nats.errors.TimeoutError):
                await api(nc, f"$JS.API.CONSUMER.DELETE.{stream}.{info['name']}")


async def last_by_subject(nc: Client, bucket: str, key: str) -> Entry | str | None:
    """STREAM.MSG.GET with last_by_subj: the key's latest message, markers included; None when it has none."""
    try:
        reply = await api(nc, f"$JS.API.STREAM.MSG.GET.KV_{bucket}", {"last_by_subj": f"$KV.{bucket}.{key}"})
    except ApiError as error:
        if error.err_code == NO_MESSAGE:
            return None
        return f"refused: {error}"  # neither the message nor 'no message found': shown as the answer it is
    message = reply["message"]
    operation = operation_of(message_headers(message))
    return Entry(key, message["seq"], operation, base64.b64decode(message.get("data") or b""))


NOT_SERVED = "no responders: the bucket stream serves no direct gets"


async def direct_last(nc: Client, bucket: str, key: str) -> Entry | str | None:
    """DIRECT.GET.KV_b.$KV.b.<key>: the key's latest message, markers included; None for a 404 status, NOT_SERVED
    when nothing answers (a bucket made with allow_direct answers every direct get)."""
    try:
        reply = await nc.request(f"$JS.API.DIRECT.GET.KV_{bucket}.$KV.{bucket}.{key}", b"", timeout=5)
    except nats.errors.NoRespondersError:
        return NOT_SERVED
    headers = reply.headers or {}
    if headers.get("Status") == "404":
        return None
    return Entry(key, int(headers.get("Nats-Sequence", "0")), operation_of(headers), reply.data)


async def subject_counts(nc: Client, bucket: str) -> tuple[dict[str, int], int, int, int]:
    """The bucket stream's messages per key, and its messages, first and last sequence (stream info)."""
    state = await stream_state(nc, f"KV_{bucket}")
    prefix = f"$KV.{bucket}."
    counts = {subject[len(prefix) :]: n for subject, n in state.subjects.items()}
    return counts, state.messages, state.first_seq, state.last_seq
