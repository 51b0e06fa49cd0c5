"""The wrapping every client variant builds on (composition: a variant never changes the client library or reaches
into it): an adapter whose sessions come wrapped, a session, subscription or watched bucket that delegates to the
inner one, and inboxes that relay each delivery before the application sees it."""

from __future__ import annotations

from collections.abc import Callable

from jetcheck.conformance.clients.base import (
    ConnectOptions,
    ConsumeOptions,
    Delivery,
    EventLog,
    Inbox,
    OrderedOptions,
    PushOptions,
    Watch,
)


class WrappedAdapter:
    """An adapter whose sessions come wrapped by `wrap_session`; name, version and documentation stay the inner's."""

    def __init__(self, inner, variant: str, wrap_session: Callable) -> None:
        self.inner = inner
        self.name = f"{inner.name}+{variant}"
        self.version = inner.version
        self.documented = inner.documented
        self.wrap_session = wrap_session

    def __repr__(self) -> str:  # shown in a failing check's arguments: the client, not an object address
        return f"WrappedAdapter({self.name} {self.version})"

    async def connect(self, url, credentials, options: ConnectOptions = ConnectOptions()):
        return self.wrap_session(await self.inner.connect(url, credentials, options))


class WrappedSession:
    """Delegates to the inner session; subclasses change what reaches the application."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    @property
    def events(self) -> EventLog:
        return self.inner.events

    @events.setter
    def events(self, log: EventLog) -> None:
        self.inner.events = log  # down to the session that records the client's reports

    def subscription(self, sub):
        """The subscription as the application sees it (unchanged here)."""
        return sub

    async def ordered(self, stream: str, subject: str, options: OrderedOptions = OrderedOptions()):
        return self.subscription(await self.inner.ordered(stream, subject, options))

    async def push(self, stream: str, subject: str, options: PushOptions = PushOptions()):
        return self.subscription(await self.inner.push(stream, subject, options))

    async def consume(self, stream: str, consumer: str, options: ConsumeOptions = ConsumeOptions()):
        return self.subscription(await self.inner.consume(stream, consumer, options))

    async def close(self) -> None:
        await self.inner.close()


class WrappedStore:
    """A KV bucket or object store that delegates to the inner one; `misbehaviour` is the wrapped session that made it
    (a subclass asks it how to change a call). Not `session`: that name stays the inner store's, through delegation."""

    def __init__(self, inner, misbehaviour) -> None:
        self.inner = inner
        self.misbehaviour = misbehaviour

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class RelayedInbox(Inbox):
    """The inbox the inner subscription fills, relaying each delivery through `relay` to the application's."""

    def __init__(self, relay: Callable[[Delivery], list[Delivery]]) -> None:
        super().__init__()
        self.relay = relay

    def put(self, delivery: Delivery) -> None:
        for each in self.relay(delivery):
            super().put(each)


class WrappedSubscription:
    """Delegates to the inner subscription; its inbox is the inner's, so a wrapper further out can replace it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.effective_idle_heartbeat_s = getattr(inner, "effective_idle_heartbeat_s", None)

    @property
    def inbox(self) -> Inbox:
        return self.inner.inbox

    @inbox.setter
    def inbox(self, inbox: Inbox) -> None:
        self.inner.inbox = inbox

    async def stop(self) -> None:
        await self.inner.stop()


class RelayedSubscription(WrappedSubscription):
    """The inner subscription with its deliveries passed through `relay` before the application sees them."""

    def __init__(self, inner, relay: Callable[[Delivery], list[Delivery]]) -> None:
        super().__init__(inner)
        self.inbox = RelayedInbox(relay)  # the inner subscription delivers into the relaying inbox from now on


class RelayedWatches:
    """A KV bucket or object store whose watchers' updates pass through a relay (a fresh one per watch, from
    `new_relay`) before the application sees them; everything else is the inner one's."""

    def __init__(self, inner, new_relay: Callable[[], Callable]) -> None:
        self.inner = inner
        self.new_relay = new_relay

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def watch(self, *args, **options) -> Watch:
        watch = await self.inner.watch(*args, **options)
        arrived, watch.inbox = watch.inbox, RelayedInbox(self.new_relay())
        for update in arrived.deliveries:  # what came before the relay was in place goes through it too
            watch.inbox.put(update)
        return watch
