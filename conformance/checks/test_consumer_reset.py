"""Resetting a consumer's delivery state (ADR-60's CONSUMER.RESET, nats-server 2.14)."""

from __future__ import annotations

from typing import Any

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import api, create_consumer, publish_raw, pull

pytestmark = pytest.mark.asyncio

ADR60 = "ADR-60"
RESET = "$JS.API.CONSUMER.RESET.{}.{}"
RESET_TYPE = "io.nats.jetstream.api.v1.consumer_reset_response"
INVALID_RESET = (400, 10204)


async def _stream_of(nc, make_stream, count: int):
    stream = await make_stream()
    for n in range(count):
        await publish_raw(nc, stream.subject("a"), f"m{n}".encode())
    return stream


async def _next(nc, stream, consumer: str) -> tuple[int, int] | None:
    """(stream sequence, delivery sequence) of the consumer's next delivery; None when none came within 2 s."""
    reply = await pull(nc, stream.name, consumer, {"batch": 1, "expires": 2_000_000_000}, wait=2.5, messages=1)
    if not reply.messages:
        return None
    sequence = reply.messages[0].metadata.sequence
    return sequence.stream, sequence.consumer


def _state(reply: dict[str, Any]) -> dict[str, Any]:
    """The delivery state a reset answers with: reset_seq, delivered and ack floor (consumer, stream), ack pending."""
    delivered, floor = reply.get("delivered") or {}, reply.get("ack_floor") or {}
    return {
        "reset_seq": reply.get("reset_seq"),
        "delivered": (delivered.get("consumer_seq"), delivered.get("stream_seq")),
        "ack_floor": (floor.get("consumer_seq"), floor.get("stream_seq")),
        "num_ack_pending": reply.get("num_ack_pending"),
    }


def _reset_state(seq: int) -> dict[str, Any]:
    """The state ADR-60 documents after a reset to `seq`: nothing delivered, the ack floor just below it."""
    return {"reset_seq": seq, "delivered": (0, seq - 1), "ack_floor": (0, seq - 1), "num_ack_pending": 0}


async def _two_acked_of_three(nc, make_stream, names) -> tuple[Any, str]:
    """A stream of 5 messages and a pull consumer that was delivered 3 of them and acked the first 2."""
    stream = await _stream_of(nc, make_stream, 5)
    consumer = names.consumer()
    await create_consumer(nc, stream.name, durable_name=consumer, ack_policy="explicit")
    reply = await pull(nc, stream.name, consumer, {"batch": 3, "expires": 2_000_000_000}, wait=2.5, messages=3)
    assert len(reply.messages) == 3, f"a pull of 3 from a stream of 5 brings 3 messages; it brought {reply}"
    for msg in reply.messages[:2]:
        await nc.request(msg.reply, b"+ACK", timeout=2)
    return stream, consumer


@pytest.mark.rule("consumers.reset-ack-floor")
async def test_an_empty_reset_restarts_delivery_above_the_ack_floor(nc, make_stream, names):
    """A consumer delivered 3 and acked 2 of 5, reset with an empty body: reset_seq 3, next delivery 3 as delivery 1."""
    stream, consumer = await _two_acked_of_three(nc, make_stream, names)
    reply = await api(nc, RESET.format(stream.name, consumer))
    got = {"type": reply.get("type"), "config": bool(reply.get("config")), **_state(reply)}
    wanted = {"type": RESET_TYPE, "config": True, **_reset_state(3)}
    assert got == wanted, (
        f"{ADR60}: an empty reset keeps the ack floor's stream sequence and resets the rest, answering the consumer "
        f"with reset_seq one above the ack floor ({wanted}); it answered {got}"
    )
    delivered = await _next(nc, stream, consumer)
    assert delivered == (3, 1), (
        f"{ADR60}: an empty reset keeps the ack floor's stream sequence: the next delivery is message 3 with delivery "
        f"sequence 1; it was (stream, delivery) {delivered}"
    )


@pytest.mark.rule("consumers.reset-seq")
@pytest.mark.parametrize("seq", [5, 1], ids=["forward", "backward"])
async def test_a_reset_to_a_sequence_delivers_from_it(nc, make_stream, names, seq):
    """A consumer with ack floor 2 of 5, reset to `seq`: reset_seq `seq`, ack floor `seq`-1, next delivery `seq`."""
    stream, consumer = await _two_acked_of_three(nc, make_stream, names)
    reply = await api(nc, RESET.format(stream.name, consumer), {"seq": seq})
    got = _state(reply)
    delivered = await _next(nc, stream, consumer)
    assert (got, delivered) == (_reset_state(seq), (seq, 1)), (
        f"{ADR60}: a reset to {{'seq': {seq}}} puts the ack floor's stream sequence one below it and delivers message "
        f"{seq} next as delivery 1 ({_reset_state(seq)}); it answered {got} and delivered (stream, delivery) "
        f"{delivered}"
    )


@pytest.mark.rule("consumers.reset-refused")
async def test_a_reset_to_a_sequence_the_deliver_policy_forbids_is_refused(nc, make_stream, names):
    """A reset to 2 of a last, new or last_per_subject consumer, or below opt_start_seq 3, is refused with 10204."""
    stream = await _stream_of(nc, make_stream, 5)
    policies = {
        "deliver_policy last": {"deliver_policy": "last"},
        "deliver_policy new": {"deliver_policy": "new"},
        "deliver_policy last_per_subject": {"deliver_policy": "last_per_subject", "filter_subject": f"{stream.root}.>"},
        "opt_start_seq 3": {"deliver_policy": "by_start_sequence", "opt_start_seq": 3},
    }
    got = {}
    for policy, config in policies.items():
        consumer = names.consumer()
        await create_consumer(nc, stream.name, durable_name=consumer, ack_policy="explicit", **config)
        asked = f"a reset to sequence 2 of a consumer with {policy}"
        got[policy] = (await refused(nc, RESET.format(stream.name, consumer), {"seq": 2}, asked))[:2]
    wrong = {policy: code for policy, code in got.items() if code != INVALID_RESET}
    assert not wrong, (
        f"{ADR60}: a reset to a sequence is only allowed for deliver_policy all, by_start_sequence and by_start_time, "
        f"not below the configured start: refused with 400/10204; got {wrong}"
    )
