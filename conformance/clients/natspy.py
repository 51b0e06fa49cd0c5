"""The nats-py (legacy JetStream API, nats.js) implementation of the client adapter."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import inspect
import time
from collections.abc import Callable
from importlib import metadata

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext

from jetcheck.fixtures.target import Credentials, Target

from .base import (
    ADR17_ORDERED_PUSH_CONFIG,
    ERROR,
    KV_PUT,
    SEQUENCE_MISMATCH,
    ClientError,
    ClientEvent,
    ConnectOptions,
    ConsumeOptions,
    Delivery,
    Documented,
    EventLog,
    FetchOutcome,
    Inbox,
    KvEntry,
    KvStatus,
    KvWatchOptions,
    ObjectInfo,
    ObjectStoreStatus,
    OrderedOptions,
    PushOptions,
    StartPolicy,
    Unsupported,
    Watch,
)
from .natspy_failures import (
    call_shape,
    failures_in_words,
    kv_errors,
    natspy_api_error,
    natspy_failures,
    natspy_lacks,
    not_found_as_adapter_error,
    release_call,
    release_field,
    release_option,
)

# nats.js.client.JetStreamContext.subscribe: an ordered consumer gets idle_heartbeat 5 s unless one is given.
DOCUMENTED = Documented(
    of_release="2.16.0",
    ordered_idle_heartbeat_s=5.0,
    missed_heartbeats="",  # nats-py has no missed-heartbeat error or warning
    heartbeat_behaviour=(
        "only ordered push subscriptions watch heartbeats (every 2 intervals) and reset silently; plain push "
        "subscriptions with idle_heartbeat are never told; fetch(heartbeat=) waits for its whole timeout and "
        "raises FetchTimeoutError if a heartbeat arrived, else nats.errors.TimeoutError"
    ),
    # JetStreamContext.subscribe(ordered_consumer=True): a push consumer with ADR-17's settings, recreated with them.
    ordered_kind="push",
    ordered_config=ADR17_ORDERED_PUSH_CONFIG,
    consumes="push",  # nats-py has no continuous pull consumption (consume()/messages()) to certify
    sources={
        "ordered_idle_heartbeat_s": "nats/js/client.py JetStreamContext.subscribe: ordered_consumer takes "
        "config.idle_heartbeat or 5",
        "missed_heartbeats": "nats/js/client.py: only an ordered subscription's _JSI watches heartbeats "
        "(check_flow_control_response, reset_ordered_consumer); nothing reaches the application",
        "heartbeat_behaviour": "nats/js/client.py _JSI.reset_ordered_consumer; PullSubscription._fetch_n "
        "(FetchTimeoutError once a heartbeat came)",
        "min_idle_heartbeat_s": "nats/js/api.py ConsumerConfig.idle_heartbeat: no minimum documented or enforced",
        "below_min_heartbeat": "nats/js/api.py ConsumerConfig.idle_heartbeat: no minimum, so nothing below it",
        "missed_heartbeats_after": "not reported at all (missed_heartbeats); ADR-37's 2 stands",
        "ordered_kind": "nats/js/client.py JetStreamContext.subscribe(ordered_consumer=True): a push subscription "
        "(pull_subscribe has no ordered mode)",
        "ordered_config": "nats/js/client.py JetStreamContext.subscribe: ordered_consumer sets flow_control, "
        "ack_policy none, max_deliver 1, idle_heartbeat, num_replicas 1, mem_storage; no durable",
        "consumes": "nats/js/client.py: pull_subscribe().fetch() only, no consume() or messages()",
        "object_watch_updates_only": "nats/js/object_store.py ObjectStore.watch(updates_only=False)",
    },
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


def start_config(start: StartPolicy | None, **config) -> api.ConsumerConfig:
    """nats-py's consumer config starting where `start` says (all when None), with `config` besides."""
    start = start or StartPolicy()
    return api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy(start.deliver_policy),
        opt_start_seq=start.seq,
        opt_start_time=start_time(start.time),
        **config,
    )


def start_time(when: dt.datetime | None) -> dt.datetime | str | None:
    """What the installed release's ConsumerConfig.opt_start_time takes: a datetime from 2.14.0 on; before, the
    RFC 3339 text it sends as it is (typed Optional[int] there, but the server reads a time)."""
    takes = {f.name: str(f.type) for f in dataclasses.fields(api.ConsumerConfig)}.get("opt_start_time", "")
    if when is None or "datetime" in takes:
        return when
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        self.api_prefix = ""  # the JetStream API prefix it was connected with ("": $JS.API)

    async def on_error(self, exc: Exception) -> None:
        kind = SEQUENCE_MISMATCH if isinstance(exc, nats.js.errors.ConsumerSequenceMismatchError) else ERROR
        self.events.add(kind, f"{type(exc).__name__}: {exc}")

    @property
    def js(self):
        assert self.nc is not None
        return self.nc.jetstream(prefix=self.api_prefix) if self.api_prefix else self.nc.jetstream()

    async def ordered(
        self, stream: str, subject: str, options: OrderedOptions = OrderedOptions()
    ) -> NatsPySubscription:
        return await self.subscribe(
            stream,
            subject,
            config=start_config(options.start),
            ordered_consumer=True,
            idle_heartbeat=options.idle_heartbeat,
            inactive_threshold=options.inactive_threshold,
        )

    async def push(self, stream: str, subject: str, options: PushOptions = PushOptions()) -> NatsPySubscription:
        config = api.ConsumerConfig(ack_policy=api.AckPolicy.NONE)
        try:
            # PushOptions' fields are js.subscribe's own keywords (idle_heartbeat, durable, queue, inactive_threshold)
            return await self.subscribe(stream, subject, config=config, **dataclasses.asdict(options))
        except nats.js.errors.APIError as exc:
            raise ClientError("api", f"{type(exc).__name__}: {exc}", exc.code, exc.err_code) from exc
        except nats.js.errors.Error as exc:  # the client's own refusal, e.g. a deliver group mismatch
            raise ClientError("invalid", f"{type(exc).__name__}: {exc}") from exc

    async def consume(
        self, stream: str, consumer: str, options: ConsumeOptions = ConsumeOptions()
    ) -> NatsPySubscription:
        raise Unsupported("unsupported", f"nats-py {metadata.version('nats-py')} has no continuous pull consumption")

    async def subscribe(self, stream: str, subject: str, **options) -> NatsPySubscription:
        """nats-py's JetStream push subscription (js.subscribe with `options`), delivering into its inbox."""
        holder = NatsPySubscription(None)
        if "inactive_threshold" not in inspect.signature(self.js.subscribe).parameters:
            threshold = options.pop("inactive_threshold", None)  # before 2.7: a ConsumerConfig field only
            if threshold is not None:
                config = options.get("config") or api.ConsumerConfig()
                options["config"] = dataclasses.replace(config, inactive_threshold=threshold)
        holder.sub = await self.js.subscribe(subject, stream=stream, cb=holder.on_msg, **options)
        self.subscriptions.append(holder)
        return holder

    async def fetch(
        self, stream: str, consumer: str, *, batch: int, expires: float, idle_heartbeat: float | None
    ) -> FetchOutcome:
        heartbeat = {}
        if idle_heartbeat is not None:
            release_option(JetStreamContext.PullSubscription.fetch, "heartbeat")
            heartbeat["heartbeat"] = idle_heartbeat
        sub = await self.js.pull_subscribe_bind(consumer, stream=stream)  # it asks for idle_heartbeat as given
        started = time.monotonic()
        try:
            msgs = await sub.fetch(batch, timeout=expires, **heartbeat)
            return FetchOutcome([delivery(m) for m in msgs], None, time.monotonic() - started, idle_heartbeat)
        except (nats.errors.TimeoutError, nats.js.errors.APIError) as exc:
            event = ClientEvent(ERROR, f"{type(exc).__name__}: {exc}", asyncio.get_running_loop().time())
            return FetchOutcome([], event, time.monotonic() - started, idle_heartbeat)
        finally:
            await sub.unsubscribe()

    async def object_store(self, bucket: str) -> NatsPyObjectStore:
        return NatsPyObjectStore(await release_call(self.js, "create_object_store")(bucket), self)

    async def ping(self, timeout: float) -> None:
        """Return once the connection made a round trip to the server (nats-py's flush)."""
        assert self.nc is not None
        await self.nc.flush(timeout=timeout)

    async def close(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            for sub in self.subscriptions:
                await sub.stop()
            await self.nc.close()


# --- v2: KV (ADR-8) ------------------------------------------------------------------------------------------------


def kv_entry(entry) -> KvEntry:
    return KvEntry(entry.bucket, entry.key, entry.value or b"", entry.revision, entry.operation or KV_PUT)


RELAY_WAIT_S = 60.0


def natspy_watch(watcher, convert: Callable, session: NatsPySession) -> Watch:
    """nats-py's watcher (on `session`) as the adapter's Watch: a task hands each update over as nats-py yields it
    (its None, the end-of-initial-data signal, too) until stop() ends the watcher."""

    async def relay() -> None:
        # updates(), the call every nats-py release has: iterating a watcher ended at None before 2.14.0
        while True:
            try:
                update = await watcher.updates(timeout=RELAY_WAIT_S)
            except nats.errors.TimeoutError:
                continue  # nothing yet: the check decides how long is too long
            if type(update).__name__ == "StopIterSentinel":  # 2.14.0+: the watcher was stopped
                return
            watch.inbox.put(None if update is None else convert(update))

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(nats.errors.Error):  # the connection is already gone: nothing left to stop
            await watcher.stop()

    watch = Watch(stop, session)
    task = asyncio.create_task(relay())
    return watch


@failures_in_words
class NatsPyKeyValue:
    def __init__(self, kv, session: NatsPySession) -> None:
        self.kv = kv
        self.session = session
        self.bucket = kv._name

    async def put(self, key: str, value: bytes) -> int:
        with kv_errors("put"):
            return await self.kv.put(key, value)

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> int:
        options = {}
        if ttl is not None:  # nats-py's per-key TTL: create(msg_ttl=seconds)
            natspy_lacks(self.kv.create, "msg_ttl", metadata.version("nats-py"))
            options["msg_ttl"] = ttl
        with kv_errors("create"):
            return await self.kv.create(key, value, **options)

    async def update(self, key: str, value: bytes, last: int) -> int:
        with kv_errors("update"):
            return await self.kv.update(key, value, last=last)

    async def get(self, key: str) -> KvEntry:
        with kv_errors("get"):
            return kv_entry(await self.kv.get(key))

    async def delete(self, key: str) -> None:
        with kv_errors("delete"):
            await self.kv.delete(key)

    async def purge(self, key: str, *, ttl: float | None = None) -> None:
        options = {}
        if ttl is not None:  # nats-py's purge marker TTL: purge(msg_ttl=seconds)
            natspy_lacks(self.kv.purge, "msg_ttl", metadata.version("nats-py"))
            options["msg_ttl"] = ttl
        with kv_errors("purge"):
            await self.kv.purge(key, **options)

    async def keys(self, filters: list[str] | None = None) -> list[str]:
        options = {"filters": list(filters)} if filters else {}
        with kv_errors("keys"):
            try:
                return await self.kv.keys(**options)
            except nats.js.errors.NoKeysError:  # nats-py's answer for a bucket without live keys
                return []

    async def history(self, key: str) -> list[KvEntry]:
        with kv_errors("history"):
            return [kv_entry(e) for e in await self.kv.history(key)]

    async def status(self) -> KvStatus:
        with kv_errors("status"):
            status = await self.kv.status()
        markers = getattr(status, "marker_ttl", None)  # nats-py's BucketStatus.marker_ttl (ADR-48 LimitMarkerTTL)
        return KvStatus(status.bucket, status.values, status.history, float(status.ttl or 0), float(markers or 0))

    async def watch(self, keys: str | list[str] = ">", **options: bool) -> Watch:
        """KeyValue.watch; `options` are KvWatchOptions', which nats-py's KeyValue.watch takes by the same names."""
        natspy_options = dataclasses.asdict(KvWatchOptions(**options))
        version = metadata.version("nats-py")
        filters = [keys] if isinstance(keys, str) else keys
        if len(filters) != 1:
            raise Unsupported("unsupported", f"nats-py {version}'s KeyValue.watch takes one key or range, not {keys}")
        if natspy_options.pop("updates_only"):  # asked for only when wanted: earlier releases lack it
            natspy_lacks(self.kv.watch, "updates_only", version)
            natspy_options["updates_only"] = True
        with kv_errors("watch"):
            return natspy_watch(await self.kv.watch(filters[0], **natspy_options), kv_entry, self.session)


async def natspy_kv_create(
    session: NatsPySession, bucket: str, *, history=None, ttl=None, limit_marker_ttl=None
) -> NatsPyKeyValue:
    options = {k: v for k, v in (("history", history), ("ttl", ttl)) if v is not None}
    if limit_marker_ttl is not None:  # nats-py's KeyValueConfig.limit_marker_ttl (seconds)
        release_field(api.KeyValueConfig, "limit_marker_ttl")
        options["limit_marker_ttl"] = limit_marker_ttl
    with kv_errors("kv_create"):
        return NatsPyKeyValue(await session.js.create_key_value(bucket=bucket, **options), session)


async def natspy_kv_delete_bucket(session: NatsPySession, bucket: str) -> None:
    """nats-py's JetStreamContext.delete_key_value."""
    with natspy_failures("kv_delete_bucket"), kv_errors("kv_delete_bucket"):
        await session.js.delete_key_value(bucket)


async def natspy_kv_bucket_names(session: NatsPySession) -> list[str]:
    raise Unsupported(
        "unsupported",
        f"nats-py {metadata.version('nats-py')} has no KV bucket lister (nats/js/client.py JetStreamContext: "
        "key_value, create_key_value, delete_key_value only)",
    )


# A section of its own (not a method in the class body) so the adapter's areas merge independently.
NatsPySession.kv_create = natspy_kv_create
NatsPySession.kv_delete_bucket = natspy_kv_delete_bucket
NatsPySession.kv_bucket_names = natspy_kv_bucket_names


class NatsPyAdapter:
    name = "nats-py"
    documented = DOCUMENTED

    def __init__(self) -> None:
        self.version = metadata.version("nats-py")

    def __repr__(self) -> str:  # shown in a failing check's arguments: the client, not an object address
        return f"NatsPyAdapter(nats-py {self.version})"

    async def connect(
        self, url: str, credentials: Credentials, options: ConnectOptions = ConnectOptions()
    ) -> NatsPySession:
        session = NatsPySession()
        session.api_prefix = options.api_prefix  # nc.jetstream(prefix=...) (ADR-19)
        session.nc = await Target(url=url, credentials=credentials).connect(
            url,
            **({"inbox_prefix": options.inbox_prefix} if options.inbox_prefix else {}),
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=options.reconnect_wait,
            error_cb=session.on_error,
        )
        return session


# --- object store ------------------------------------------------------------------------------------------------


def object_info(info: api.ObjectInfo) -> ObjectInfo:
    return ObjectInfo.from_json(info.as_dict())


@failures_in_words
class NatsPyObjectStore:
    def __init__(self, store, session: NatsPySession) -> None:  # nats/js/object_store.py ObjectStore
        self.store = store
        self.session = session

    async def put(self, name: str, data: bytes, *, chunk_size: int | None = None) -> ObjectInfo:
        meta = None
        if chunk_size is not None:
            meta = api.ObjectMeta(name=name, options=api.ObjectMetaOptions(max_chunk_size=chunk_size))
        return object_info(await self.store.put(name, data, meta=meta))

    async def get(self, name: str) -> bytes:
        with not_found_as_adapter_error():
            return (await self.store.get(name)).data or b""

    async def info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        with not_found_as_adapter_error():
            return object_info(await self.store.get_info(name, show_deleted=show_deleted))

    async def list(self) -> list[ObjectInfo]:
        return [object_info(i) for i in await self.store.list()]

    async def delete(self, name: str) -> dict:
        with not_found_as_adapter_error():
            result = await self.store.delete(name)  # annotated ObjectResult; nats-py 2.16 returns None
        return {"result": repr(result)}

    async def update_meta(
        self, name: str, *, new_name: str, description: str = "", headers: dict[str, list[str]] | None = None
    ) -> None:
        meta = api.ObjectMeta(name=new_name, description=description or None, headers=headers or None)
        with not_found_as_adapter_error():
            await self.store.update_meta(name, meta)

    async def add_link(self, name: str, target: str) -> ObjectInfo:
        raise Unsupported("unsupported", f"nats-py {metadata.version('nats-py')}'s ObjectStore has no add_link")

    async def watch(
        self, *, include_history: bool = False, updates_only: bool = False, ignore_deletes: bool = False
    ) -> Watch:
        options = {"include_history": include_history, "ignore_deletes": ignore_deletes}
        if updates_only:
            release_option(self.store.watch, "updates_only")
            options["updates_only"] = True
        return natspy_watch(await self.store.watch(**options), object_info, self.session)

    async def seal(self) -> None:
        await self.store.seal()

    async def status(self) -> ObjectStoreStatus:
        """nats-py's ObjectStoreStatus has no backing store, metadata or compression (nats/js/object_store.py)."""
        status = await self.store.status()
        storage = status.storage_type
        return ObjectStoreStatus(
            bucket=status.bucket,
            description=status.description,
            ttl=float(status.ttl or 0),
            storage=str(getattr(storage, "value", storage)) if storage is not None else None,
            replicas=status.replicas,
            sealed=status.sealed,
            size=status.size,
        )


# --- consumer create, update, create-or-update (ADR-37) ----------------------------------------------------------

# nats/js/manager.py JetStreamManager: add_consumer(stream, config) is nats-py's only consumer call; it sends no
# action (the server creates or updates), so it is the create-or-update call and there is no create or update.
NATSPY_CONSUMER_CALLS = "nats/js/manager.py JetStreamManager.add_consumer (no action: create or update)"


async def natspy_consumer_add(session: NatsPySession, stream: str, config, action: str) -> dict:
    version = metadata.version("nats-py")
    if action != "create_or_update":
        missing = f"nats-py {version} has no {action}-only consumer call ({NATSPY_CONSUMER_CALLS})"
        raise Unsupported("unsupported", missing)
    with natspy_failures("add_consumer"):
        try:
            info = await session.js.add_consumer(stream, config=api.ConsumerConfig.from_response(dict(config)))
        except nats.js.errors.APIError as exc:
            raise natspy_api_error("add_consumer", exc) from None
    return info.as_dict()


NatsPySession.consumer_add = natspy_consumer_add


# --- JetStream publish retries on no responders (ADR-22) ---------------------------------------------------------


async def natspy_publish_retrying(session: NatsPySession, subject: str, payload: bytes, **retry) -> dict:
    raise Unsupported(
        "unsupported",
        f"nats-py {metadata.version('nats-py')}'s {call_shape(session.js.publish)} has no retries: no responders "
        "raises NoStreamResponseError at once (nats/js/client.py)",
    )


NatsPySession.publish_retrying = natspy_publish_retrying
