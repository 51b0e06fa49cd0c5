"""The client-adapter interface: what a client under test must offer the client-side scenarios.

A scenario never touches a client library directly; it asks an adapter for a session (one connection) and, from
it, an ordered subscription, a push subscription with idle heartbeats or a pull fetch. Everything the client
delivers arrives as a `Delivery`; everything it reports (errors, warnings, missed heartbeats) as a `ClientEvent`
in the session's `EventLog`, so the same scenario can certify another client later.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from jetcheck.credentials import Credentials

# Event kinds an adapter maps its client's reports onto.
MISSED_HEARTBEAT = "missed-heartbeat"  # the client said heartbeats stopped arriving (ADR-37: a warning)
SEQUENCE_MISMATCH = "sequence-mismatch"  # the client said a heartbeat showed a consumer sequence gap
TERMINAL = "terminal"  # the client ended the subscription or consumption
RESET = "reset"  # the client recreated its ordered consumer (informational)
ERROR = "error"  # anything else the client reported


@dataclass(frozen=True)
class Delivery:
    """One message as the client handed it to the application."""

    stream_seq: int
    consumer_seq: int
    subject: str
    payload: bytes
    consumer: str  # the consumer that delivered it, from the message's ack subject
    at: float  # event-loop time it reached the application


@dataclass(frozen=True)
class ClientEvent:
    kind: str
    detail: str
    at: float  # event-loop time


@dataclass(frozen=True)
class StartPolicy:
    """Where an ordered consumer starts: all, by_start_sequence (seq), by_start_time (time), last_per_subject."""

    deliver_policy: str = "all"
    seq: int | None = None
    time: dt.datetime | None = None


# The settings of each consumption request and of a connection: one frozen object each, defined here once, so the
# session protocol, its implementations and the wrappers around them pass one argument instead of each spelling the
# list. Durations are seconds; None leaves a setting to the client's (or the server's) default. Keywords only: a
# setting is named where it is given.


@dataclass(frozen=True, kw_only=True)
class ConsumptionOptions:
    """What every consumption request may set: the idle heartbeat the consumer is asked for."""

    idle_heartbeat: float | None = None


@dataclass(frozen=True, kw_only=True)
class OrderedOptions(ConsumptionOptions):
    """An ordered consumer (ADR-17): where it starts (all when None), and the inactive threshold of each consumer
    it creates."""

    start: StartPolicy | None = None
    inactive_threshold: float | None = None


@dataclass(frozen=True, kw_only=True)
class PushOptions(ConsumptionOptions):
    """A push consumer: ephemeral, or durable `durable` (bound as it is when it exists); shared by queue group
    `queue` (its deliver_group) when given; its inactive threshold."""

    durable: str | None = None
    queue: str | None = None
    inactive_threshold: float | None = None


@dataclass(frozen=True, kw_only=True)
class ConsumeOptions(ConsumptionOptions):
    """Continuous pull consumption: each pull's expiry and the most messages it asks for."""

    expires: float | None = None
    max_messages: int | None = None


@dataclass(frozen=True, kw_only=True)
class ConnectOptions:
    """A session: it reconnects forever every `reconnect_wait` seconds; with `api_prefix` its JetStream context uses
    that API prefix instead of $JS.API (ADR-19), with `inbox_prefix` its inboxes start with that instead of _INBOX."""

    reconnect_wait: float = 0.1
    api_prefix: str = ""
    inbox_prefix: str = ""


# ADR-17 (Consumer Configuration Checks): the consumer an ordered push subscription creates. An ordered pull
# consumer has no flow control; the clients' tables start from these and say where their client departs.
ADR17_ORDERED_PUSH_CONFIG: Mapping[str, object] = {
    "durable_name": None,
    "ack_policy": "none",
    "max_deliver": 1,
    "flow_control": True,
    "mem_storage": True,
    "num_replicas": 1,
}
ADR17_ORDERED_PULL_CONFIG: Mapping[str, object] = {
    key: value for key, value in ADR17_ORDERED_PUSH_CONFIG.items() if key != "flow_control"
}


@dataclass(frozen=True)
class Documented:
    """What the client documents about the behaviours the scenarios look at (recorded next to each finding)."""

    ordered_idle_heartbeat_s: float  # the ordered consumer's heartbeat when the application sets none
    missed_heartbeats: str  # how the client tells the application that heartbeats stopped ("" when it does not)
    heartbeat_behaviour: str = ""  # what the client does instead, in a sentence (for findings)
    min_idle_heartbeat_s: float = 0.0  # the smallest idle heartbeat the client accepts (0: no documented bound)
    below_min_heartbeat: str = ""  # what it does with a smaller one: "raised" (silently) or "refused"; "" if none
    missed_heartbeats_after: int = 2  # missed intervals before the client reports (ADR-37: 2)
    ordered_kind: str = "push"  # the consumer kind its ordered consumer creates: "push" or "pull"
    of_release: str = ""  # the release whose documentation and source this table was read from ("": any)
    # The config (server JSON names) the client documents for the consumer its ordered consumer (re)creates, besides
    # start and filter; a push one also gets the idle heartbeat. A key left out is not checked.
    ordered_config: Mapping[str, object] = field(default_factory=dict)
    consumes: str = "push"  # how it consumes continuously: "push" (session.push) or "pull" (session.consume)
    # Whether its object store watch offers updates-only (nats-py's and nats.go's docs do; ADR-20 lists no such option).
    object_watch_updates_only: bool = True
    # Where the client documents each entry above (field name -> its docs, or the source file and function that does
    # it): a table of facts about someone else's client says where each fact comes from (tests/clients checks it).
    sources: Mapping[str, str] = field(default_factory=dict)

    def idle_heartbeat(self, wanted: float) -> float:
        """The idle heartbeat a check asks for: `wanted`, raised to the smallest the client documents it accepts."""
        return max(wanted, self.min_idle_heartbeat_s)


class ClientError(Exception):
    """The client under test refused or failed an operation; `kind` as the driver protocol names it."""

    def __init__(self, kind: str, message: str, code: int | None = None, err_code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.err_code = err_code


class Unsupported(ClientError):
    """The client has no such feature (or its driver does not implement the operation)."""


class NotInRelease(Exception):
    """The release of the client under test lacks an API that the adapter uses (one that later releases have): every
    rule that needs it is `na` for this release, whatever the check does with a client's refusals (so it is no
    ClientError: no check catches it)."""


class Indeterminate(ClientError):
    """The client could not finish the operation (a timeout, a lost connection, a driver that died): the target's
    answer is unknown, so a check that meets it ends in `error`, never in a pass or a fail."""


async def refusal(operation: Awaitable[object]) -> ClientError | None:
    """The client's refusal of `operation` (its ClientError, Unsupported included), or None when it did what was
    asked. No answer is no refusal: an Indeterminate is raised on, and the check ends in `error`."""
    try:
        await operation
    except Indeterminate:
        raise
    except ClientError as refused:
        return refused
    return None


class EventLog:
    """What the client reported, in order; scenarios await a kind instead of sleeping."""

    def __init__(self) -> None:
        self.events: list[ClientEvent] = []
        self._changed = asyncio.Event()

    def add(self, kind: str, detail: str, at: float | None = None) -> None:
        """Record an event; `at` is when the client reported it (event-loop clock), now when not given."""
        self.events.append(ClientEvent(kind, detail, asyncio.get_running_loop().time() if at is None else at))
        self._changed.set()

    def of(self, kind: str, since: float = 0.0) -> list[ClientEvent]:
        return [e for e in self.events if e.kind == kind and e.at >= since]

    async def wait_for(self, kind: str, since: float, timeout: float) -> ClientEvent | None:
        """The first event of `kind` at or after `since`, waiting up to `timeout`; None if none came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = self.of(kind, since)
            if found:
                return found[0]
            left = deadline - loop.time()
            if left <= 0:
                return None
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return None


@dataclass
class Inbox:
    """Deliveries (or a watcher's updates) in arrival order; `next()` waits for the next one."""

    deliveries: list[Delivery] = field(default_factory=list)
    _queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    def put(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        self._queue.put_nowait(delivery)

    async def next(self, timeout: float) -> Delivery:
        """The next delivery; TimeoutError when none arrives within `timeout`."""
        return await asyncio.wait_for(self._queue.get(), timeout)

    async def until(self, count: int, timeout: float) -> list[Delivery]:
        """Wait until `count` deliveries arrived in all (or `timeout` passed); returns all of them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.deliveries) < count:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                await self.next(left)
            except TimeoutError:
                break
        return list(self.deliveries)


class Watch:
    """A client's watcher (KV, object store): what it yielded, in its order, `None` being its end-of-initial-data
    signal; `stop()` ends it. The adapter puts each update into `inbox` (read anew each time, so a variant may
    replace it with one that relays). `session` is the connection it watches on (asked after a silence)."""

    def __init__(self, stop: Callable[[], Awaitable[None]], session: ClientSession) -> None:
        self.inbox = Inbox()
        self.stopping = stop
        self.session = session

    async def next(self, timeout: float) -> KvEntry | ObjectInfo | None:
        """The next update; TimeoutError when the client yields nothing within `timeout`."""
        return await self.inbox.next(timeout)

    async def stop(self) -> None:
        await self.stopping()


class Subscription(Protocol):
    inbox: Inbox

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class FetchOutcome:
    deliveries: list[Delivery]
    error: ClientEvent | None  # how the fetch ended when it did not end with messages
    took_s: float
    effective_idle_heartbeat_s: float | None = None  # the heartbeat the fetch used (raised, defaulted); None: none


class ClientSession(Protocol):
    """One connection of the client under test."""

    events: EventLog

    async def ordered(self, stream: str, subject: str, options: OrderedOptions = OrderedOptions()) -> Subscription:
        """An ordered consumer (ADR-17) on `subject` of `stream`, delivering into its inbox."""
        ...

    async def push(self, stream: str, subject: str, options: PushOptions = PushOptions()) -> Subscription:
        """A push consumer with idle heartbeats (the client's continuous consumption) on `subject` of `stream`."""
        ...

    async def consume(self, stream: str, consumer: str, options: ConsumeOptions = ConsumeOptions()) -> Subscription:
        """Continuous pull consumption of an existing pull consumer, acking each message; Unsupported if none."""
        ...

    async def fetch(
        self, stream: str, consumer: str, *, batch: int, expires: float, idle_heartbeat: float | None
    ) -> FetchOutcome:
        """One pull fetch on an existing pull consumer."""
        ...

    async def object_store(self, bucket: str) -> ObjectStore:
        """Create (or open) the object store `bucket` with the client's defaults."""
        ...

    async def ping(self, timeout: float) -> None:
        """Return once the connection made a round trip to the server; Indeterminate (or a connection or timeout
        error) when it does not within `timeout` (conformance.silence asks after a silence)."""
        ...

    async def consumer_add(self, stream: str, config: Mapping[str, object], action: str) -> dict:
        """The client's create ("create"), update ("update") or create-or-update ("create_or_update") consumer call
        for `stream` with `config` (server JSON names); the consumer info it returned, as JSON. Unsupported when the
        client has no such call; a refusal keeps the server's code/err_code."""
        ...

    async def publish_retrying(
        self, subject: str, payload: bytes, *, retry_attempts: int, retry_wait: float
    ) -> Mapping[str, object]:
        """The client's JetStream publish asked to retry `retry_attempts` times, `retry_wait` seconds apart, on no
        responders (ADR-22 RetryAttempts, RetryWait; the nearest the client offers); its PubAck as JSON (stream,
        seq). NoStreamResponse when it gave up on no responders; Unsupported when the client has no retries."""
        ...

    async def close(self) -> None: ...


class ClientAdapter(Protocol):
    name: str
    version: str
    documented: Documented

    async def connect(
        self, url: str, credentials: Credentials, options: ConnectOptions = ConnectOptions()
    ) -> ClientSession:
        """A session through `url` as `options` say; Unsupported when the client cannot take a prefix."""
        ...


@contextlib.asynccontextmanager
async def connected(client: ClientAdapter, url: str, credentials: Credentials) -> AsyncIterator[ClientSession]:
    """A session of the client under test at `url` (e.g. the fault proxy), closed afterwards."""
    session = await client.connect(url, credentials)
    try:
        yield session
    finally:
        await session.close()


# --- object store (ADR-20) ---------------------------------------------------------------------------------------


class ObjectNotFound(ClientError):
    """The client said the object (or its bucket) does not exist: its own not-found error, or JS's null."""


class ObjectExists(ClientError):
    """The client refused a name because a live object holds it (a rename onto it)."""


class DigestMismatch(ClientError):
    """The client refused bytes that do not hash to the object's stored digest."""


@dataclass(frozen=True)
class ObjectInfo:
    """An object's info as ADR-20 lays it out (the JSON of its info message), as the client returned it."""

    name: str
    bucket: str = ""
    nuid: str = ""
    size: int = 0
    chunks: int = 0
    digest: str = ""
    deleted: bool = False
    mtime: str | None = None
    description: str = ""
    headers: Mapping[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, info: Mapping[str, object]) -> ObjectInfo:
        return cls(
            name=str(info.get("name", "")),
            bucket=str(info.get("bucket") or ""),
            nuid=str(info.get("nuid") or ""),
            size=int(info.get("size") or 0),
            chunks=int(info.get("chunks") or 0),
            digest=str(info.get("digest") or ""),
            deleted=bool(info.get("deleted")),
            mtime=str(info["mtime"]) if info.get("mtime") else None,
            description=str(info.get("description") or ""),
            headers=dict(info.get("headers") or {}),  # type: ignore[call-overload]
        )


@dataclass(frozen=True)
class ObjectStoreStatus:
    """A bucket's status as the client's status() reported it (ADR-20 ObjectStoreStatus); None for a field the
    client's status does not have."""

    bucket: str
    description: str | None
    ttl: float | None  # seconds; 0 for none
    storage: str | None  # "file" or "memory", the stream's storage
    replicas: int | None
    sealed: bool | None
    size: int | None  # bytes
    backing_store: str | None = None
    metadata: Mapping[str, str] | None = None
    compressed: bool | None = None


class ObjectStore(Protocol):
    """One object store bucket through the client under test, on `session`."""

    session: ClientSession

    async def put(self, name: str, data: bytes, *, chunk_size: int | None = None) -> ObjectInfo:
        """Store `data` under `name` (with the object's own max chunk size when given); the info the client returned."""
        ...

    async def get(self, name: str) -> bytes:
        """The object's bytes; ObjectNotFound when the client says there is none."""
        ...

    async def info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        """The object's info (a deleted one's too when `show_deleted`, if the client can); ObjectNotFound if none."""
        ...

    async def list(self) -> list[ObjectInfo]:
        """What the client's list call returns, with its default options."""
        ...

    async def delete(self, name: str) -> dict:
        """Delete the object; ObjectNotFound when the client raised its not-found error, else what it returned."""
        ...

    async def update_meta(
        self, name: str, *, new_name: str, description: str = "", headers: Mapping[str, list[str]] | None = None
    ) -> None:
        """Set the object's name (a rename when it differs), description and headers; ObjectExists when refused."""
        ...

    async def add_link(self, name: str, target: str) -> ObjectInfo:
        """Link `name` to the object `target` of this bucket (as the client reads its info); Unsupported if none."""
        ...

    async def watch(
        self, *, include_history: bool = False, updates_only: bool = False, ignore_deletes: bool = False
    ) -> Watch:
        """The client's watcher of the bucket's object infos with these options; Unsupported for one it lacks."""
        ...

    async def seal(self) -> None:
        """Seal the bucket with the client's seal (ADR-20 Seal); Unsupported when the client has none."""
        ...

    async def status(self) -> ObjectStoreStatus:
        """The bucket's status through the client's status (ADR-20 Status); Unsupported when it has none."""
        ...


# --- v2: KV (ADR-8) ------------------------------------------------------------------------------------------------

KV_PUT, KV_DEL, KV_PURGE = "PUT", "DEL", "PURGE"


class KeyNotFound(ClientError):
    """The client said the key has no value (never written, deleted or purged)."""


@dataclass(frozen=True)
class KvEntry:
    """One KV entry as the client handed it to the application."""

    bucket: str
    key: str
    value: bytes
    revision: int
    operation: str  # KV_PUT, KV_DEL or KV_PURGE
    created: dt.datetime | None = None


@dataclass(frozen=True)
class KvStatus:
    bucket: str
    values: int  # messages in the bucket stream, history included
    history: int
    ttl: float  # seconds; 0 for none
    limit_marker_ttl: float | None = None  # ADR-48 LimitMarkerTTL, seconds (0: no markers); None: not reported


@dataclass(frozen=True, kw_only=True)
class KvWatchOptions:
    """A KV watcher's options, ADR-8's: every value of each key rather than the last, only what changes after the
    watch starts, no deletes or purges, entries without their values. KeyValue.watch takes them as keywords; an
    adapter's watch gathers them here, so the list stands once outside the protocol."""

    include_history: bool = False
    updates_only: bool = False
    ignore_deletes: bool = False
    meta_only: bool = False


class KeyValue(Protocol):
    """A bucket bound through the client under test, on `session`; write and read errors are ClientError
    (KeyNotFound for gets of a key without a value), API refusals keep the server's code/err_code."""

    session: ClientSession

    bucket: str

    async def put(self, key: str, value: bytes) -> int: ...

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> int:
        """The client's create; with `ttl` (seconds) its per-key TTL (ADR-48: the put carries Nats-TTL)."""
        ...

    async def update(self, key: str, value: bytes, last: int) -> int: ...

    async def get(self, key: str) -> KvEntry: ...

    async def delete(self, key: str) -> None: ...

    async def purge(self, key: str, *, ttl: float | None = None) -> None:
        """The client's purge; with `ttl` (seconds) the purge marker's TTL (ADR-48)."""
        ...

    async def keys(self, filters: list[str] | None = None) -> list[str]:
        """The live keys the client lists, only those matching one of `filters` (key filters) when given."""
        ...

    async def history(self, key: str) -> list[KvEntry]: ...

    async def status(self) -> KvStatus: ...

    async def watch(
        self,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        updates_only: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
    ) -> Watch:
        """The client's watcher of `keys` (a key, a wildcard range, or several) with these options (ADR-8's);
        Unsupported for one the client lacks."""
        ...


# --- JetStream publish retries on no responders (ADR-22) ---------------------------------------------------------


class NoStreamResponse(ClientError):
    """The client gave up publishing after no responders (ADR-22 Errors: 'nats: no response from stream')."""
