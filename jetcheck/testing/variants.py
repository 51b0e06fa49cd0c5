"""Client variants for the suite's own proofs: `--client <client>+<variant>[+<variant>...]` (results name them),
offered once registered (register_variants; the plugin jetcheck.testing.plugin does it).

Every variant wraps an adapter (composition): it never changes the client library or reaches into it.

The driver protocol's misbehave modes (a driven client misreports inside its driver, drivers/PROTOCOL.md
`misbehave`; an in-process adapter such as nats-py's is wrapped here, on the application's side of the adapter):
- `swallow-missed-heartbeat`: missed-heartbeat reports never reach the application.
- `chatty-missed-heartbeat`: a missed-heartbeat report every 100 ms while a consumption runs, data flowing or not.
- `terminal-on-missed-heartbeat`: a missed heartbeat ends the session's consumption (`terminal`, nothing more).
- `duplicate-delivery`: every delivery reaches the application twice.
- `drop-deliveries-after-reset`: once a subscription's consumer is replaced, nothing more reaches the application.
- `watch-no-end-of-data`: a watcher's end-of-initial-data signal never reaches the application.
- `watch-drop-first`: the first update (not the end-of-initial-data signal) of every watcher never reaches it.
- `bind-any-queue`: a push subscription that binds an existing consumer joins the consumer's own deliver_group,
  whatever queue (or none) the application named: a client that does not check the match.
- `seal-ignored`: an object store's seal answers without sealing.
- `status-misreport`: an object store's status reports size 0 and backing store "".
- `consumer-actions-rotated`: a consumer create is made with the client's update call, an update with its create
  call, a create-or-update with its create call.
- `publish-no-retry`: a JetStream publish asked to retry on no responders does not (nats-py has no retries: its
  publish_retrying stays unsupported).

nats-py's own variants (they need its API):
- `never-reset`: the ordered consumer is a plain push consumer with the ordered settings that never recreates it
  (a client without ADR-17 gap and heartbeat handling).
- `adr37-heartbeats`: consumption watched as ADR-37 asks: a missed-heartbeat warning once 2 intervals pass without
  any message, the timer reset by every message, heartbeat or not (a reference, so the heartbeat checks can pass;
  with `terminal-on-missed-heartbeat` it is a client that gives up on missed heartbeats).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Callable

import nats.js.errors
from nats.js import api

from jetcheck.conformance.clients import ClientVariant, register_variant
from jetcheck.conformance.clients.base import (
    MISSED_HEARTBEAT,
    RESET,
    TERMINAL,
    ClientError,
    Delivery,
    EventLog,
    OrderedOptions,
    PushOptions,
)
from jetcheck.conformance.clients.driven_clients import MISBEHAVE_MODES
from jetcheck.conformance.clients.natspy import NatsPySession, NatsPySubscription, delivery, start_config
from jetcheck.errors import ConfigError

from .variants_features import FEATURE_WRAPPERS
from .variants_kv import KV_WRAPPERS
from .variants_prefix import PREFIX_WRAPPERS
from .wrapping import (
    RelayedSubscription,
    RelayedWatches,
    WrappedAdapter,
    WrappedSession,
    WrappedStore,
    WrappedSubscription,
)

NS = 1_000_000_000
CHATTY_EVERY_S = 0.1
MODES = MISBEHAVE_MODES  # the driver protocol's modes: a driven client's driver misreports, others are wrapped here


# --- the protocol's misbehave modes, as wrappers -----------------------------------------------------------------


class SwallowingLog(EventLog):
    def add(self, kind: str, detail: str, at: float | None = None) -> None:
        if kind != MISSED_HEARTBEAT:
            super().add(kind, detail, at)


class SwallowMissedHeartbeat(WrappedSession):
    def __init__(self, inner) -> None:
        super().__init__(inner)
        inner.events = self.events = SwallowingLog()


class ChattyMissedHeartbeat(WrappedSession):
    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.chatter: list[asyncio.Task] = []

    def subscription(self, sub):
        self.chatter.append(asyncio.create_task(self.chat()))
        return sub

    async def chat(self) -> None:
        while True:
            await asyncio.sleep(CHATTY_EVERY_S)  # the deviation itself is a report on a fixed period
            self.events.add(MISSED_HEARTBEAT, f"chatty: reported every {CHATTY_EVERY_S}s whatever arrived")

    async def close(self) -> None:
        for task in self.chatter:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await super().close()


class TerminatingLog(EventLog):
    """Ends consumption at the first missed heartbeat: `on_missed` runs once, after the event is recorded."""

    def __init__(self, on_missed: Callable[[], None]) -> None:
        super().__init__()
        self.on_missed = on_missed
        self.ended = False

    def add(self, kind: str, detail: str, at: float | None = None) -> None:
        super().add(kind, detail, at)
        if kind == MISSED_HEARTBEAT and not self.ended:
            self.ended = True
            super().add(TERMINAL, f"consumption ended after a missed heartbeat ({detail})")
            self.on_missed()


class TerminalOnMissedHeartbeat(WrappedSession):
    def __init__(self, inner) -> None:
        super().__init__(inner)
        inner.events = self.events = TerminatingLog(self.end)
        self.ended = False

    def end(self) -> None:
        self.ended = True

    def subscription(self, sub):
        return RelayedSubscription(sub, lambda d: [] if self.ended else [d])


class DuplicateDelivery(WrappedSession):
    def subscription(self, sub):
        return RelayedSubscription(sub, lambda d: [d, d])


class DropDeliveriesAfterReset(WrappedSession):
    """Nothing more reaches the application once a delivery comes from another consumer or the client says reset."""

    def subscription(self, sub):
        consumers: list[str] = []
        resets_before = len(self.events.of(RESET))

        def relay(d: Delivery) -> list[Delivery]:
            if not consumers:
                consumers.append(d.consumer)
            if d.consumer != consumers[0] or len(self.events.of(RESET)) > resets_before:
                return []
            return [d]

        return RelayedSubscription(sub, relay)


class BindAnyQueue(WrappedSession):
    """Binds an existing push consumer with the consumer's own deliver_group as the queue, whatever was asked."""

    async def push(self, stream: str, subject: str, options: PushOptions = PushOptions()):
        if options.durable:
            try:
                info = await self.inner.js.consumer_info(stream, options.durable)
            except nats.js.errors.NotFoundError:
                info = None  # created below with the queue asked for
            if info is not None:
                options = dataclasses.replace(options, queue=info.config.deliver_group)
        return await super().push(stream, subject, options)


class WatchRelay(WrappedSession):
    """A session whose buckets' and object stores' watchers relay through `new_relay()`."""

    new_relay: Callable[[], Callable]

    async def kv_create(self, bucket: str, **options):
        return RelayedWatches(await self.inner.kv_create(bucket, **options), self.new_relay)

    async def object_store(self, bucket: str):
        return RelayedWatches(await self.inner.object_store(bucket), self.new_relay)


class WatchNoEndOfData(WatchRelay):
    @staticmethod
    def new_relay() -> Callable:
        return lambda update: [] if update is None else [update]


class WatchDropFirst(WatchRelay):
    @staticmethod
    def new_relay() -> Callable:
        dropped: list = []

        def relay(update) -> list:
            if update is None or dropped:
                return [update]
            dropped.append(update)
            return []

        return relay


class ObjectStoreWrapper(WrappedStore):
    """An object store whose seal or status its misbehaviour changes; everything else is the inner one's."""

    async def seal(self) -> None:
        await self.misbehaviour.seal(self.inner)

    async def status(self):
        return await self.misbehaviour.status(self.inner)


class ObjectStoreMisbehaviour(WrappedSession):
    async def object_store(self, bucket: str):
        return ObjectStoreWrapper(await self.inner.object_store(bucket), self)

    async def seal(self, store) -> None:
        await store.seal()

    async def status(self, store):
        return await store.status()


class SealIgnored(ObjectStoreMisbehaviour):
    async def seal(self, store) -> None:
        """Answers as sealed without asking the client to seal."""


class StatusMisreport(ObjectStoreMisbehaviour):
    async def status(self, store):
        return dataclasses.replace(await store.status(), size=0, backing_store="")


ROTATED_ACTIONS = {"create": "update", "update": "create", "create_or_update": "create"}


class ConsumerActionsRotated(WrappedSession):
    """Create is made with the client's update call, update with its create call, create-or-update with its create
    call; nats-py has no create call, so its create-or-update here sends action "create" itself."""

    async def consumer_add(self, stream: str, config, action: str) -> dict:
        if action != "create_or_update":
            return await self.inner.consumer_add(stream, config, ROTATED_ACTIONS[action])
        name = config.get("durable_name") or config.get("name")
        body = {"stream_name": stream, "config": dict(config), "action": "create"}
        reply = await self.inner.nc.request(f"$JS.API.CONSUMER.CREATE.{stream}.{name}", json.dumps(body).encode())
        answer = json.loads(reply.data)
        if error := answer.get("error"):
            raise ClientError("api", f"create: {error.get('description')}", error.get("code"), error.get("err_code"))
        return answer


WRAPPERS = {
    "swallow-missed-heartbeat": SwallowMissedHeartbeat,
    "chatty-missed-heartbeat": ChattyMissedHeartbeat,
    "terminal-on-missed-heartbeat": TerminalOnMissedHeartbeat,
    "duplicate-delivery": DuplicateDelivery,
    "drop-deliveries-after-reset": DropDeliveriesAfterReset,
    "watch-no-end-of-data": WatchNoEndOfData,
    "watch-drop-first": WatchDropFirst,
    "bind-any-queue": BindAnyQueue,
    **KV_WRAPPERS,  # variants_kv.py
    **FEATURE_WRAPPERS,  # variants_features.py
    **PREFIX_WRAPPERS,  # variants_prefix.py
    "seal-ignored": SealIgnored,
    "status-misreport": StatusMisreport,
    "consumer-actions-rotated": ConsumerActionsRotated,
    "publish-no-retry": WrappedSession,  # nats-py's publish_retrying is unsupported: nothing to change
}


def misbehaving(mode: str):
    """The variant for protocol mode `mode` around an in-process adapter (a driven client's driver does it)."""
    return lambda adapter: WrappedAdapter(adapter, mode, WRAPPERS[mode])


# --- nats-py's own variants --------------------------------------------------------------------------------------


class NeverReset(WrappedSession):
    async def ordered(self, stream: str, subject: str, options: OrderedOptions = OrderedOptions()):
        """A plain push consumer with nats-py's ordered settings, which nothing recreates."""
        config = start_config(
            options.start,
            ack_policy=api.AckPolicy.NONE,
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=options.inactive_threshold,
        )
        return await self.inner.subscribe(
            stream, subject, config=config, flow_control=True, idle_heartbeat=options.idle_heartbeat or 5.0
        )


class WatchedPush(NatsPySubscription):
    """A push consumer read off a core subscription, so every status message is seen, with an ADR-37 timer."""

    def __init__(self, session: NatsPySession, interval: float) -> None:
        super().__init__(None)
        self.session = session
        self.interval = interval
        self.effective_idle_heartbeat_s = interval
        self.last_activity = 0.0
        self.watch: asyncio.Task | None = None

    async def start(self, stream: str, subject: str) -> WatchedPush:
        nc = self.session.nc
        deliver = nc.new_inbox()
        self.sub = await nc.subscribe(deliver, cb=self.on_raw)
        config = {"deliver_subject": deliver, "ack_policy": "none", "filter_subject": subject,
                  "idle_heartbeat": int(self.interval * NS), "flow_control": True}  # fmt: skip
        reply = await nc.request(f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps({"stream_name": stream,
                                 "config": config}).encode(), timeout=5)  # fmt: skip
        assert "error" not in json.loads(reply.data), reply.data
        self.last_activity = asyncio.get_running_loop().time()
        self.watch = asyncio.create_task(watch(self.session.events, self.interval, lambda: self.last_activity))
        return self

    async def on_raw(self, msg) -> None:
        status = (msg.headers or {}).get("Status")
        if status == "100" and msg.reply:  # flow control: answer it
            await self.session.nc.publish(msg.reply, b"")
        self.last_activity = asyncio.get_running_loop().time()
        if not status:
            self.inbox.put(delivery(msg))

    async def stop(self) -> None:
        await cancel(self.watch)
        await super().stop()


class WatchedOrdered(WrappedSubscription):
    """nats-py's ordered subscription, with an ADR-37 timer on the connection's incoming messages (public stats):
    in these checks the session's only active subscription, so every message counted, heartbeats included, is
    one of its."""

    def __init__(self, inner: NatsPySubscription, session: NatsPySession, interval: float) -> None:
        super().__init__(inner)
        self.effective_idle_heartbeat_s = interval
        loop = asyncio.get_running_loop()
        seen = {"count": session.nc.stats["in_msgs"], "at": loop.time()}

        def last_activity() -> float:
            if session.nc.stats["in_msgs"] != seen["count"]:
                seen.update(count=session.nc.stats["in_msgs"], at=loop.time())
            return seen["at"]

        self.watch = asyncio.create_task(watch(session.events, interval, last_activity, poll=interval / 4))

    async def stop(self) -> None:
        await cancel(self.watch)
        await super().stop()


async def watch(events: EventLog, interval: float, last_activity: Callable[[], float], poll: float = 0.0) -> None:
    """Warn once 2 intervals pass without activity, then start over (ADR-37)."""
    loop = asyncio.get_running_loop()
    while True:
        due = last_activity() + 2 * interval
        if loop.time() >= due:
            events.add(MISSED_HEARTBEAT, f"no heartbeat or message for {2 * interval}s")
            await asyncio.sleep(2 * interval)  # the next warning is due 2 intervals later at the earliest
            continue
        await asyncio.sleep(min(due - loop.time(), poll) if poll else due - loop.time())


async def cancel(task: asyncio.Task | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Adr37Heartbeats(WrappedSession):
    async def push(self, stream: str, subject: str, options: PushOptions = PushOptions()) -> NatsPySubscription:
        heartbeat = options.idle_heartbeat
        if heartbeat is None or options != PushOptions(idle_heartbeat=heartbeat):
            # durable, queue-group or ephemeral-with-threshold push consumers: nats-py's own (no heartbeat to watch)
            return await self.inner.push(stream, subject, options)
        sub = await WatchedPush(self.inner, heartbeat).start(stream, subject)
        self.inner.subscriptions.append(sub)
        return sub

    async def ordered(self, stream: str, subject: str, options: OrderedOptions = OrderedOptions()):
        sub = await self.inner.ordered(stream, subject, options)
        return WatchedOrdered(sub, self.inner, options.idle_heartbeat or self.documented_heartbeat)

    documented_heartbeat = 5.0  # nats-py's ordered consumer heartbeat when none is given


def nats_py_only(variant: str, wrap_session: Callable):
    def wrap(adapter):
        if not adapter.name.startswith("nats-py"):
            raise ConfigError(f"client variant {variant!r} exists for nats-py only, not {adapter.name}")
        return WrappedAdapter(adapter, variant, wrap_session)

    return wrap


VARIANTS = {mode: ClientVariant(mode, misbehaving(mode), driver_mode=mode) for mode in MODES} | {
    "never-reset": ClientVariant("never-reset", nats_py_only("never-reset", NeverReset)),
    "adr37-heartbeats": ClientVariant("adr37-heartbeats", nats_py_only("adr37-heartbeats", Adr37Heartbeats)),
}


def register_variants() -> None:
    """Offer every variant above to `--client` (jetcheck.conformance.clients.register_variant)."""
    for variant in VARIANTS.values():
        register_variant(variant)
