"""The nats-py (legacy JetStream API, nats.js) implementation of the client adapter."""

from __future__ import annotations

import asyncio
import contextlib
import time
from importlib import metadata

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

from jetcheck.fixtures.target import Credentials, Target

from .base import (
    ERROR,
    SEQUENCE_MISMATCH,
    ClientError,
    ClientEvent,
    Delivery,
    Documented,
    EventLog,
    FetchOutcome,
    Inbox,
    StartPolicy,
    Unsupported,
)

# nats.js.client.JetStreamContext.subscribe: an ordered consumer gets idle_heartbeat 5 s unless one is given.
DOCUMENTED = Documented(
    ordered_idle_heartbeat_s=5.0,
    missed_heartbeats="",  # nats-py has no missed-heartbeat error or warning
    heartbeat_behaviour=(
        "only ordered push subscriptions watch heartbeats (every 2 intervals) and reset silently; plain push "
        "subscriptions with idle_heartbeat are never told; fetch(heartbeat=) waits for its whole timeout and "
        "raises FetchTimeoutError if a heartbeat arrived, else nats.errors.TimeoutError"
    ),
    # JetStreamContext.subscribe(ordered_consumer=True): a push consumer with these settings, recreated with them.
    ordered_kind="push",
    ordered_config={
        "durable_name": None,
        "ack_policy": "none",
        "max_deliver": 1,
        "flow_control": True,
        "mem_storage": True,
        "num_replicas": 1,
    },
    consumes="push",  # nats-py has no continuous pull consumption (consume()/messages()) to certify
)


def delivery(msg: Msg) -> Delivery:
    meta = msg.metadata
    return Delivery(
        stream_seq=meta.sequence.stream,
        consumer_seq=meta.sequence.consumer,
        subject=msg.subject,
        payload=msg.data,
        consumer=meta.consumer,
        at=asyncio.get_running_loop().time(),
    )


class NatsPySubscription:
    def __init__(self, sub) -> None:
        self.sub = sub
        self.inbox = Inbox()

    async def on_msg(self, msg: Msg) -> None:
        self.inbox.put(delivery(msg))

    async def stop(self) -> None:
        with contextlib.suppress(nats.errors.Error):  # the connection is already gone: nothing left to stop
            await self.sub.unsubscribe()


class NatsPySession:
    def __init__(self) -> None:
        self.events = EventLog()
        self.nc: Client | None = None
        self.subscriptions: list[NatsPySubscription] = []

    async def on_error(self, exc: Exception) -> None:
        kind = SEQUENCE_MISMATCH if isinstance(exc, nats.js.errors.ConsumerSequenceMismatchError) else ERROR
        self.events.add(kind, f"{type(exc).__name__}: {exc}")

    @property
    def js(self):
        assert self.nc is not None
        return self.nc.jetstream()

    async def ordered(
        self,
        stream: str,
        subject: str,
        *,
        idle_heartbeat: float | None = None,
        start: StartPolicy | None = None,
        inactive_threshold: float | None = None,
    ) -> NatsPySubscription:
        start = start or StartPolicy()
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy(start.deliver_policy),
            opt_start_seq=start.seq,
            opt_start_time=start.time,
        )
        return await self._subscribe(
            stream,
            subject,
            config=config,
            ordered_consumer=True,
            idle_heartbeat=idle_heartbeat,
            inactive_threshold=inactive_threshold,
        )

    async def push(
        self,
        stream: str,
        subject: str,
        *,
        idle_heartbeat: float | None,
        durable: str | None = None,
        queue: str | None = None,
        inactive_threshold: float | None = None,
    ) -> NatsPySubscription:
        config = api.ConsumerConfig(ack_policy=api.AckPolicy.NONE)
        try:
            return await self._subscribe(
                stream,
                subject,
                config=config,
                idle_heartbeat=idle_heartbeat,
                durable=durable,
                queue=queue,
                inactive_threshold=inactive_threshold,
            )
        except nats.js.errors.APIError as exc:
            raise ClientError("api", f"{type(exc).__name__}: {exc}", exc.code, exc.err_code) from exc
        except nats.js.errors.Error as exc:  # the client's own refusal, e.g. a deliver group mismatch
            raise ClientError("invalid", f"{type(exc).__name__}: {exc}") from exc

    async def consume(self, stream: str, consumer: str, **options) -> NatsPySubscription:
        raise Unsupported("unsupported", f"nats-py {metadata.version('nats-py')} has no continuous pull consumption")

    async def _subscribe(self, stream: str, subject: str, **options) -> NatsPySubscription:
        holder = NatsPySubscription(None)
        holder.sub = await self.js.subscribe(subject, stream=stream, cb=holder.on_msg, **options)
        self.subscriptions.append(holder)
        return holder

    async def fetch(
        self, stream: str, consumer: str, *, batch: int, expires: float, idle_heartbeat: float | None
    ) -> FetchOutcome:
        sub = await self.js.pull_subscribe_bind(consumer, stream=stream)
        started = time.monotonic()
        try:
            msgs = await sub.fetch(batch, timeout=expires, heartbeat=idle_heartbeat)
            return FetchOutcome([delivery(m) for m in msgs], None, time.monotonic() - started)
        except (nats.errors.TimeoutError, nats.js.errors.APIError) as exc:
            event = ClientEvent(ERROR, f"{type(exc).__name__}: {exc}", asyncio.get_running_loop().time())
            return FetchOutcome([], event, time.monotonic() - started)
        finally:
            await sub.unsubscribe()

    async def close(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            for sub in self.subscriptions:
                await sub.stop()
            await self.nc.close()


class NatsPyAdapter:
    name = "nats-py"
    documented = DOCUMENTED

    def __init__(self) -> None:
        self.version = metadata.version("nats-py")

    async def connect(self, url: str, credentials: Credentials, *, reconnect_wait: float = 0.1) -> NatsPySession:
        session = NatsPySession()
        session.nc = await Target(url=url, credentials=credentials).connect(
            url,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=reconnect_wait,
            error_cb=session.on_error,
        )
        return session
