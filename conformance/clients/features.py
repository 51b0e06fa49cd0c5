"""The client adapter's ops for the 2.11/2.12 server features a client may expose (issue 26): a publish with a
per-message TTL (ADR-43), pausing and resuming a consumer, pulls of a priority group (ADR-42 client side: pinning,
overflow min_pending).

Each op is a section of its own, attached to the in-process session (nats-py) and to the driven one (the drivers'
`js_*` ops, drivers/PROTOCOL.md "Server features"), so the base adapters stay as they are. A client without
the feature raises Unsupported saying where its API shows it lacks it; a check turns that into `na`.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from importlib import metadata

import nats.errors
import nats.js.errors
from nats.js.client import JetStreamContext

from .base import Unsupported
from .driver_adapter import DriverSession
from .natspy import NatsPySession
from .natspy_failures import call_shape, natspy_api_error, natspy_failures, release_call, release_option

PIN = "Nats-Pin-Id"


@dataclass(frozen=True)
class PauseState:
    """What the client's pause or resume call returned: paused, and until when (RFC 3339, as the client gave it)."""

    paused: bool
    pause_until: str | None = None


@dataclass(frozen=True)
class GroupPull:
    """One pull of a priority group through the client: (stream sequence, Nats-Pin-Id or "") per delivery, and what
    the client said when it ended with fewer messages than asked ("" when it said nothing)."""

    deliveries: list[tuple[int, str]] = field(default_factory=list)
    error: str = ""


def rfc3339(at: dt.datetime) -> str:
    """As the pause API takes it (jsapi.rfc3339 is not importable here: jsapi imports the clients package)."""
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


# --- nats-py -----------------------------------------------------------------------------------------------------


async def natspy_publish_ttl(session: NatsPySession, subject: str, payload: bytes, *, ttl_s: float) -> int:
    """JetStreamContext.publish(subject, payload, msg_ttl=ttl_s): the stream sequence of its ack."""
    with natspy_failures("publish"):
        try:
            release_option(session.js.publish, "msg_ttl")
            return (await session.js.publish(subject, payload, msg_ttl=ttl_s)).seq
        except nats.js.errors.APIError as exc:
            raise natspy_api_error("publish", exc) from None


def natspy_pause_state(answer) -> PauseState:
    return PauseState(bool(answer.paused), answer.pause_until or None)


async def natspy_pause_consumer(session: NatsPySession, stream: str, consumer: str, until: dt.datetime) -> PauseState:
    """JetStreamManager.pause_consumer(stream, consumer, <RFC 3339 of until>), as nats-py documents the argument."""
    assert session.nc is not None
    with natspy_failures("pause_consumer"):
        try:
            pause = release_call(session.nc.jsm(), "pause_consumer")
            return natspy_pause_state(await pause(stream, consumer, rfc3339(until)))
        except nats.js.errors.APIError as exc:
            raise natspy_api_error("pause_consumer", exc) from None


async def natspy_resume_consumer(session: NatsPySession, stream: str, consumer: str) -> PauseState:
    assert session.nc is not None
    with natspy_failures("resume_consumer"):
        try:
            resume = release_call(session.nc.jsm(), "resume_consumer")
            return natspy_pause_state(await resume(stream, consumer))
        except nats.js.errors.APIError as exc:
            raise natspy_api_error("resume_consumer", exc) from None


async def natspy_group_fetch(session: NatsPySession, stream: str, consumer: str, **pull) -> GroupPull:
    """Refuses every group pull (driver_group_fetch names the pull's options: group, batch, expires, min_pending)."""
    version = metadata.version("nats-py")
    raise Unsupported(
        "unsupported",
        f"nats-py {version} has no priority groups: {call_shape(JetStreamContext.PullSubscription.fetch)} takes no "
        "group, pin id or min_pending, and api.ConsumerConfig has no priority_groups/priority_policy "
        "(nats/js/client.py, nats/js/api.py)",
    )


NatsPySession.publish_ttl = natspy_publish_ttl
NatsPySession.pause_consumer = natspy_pause_consumer
NatsPySession.resume_consumer = natspy_resume_consumer
NatsPySession.group_fetch = natspy_group_fetch


# --- driven clients (drivers/PROTOCOL.md "Server features") ---------------------------------------------------


async def driver_publish_ttl(session: DriverSession, subject: str, payload: bytes, *, ttl_s: float) -> int:
    answer = await session.process.request(
        "js_publish", session=session.id, subject=subject, data_b64=base64.b64encode(payload).decode(), ttl_s=ttl_s
    )
    return int(answer["seq"])


def driver_pause_state(answer: dict) -> PauseState:
    return PauseState(bool(answer.get("paused")), answer.get("pause_until") or None)


async def driver_pause_consumer(session: DriverSession, stream: str, consumer: str, until: dt.datetime) -> PauseState:
    answer = await session.process.request(
        "js_pause", session=session.id, stream=stream, consumer=consumer, until=rfc3339(until)
    )
    return driver_pause_state(answer)


async def driver_resume_consumer(session: DriverSession, stream: str, consumer: str) -> PauseState:
    return driver_pause_state(
        await session.process.request("js_resume", session=session.id, stream=stream, consumer=consumer)
    )


async def driver_group_fetch(
    session: DriverSession,
    stream: str,
    consumer: str,
    *,
    group: str,
    batch: int,
    expires: float,
    min_pending: int | None = None,
) -> GroupPull:
    answer = await session.pull(
        "js_group_fetch", stream, consumer, batch=batch, expires=expires, group=group, min_pending=min_pending
    )
    got = [(int(d["stream_seq"]), str(d.get("pin_id") or "")) for d in answer.get("deliveries", [])]
    return GroupPull(got, str(answer.get("error") or ""))


DriverSession.publish_ttl = driver_publish_ttl
DriverSession.pause_consumer = driver_pause_consumer
DriverSession.resume_consumer = driver_resume_consumer
DriverSession.group_fetch = driver_group_fetch
