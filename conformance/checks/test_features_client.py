"""The 2.11/2.12 server features through the client under test (--client), as far as the client exposes them:
a publish with a per-message TTL (ADR-43), pausing and resuming a consumer, pulls of a priority group (ADR-42's
client side: pinning, overflow with min_pending). The client acts through its adapter
(conformance/clients/features.py); the suite reads what reached the server over its own connection (the stored
message, consumer info, the pull requests on the wire). A client without the feature is `na`, saying where its API
shows it lacks it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from jetcheck.conformance.checks.answers import answered, who
from jetcheck.conformance.checks.kv_support import duration_seconds
from jetcheck.conformance.clients.base import Unsupported, connected, refusal
from jetcheck.conformance.clients.features import PIN
from jetcheck.conformance.jsapi import (
    NS,
    api,
    consumer_info_showing,
    create_consumer,
    epoch_seconds,
    eventually,
    get_message,
    publish_raw,
    subject_messages,
)
from jetcheck.conformance.plugin import na
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

TTL_S = 2  # whole seconds every client's TTL option can state
ADR43 = "ADR-43: a message supplies its TTL in the Nats-TTL header, as seconds or a Go duration"
PAUSED = "the client's pause call pauses the consumer until the time given ($JS.API.CONSUMER.PAUSE pause_until)"
RESUMED = "the client's resume call ends the consumer's pause"
PINNING = "ADR-42 (client side, Pinning): a client stores the Nats-Pin-Id and sends it as id on every later pull"
REPIN = "ADR-42 (client side, Pinning): after a 423 the client clears the id and goes on pulling without it"
OVERFLOW = "ADR-42 (client side, Overflow): a pull with min_pending gets messages only with at least that many pending"
GROUP = "jobs"
PULL_S = 1.5  # a group pull's expiry: long enough for a served pull, short for a standby one


# --- per-message TTL (ADR-43) ------------------------------------------------------------------------------------


@pytest.mark.rule("ttl.client-publish")
async def test_a_ttl_publish_stores_the_ttl_in_nats_ttl(client, target, nc, make_stream, observe):
    """A publish with a 2 s TTL through the client is stored with a Nats-TTL of 2 s and gone within a second after."""
    stream = await make_stream(allow_msg_ttl=True)
    async with connected(client, target.url, target.credentials) as s:
        seq = await answered(
            client, ADR43, "TTL publish", s.publish_ttl(stream.subject("t"), b"x", ttl_s=TTL_S), Unsupported
        )
        if isinstance(seq, Unsupported):
            na(f"{who(client)} has no per-message TTL publish ({seq})")
        sent = asyncio.get_running_loop().time()
        # How a fraction of a second travels (ADR-43 allows a Go duration such as 1.5s): recorded, not judged.
        refused = await refusal(s.publish_ttl(stream.subject("f"), b"x", ttl_s=1.5))
        stored = await subject_messages(nc, stream.name, stream.subject("f"))
        observe("ttl_1.5s", f"refused: {refused}" if refused else [m.headers for m in stored])
    stored = [m for m in await subject_messages(nc, stream.name, stream.subject("t")) if m.seq == seq]
    headers = stored[0].headers if stored else {}
    observe("stored_headers", headers)
    # the header as stored, unstripped: a client's " 2" is not a TTL of 2 s
    got = None if headers.get("Nats-TTL") is None else duration_seconds(headers["Nats-TTL"])
    assert got == TTL_S, (
        f"{ADR43}; a publish through {who(client)} with a {TTL_S}s TTL was stored with Nats-TTL "
        f"{headers.get('Nats-TTL')!r} (headers {headers})"
    )
    left = TTL_S + 1.5 - (asyncio.get_running_loop().time() - sent)
    gone = await eventually(lambda: _gone(nc, stream.name, seq), timeout=max(left, 0.1))
    assert gone, f"{ADR43}; the message {who(client)} published with a {TTL_S}s TTL was still stored after it"


async def _gone(nc, stream: str, seq: int) -> bool:
    return await get_message(nc, stream, seq) is None


# --- consumer pause ----------------------------------------------------------------------------------------------


async def _consumer_state(nc, stream: str, consumer: str, until: dt.datetime | None) -> tuple[bool, str | None]:
    """(paused, pause_until) from consumer info once it shows the consumer paused until `until` (None: not paused),
    or as it last showed it: in a cluster the meta leader answers a pause or resume before the consumer's leader,
    which answers consumer info, has applied it (jsapi.consumer_info_showing)."""

    def shows(info: dict) -> bool:
        pause_until = info["config"].get("pause_until")
        if until is None:
            return not info.get("paused")
        return bool(info.get("paused")) and pause_until is not None and _same_time(pause_until, until)

    info = await consumer_info_showing(nc, stream, consumer, shows)
    return bool(info.get("paused")), info["config"].get("pause_until")


def _same_time(text: str, at: dt.datetime) -> bool:
    return abs(epoch_seconds(text) - at.timestamp()) < 0.001


@pytest.mark.rule("pause.client-pause-resume")
async def test_the_clients_pause_and_resume_reach_the_consumer(client, target, nc, names, make_stream, observe):
    """The client's pause for an hour shows in consumer info as paused until then; its resume ends the pause."""
    stream = await make_stream()
    consumer = (await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit"))["name"]
    until = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)
    async with connected(client, target.url, target.credentials) as s:
        said = await answered(client, PAUSED, "pause", s.pause_consumer(stream.name, consumer, until), Unsupported)
        if isinstance(said, Unsupported):
            na(f"{who(client)} has no consumer pause ({said})")
        observe("pause_returned", said.__dict__)
        paused, pause_until = await _consumer_state(nc, stream.name, consumer, until)
        observe("info_after_pause", {"paused": paused, "pause_until": pause_until})
        assert paused and pause_until is not None and _same_time(pause_until, until), (
            f"{PAUSED}; after {who(client)} paused {consumer} until {until.isoformat()} consumer info shows paused "
            f"{paused} until {pause_until}"
        )
        resumed = await answered(client, RESUMED, "resume", s.resume_consumer(stream.name, consumer))
        observe("resume_returned", resumed.__dict__)
        paused, pause_until = await _consumer_state(nc, stream.name, consumer, None)
    observe("info_after_resume", {"paused": paused, "pause_until": pause_until})
    assert not paused, (
        f"{RESUMED}; after {who(client)}'s resume (it returned {resumed}) consumer info still shows it paused until "
        f"{pause_until}"
    )


# --- priority groups: pinning (ADR-42 client side) ---------------------------------------------------------------


@pytest.mark.rule("priority.client-pinning")
async def test_the_client_keeps_its_pin_id_and_is_pinned_anew_after_a_423(
    client, target, nc, names, make_stream, observe
):
    """Two pulls keep the pin id the first got; after an UNPIN the stale id's 423 is followed by a pull without it
    that is pinned with a new id."""
    stream = await make_stream()
    for n in range(4):
        await publish_raw(nc, stream.subject("a"), f"m{n}".encode())
    consumer = (await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit",
                                      priority_policy="pinned_client", priority_groups=[GROUP],
                                      priority_timeout=60 * NS))["name"]  # fmt: skip
    requests: list[dict] = []

    async def seen(msg) -> None:
        requests.append(json.loads(msg.data or b"{}"))

    watch = await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.{consumer}", cb=seen)
    pulls = []
    try:
        async with connected(client, target.url, target.credentials) as s:

            async def pull():
                before = len(requests)
                got = await answered(client, PINNING, "group fetch", s.group_fetch(
                    stream.name, consumer, group=GROUP, batch=1, expires=PULL_S), Unsupported)  # fmt: skip
                if isinstance(got, Unsupported):
                    na(f"{who(client)} has no priority-group pulls ({got})")
                await nc.flush()  # the server copied the client's pull request to `watch` before it answered it
                pulls.append((got, [r.get("id") for r in requests[before:]]))
                observe("pulls", [(p.deliveries, p.error, ids) for p, ids in pulls])
                return got

            first = await pull()
            pin = first.deliveries[0][1] if first.deliveries else ""
            assert pin, f"the server's first delivery to a pinned group carries {PIN}; {who(client)} got {first}"
            second = await pull()
            if not second.deliveries:
                await answering(s)
            sent = pulls[1][1]
            assert sent == [pin] and [p for _, p in second.deliveries] == [pin], (
                f"{PINNING}; {who(client)}'s second pull sent ids {sent}, not the {PIN} {pin!r} its first got, and "
                f"was served {second.deliveries or second.error}"
            )
            await api(nc, f"$JS.API.CONSUMER.UNPIN.{stream.name}.{consumer}", {"group": GROUP})
            stale = await pull()  # the old id: the server answers 423
            fresh = await pull()
            if not fresh.deliveries:
                await answering(s)
    finally:
        await watch.unsubscribe()
    observe("stale_pull", (stale.deliveries, stale.error))
    after = pulls[3][1]
    new_pin = fresh.deliveries[0][1] if fresh.deliveries else None
    assert after and all(not sent for sent in after) and new_pin not in (None, "", pin), (
        f"{REPIN}; after UNPIN {who(client)}'s pull with the stale id ended with {stale.error or stale.deliveries}, "
        f"its next pull sent ids {after} and was served {fresh.deliveries or fresh.error} (a new pin, not {pin!r}, "
        f"was due)"
    )


# --- priority groups: overflow (ADR-42 client side) --------------------------------------------------------------


@pytest.mark.rule("priority.client-overflow")
async def test_the_clients_min_pending_pull_waits_for_that_many_pending(
    client, target, nc, names, make_stream, observe
):
    """With 4 messages pending, the client's pull with min_pending 10 sends it and gets none; with 3 it is served."""
    stream = await make_stream()
    for n in range(4):
        await publish_raw(nc, stream.subject("a"), f"m{n}".encode())
    consumer = (await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit",
                                      priority_policy="overflow", priority_groups=[GROUP]))["name"]  # fmt: skip
    requests: list[dict] = []

    async def seen(msg) -> None:
        requests.append(json.loads(msg.data or b"{}"))

    watch = await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.{consumer}", cb=seen)
    pulls = {}
    try:
        async with connected(client, target.url, target.credentials) as s:
            for min_pending in (10, 3):
                before = len(requests)
                got = await answered(client, OVERFLOW, f"group fetch with min_pending {min_pending}", s.group_fetch(
                    stream.name, consumer, group=GROUP, batch=1, expires=PULL_S, min_pending=min_pending),
                    Unsupported)  # fmt: skip
                if isinstance(got, Unsupported):
                    na(f"{who(client)} has no priority-group pulls ({got})")
                await nc.flush()  # the server copied the client's pull request to `watch` before it answered it
                pulls[min_pending] = (got, [r.get("min_pending") for r in requests[before:]])
            if not pulls[3][0].deliveries:
                await answering(s)
    finally:
        await watch.unsubscribe()
    observe("pulls", {k: (p.deliveries, p.error, sent) for k, (p, sent) in pulls.items()})
    (above, sent_above), (below, sent_below) = pulls[10], pulls[3]
    assert sent_above == [10] and not above.deliveries, (
        f"{OVERFLOW}; with 4 pending, {who(client)}'s pull with min_pending 10 sent min_pending {sent_above} and was "
        f"served {above.deliveries or above.error}"
    )
    assert sent_below == [3] and [seq for seq, _ in below.deliveries] == [1], (
        f"{OVERFLOW}; with 4 pending, {who(client)}'s pull with min_pending 3 sent min_pending {sent_below} and was "
        f"served {below.deliveries or below.error}, not stream sequence 1"
    )
