"""JetStream publish retries on no responders (ADR-22), client side: the client under test publishes through a
fault proxy that sees every request it sends and every 503 no-responders answer it gets.

To make "the stream appears shortly after the first attempt" deterministic, the proxy holds the first 503 on its
way to the client (a stall of server-to-client bytes) until the suite has created the stream, then releases it:
the client's retry, sent only after the 503 reached it, finds the stream. No sleeps: the client's own retry wait is
the only time that passes.
"""

from __future__ import annotations

import asyncio

import pytest

from jetcheck.conformance.checks.answers import who
from jetcheck.conformance.clients.base import ClientError, Indeterminate, NoStreamResponse, Unsupported, connected
from jetcheck.conformance.jsapi import stream_state
from jetcheck.conformance.plugin import na
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

RETRY_ATTEMPTS = 2  # ADR-22: "will retry 2 times" (3 attempts in all)
RETRY_WAIT_S = 0.25  # ADR-22: "waits for 250ms"
NO_RESPONDERS = b"NATS/1.0 503"
FIRST_ANSWER_S = 10.0  # the first attempt and its 503, or the client's own answer
RETRIES = "ADR-22: a publish that meets no responders is sent again, RetryAttempts (2) times"
WAITS = "ADR-22: the client backs off RetryWait (250 ms) after a no-responders answer before it sends again"


class PublishWatch:
    """What the proxy sees of the client's publishes to `subject`: when each request went out, when each 503 came
    back (loop time); with `hold_first`, the first 503 is held (the proxy stalls) and `held` is set."""

    def __init__(self, proxy, subject: str, hold_first: bool) -> None:
        self.proxy, self.subject, self.hold_first = proxy, subject, hold_first
        self.loop = asyncio.get_running_loop()
        self.publishes: list[float] = []
        self.refusals: list[float] = []
        self.inboxes: set[str] = set()
        self.held = asyncio.Event()
        proxy.client_to_server = self.from_client
        proxy.server_to_client = self.from_server

    def from_client(self, frame):
        if frame.is_publish and frame.subject == self.subject:
            self.publishes.append(self.loop.time())
            self.inboxes.add(frame.reply)
        return frame

    def from_server(self, frame):
        if frame.is_message and frame.subject in self.inboxes and (frame.headers or b"").startswith(NO_RESPONDERS):
            self.refusals.append(self.loop.time())
            if self.hold_first and len(self.refusals) == 1:
                self.proxy.stall()  # this 503 and everything after it wait for release()
                self.held.set()
        return frame


async def publishing(client, session, subject: str):
    """The client's retrying publish, started; na when the client has no publish retries."""
    publish = asyncio.create_task(
        session.publish_retrying(subject, b"retried", retry_attempts=RETRY_ATTEMPTS, retry_wait=RETRY_WAIT_S)
    )
    await asyncio.wait({publish}, timeout=0)  # let an adapter refuse at once
    if publish.done() and isinstance(publish.exception(), Unsupported):
        na(f"{who(client)} has no JetStream publish retries: {publish.exception()}")
    return publish


async def outcome(publish: asyncio.Task, session, nc) -> dict | ClientError:
    """The publish's PubAck, or the client's refusal; a publish that never ends is an error, never a verdict."""
    done, _ = await asyncio.wait({publish}, timeout=FIRST_ANSWER_S + 3 * RETRY_WAIT_S * RETRY_ATTEMPTS)
    if not done:
        publish.cancel()
        await answering(nc, session)
        raise Indeterminate("timeout", "the client's publish did not end")
    try:
        return publish.result()
    except Indeterminate:
        raise
    except Unsupported as missing:
        na(f"the client has no JetStream publish retries: {missing}")
    except ClientError as refused:
        return refused


@pytest.mark.rule("publish-client.retry-no-responders")
async def test_a_retrying_publish_is_stored_once_the_stream_appears(client, target, proxied, nc, make_stream, names):
    """The retry after a 503 stores the message once the stream exists; with no stream, 3 attempts, then an error."""
    root = names.subject()
    watch = PublishWatch(proxied, f"{root}.retried", hold_first=True)
    async with connected(client, proxied.url, target.credentials) as session:
        publish = await publishing(client, session, watch.subject)
        held = asyncio.create_task(watch.held.wait())
        await asyncio.wait({publish, held}, timeout=FIRST_ANSWER_S, return_when=asyncio.FIRST_COMPLETED)
        held.cancel()
        if not watch.held.is_set() and not publish.done():
            await answering(nc, session)
            raise Indeterminate("timeout", f"no 503 answered the client's first publish within {FIRST_ANSWER_S} s")
        stream = await make_stream(root)  # while the first 503 is held on its way to the client
        proxied.release()
        got = await outcome(publish, session, nc)
        assert not isinstance(got, ClientError), (
            f"{RETRIES}; once the stream existed, {who(client)}'s publish made {len(watch.publishes)} attempts and "
            f"failed: {got}"
        )
        stored = (await stream_state(nc, stream.name)).messages
        assert got.get("stream") == stream.name and stored == 1, (
            f"{RETRIES}; {who(client)}'s retried publish answered {got}, the stream holds {stored} messages"
        )
        nowhere = PublishWatch(proxied, f"{names.subject()}.nowhere", hold_first=False)
        got = await outcome(await publishing(client, session, nowhere.subject), session, nc)
        attempts = len(nowhere.publishes)
        assert isinstance(got, NoStreamResponse) and attempts == RETRY_ATTEMPTS + 1, (
            f"{RETRIES}, then fails with no response from stream; with no stream, {who(client)} sent "
            f"{attempts} requests and " + (f"failed: {got}" if isinstance(got, ClientError) else f"answered {got}")
        )


@pytest.mark.rule("publish-client.retry-wait")
async def test_a_retrying_publish_waits_between_attempts(client, target, proxied, nc, names, observe):
    """After each 503 the client waits RetryWait (250 ms) before it sends the message again."""
    watch = PublishWatch(proxied, f"{names.subject()}.nowhere", hold_first=False)
    async with connected(client, proxied.url, target.credentials) as session:
        got = await outcome(await publishing(client, session, watch.subject), session, nc)
    waits = [round(sent - refused, 3) for refused, sent in zip(watch.refusals, watch.publishes[1:], strict=False)]
    observe("measured_retry_waits_s", waits)
    assert waits, f"{WAITS}; {who(client)} sent {len(watch.publishes)} requests (no retry to wait for) and {got}"
    assert min(waits) >= RETRY_WAIT_S, f"{WAITS}; {who(client)} sent its retries {waits} s after the 503 answers"
