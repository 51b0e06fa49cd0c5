"""Consumer create, update and create-or-update through the client under test (ADR-37 JetStream Context; the
`action` of $JS.API.CONSUMER.CREATE, nats-server 2.10 server/consumer.go ConsumerAction).

The client (--client) makes each call through its adapter (ClientSession.consumer_add); the suite's own
connection listens to the consumer create requests of the check's stream to read the action each one sent, and
reads the consumer back through the raw JetStream API.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from jetcheck.conformance.checks.answers import who
from jetcheck.conformance.clients.base import Unsupported, connected, refusal
from jetcheck.conformance.jsapi import ApiError, api, consumer_info
from jetcheck.conformance.plugin import na

pytestmark = pytest.mark.asyncio

ALREADY_EXISTS = 10148  # JSConsumerAlreadyExists: action create on an existing consumer with another config
DOES_NOT_EXIST = 10149  # JSConsumerDoesNotExist: action update on a consumer that does not exist
NOT_FOUND = 10014  # JSConsumerNotFoundErr: a client that looks the consumer up before it updates it
# What each rule documents, as the checks' failures say it first
CREATE = "create-consumer sends action 'create' and is refused with 10148 for an existing consumer's other config"
UPDATE = "update-consumer sends action 'update' and is refused for a consumer that does not exist"
UPSERT = "create-or-update-consumer creates a missing consumer and changes an existing one"


def config(name: str, description: str) -> dict:
    return {"durable_name": name, "ack_policy": "explicit", "description": description}


@contextlib.asynccontextmanager
async def sent_actions(nc, stream: str) -> AsyncIterator[list[tuple[str, str]]]:
    """(consumer name, action) of every consumer create request for `stream` while inside, in order ("" for none);
    the suite's connection hears each request the client sends, and flush() lets it catch up."""
    sent: list[tuple[str, str]] = []

    async def record(msg) -> None:
        body = json.loads(msg.data or b"{}")
        cfg = body.get("config") or {}
        sent.append((cfg.get("durable_name") or cfg.get("name") or "", body.get("action") or ""))

    subs = [
        await nc.subscribe(f"$JS.API.CONSUMER.{api_}.{stream}.>", cb=record) for api_ in ("CREATE", "DURABLE.CREATE")
    ]
    await nc.flush()
    try:
        yield sent
    finally:
        for sub in subs:
            await sub.unsubscribe()


async def heard(nc, sent: list[tuple[str, str]], name: str) -> list[str]:
    """The actions the client sent for consumer `name` so far (after a round trip, so every request is in)."""
    await nc.flush()
    return [action for consumer, action in sent if consumer == name]


async def description_of(nc, stream: str, name: str) -> str | None:
    """The consumer's description as the server holds it; None when it does not exist."""
    try:
        return (await consumer_info(nc, stream, name))["config"].get("description")
    except ApiError as error:
        if error.err_code == NOT_FOUND:
            return None
        raise


@pytest.mark.rule("consumers-client.create-action")
async def test_create_sends_create_and_is_refused_for_a_changed_consumer(client, target, nc, make_stream, names):
    """The client's create sends action create; again with another config it is refused with 10148."""
    stream, name = await make_stream(), names.consumer()
    async with connected(client, target.url, target.credentials) as s, sent_actions(nc, stream.name) as sent:
        refused = await refusal(s.consumer_add(stream.name, config(name, "first"), "create"))
        if isinstance(refused, Unsupported):
            na(f"{who(client)} has no create-only consumer call: {refused}")
        assert refused is None, f"{CREATE}; {who(client)} create of a new consumer was refused: {refused}"
        actions = await heard(nc, sent, name)
        assert actions == ["create"], f"{CREATE}; {who(client)} create sent the actions {actions}"
        refused = await refusal(s.consumer_add(stream.name, config(name, "second"), "create"))
        got = await description_of(nc, stream.name, name)
        assert refused is not None and refused.err_code == ALREADY_EXISTS and got == "first", (
            f"{CREATE}; {who(client)} create of the existing consumer with another description was "
            + (f"refused otherwise: {refused}" if refused else "accepted")
            + f" (its description is now {got!r})"
        )


@pytest.mark.rule("consumers-client.update-action")
async def test_update_sends_update_and_is_refused_for_a_missing_consumer(client, target, nc, make_stream, names):
    """The client's update of a missing consumer is refused and creates none; of an existing one it sends update."""
    stream, name, missing = await make_stream(), names.consumer(), names.consumer()
    await api(nc, f"$JS.API.CONSUMER.CREATE.{stream.name}.{name}", {"stream_name": stream.name,
              "config": config(name, "first")})  # fmt: skip
    async with connected(client, target.url, target.credentials) as s, sent_actions(nc, stream.name) as sent:
        refused = await refusal(s.consumer_add(stream.name, config(missing, "new"), "update"))
        if isinstance(refused, Unsupported):
            na(f"{who(client)} has no update-only consumer call: {refused}")
        got = await description_of(nc, stream.name, missing)
        assert refused is not None and refused.err_code in (DOES_NOT_EXIST, NOT_FOUND) and got is None, (
            f"{UPDATE}; {who(client)} update of a consumer that does not exist was "
            + (f"refused otherwise: {refused}" if refused else "accepted")
            + ("" if got is None else f", and created it ({got!r})")
        )
        refused = await refusal(s.consumer_add(stream.name, config(name, "second"), "update"))
        assert refused is None, f"{UPDATE}; {who(client)} update of an existing consumer was refused: {refused}"
        actions, got = await heard(nc, sent, name), await description_of(nc, stream.name, name)
        assert actions == ["update"] and got == "second", (
            f"{UPDATE}; {who(client)} update of an existing consumer sent the actions {actions} and left the "
            f"description {got!r}"
        )


@pytest.mark.rule("consumers-client.create-or-update")
async def test_create_or_update_creates_then_changes_the_consumer(client, target, nc, make_stream, names):
    """The client's create-or-update creates a missing consumer, then changes it, sending neither create nor update."""
    stream, name = await make_stream(), names.consumer()
    async with connected(client, target.url, target.credentials) as s, sent_actions(nc, stream.name) as sent:
        for step, description in (("creating", "first"), ("changing", "second")):
            refused = await refusal(s.consumer_add(stream.name, config(name, description), "create_or_update"))
            if isinstance(refused, Unsupported):
                na(f"{who(client)} has no create-or-update consumer call: {refused}")
            got = await description_of(nc, stream.name, name)
            assert refused is None and got == description, (
                f"{UPSERT}; {who(client)} create-or-update {step} the consumer was "
                + (f"refused: {refused}" if refused else f"accepted, and its description is {got!r}")
            )
        actions = await heard(nc, sent, name)
        assert set(actions) <= {""}, f"{UPSERT}, with no action; {who(client)} sent the actions {actions}"
