"""The client adapter over a driver program: any client library wrapped in a program speaking drivers/PROTOCOL.md,
reached through the pipe of driver_pipe.DriverProcess (sessions, subscriptions, KV and object store as requests).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import itertools
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from jetcheck.credentials import Credentials

from .base import (
    ERROR,
    KV_PUT,
    ClientError,
    ClientEvent,
    ConnectOptions,
    ConsumeOptions,
    ConsumptionOptions,
    Delivery,
    Documented,
    EventLog,
    FetchOutcome,
    Inbox,
    KeyNotFound,
    KvEntry,
    KvStatus,
    KvWatchOptions,
    ObjectInfo,
    ObjectStoreStatus,
    OrderedOptions,
    PushOptions,
    StartPolicy,
    Watch,
)
from .driver_pipe import EVENT_KINDS, REQUEST_TIMEOUT_S, DriverGone, DriverProcess


def credentials_request(credentials: Credentials) -> dict:
    fields = ("user", "password", "token", "nkey_seed", "creds", "tls_ca", "tls_cert", "tls_key")
    return {name: getattr(credentials, name) for name in fields if getattr(credentials, name)}


def delivery_from(record: dict, at: float) -> Delivery:
    return Delivery(
        stream_seq=int(record["stream_seq"]),
        consumer_seq=int(record["consumer_seq"]),
        subject=record.get("subject", ""),
        payload=base64.b64decode(record.get("payload_b64") or ""),
        consumer=record.get("consumer", ""),
        at=at,
    )


def start_request(start: StartPolicy | None) -> dict | None:
    if start is None:
        return None
    when = start.time.isoformat() if start.time is not None else None
    return {"deliver_policy": start.deliver_policy, "seq": start.seq, "time": when}


# PROTOCOL.md names a duration (seconds) with an `_s` suffix; every other setting keeps its options field's name.
SECONDS_FIELDS = frozenset({"idle_heartbeat", "inactive_threshold", "expires", "reconnect_wait"})


def request_fields(options: ConsumptionOptions | ConnectOptions | KvWatchOptions) -> dict:
    """A request's options (any of base.py's) as the fields of its PROTOCOL.md request (a start policy as its
    JSON)."""
    fields = {}
    for each in dataclasses.fields(options):
        value = getattr(options, each.name)
        name = f"{each.name}_s" if each.name in SECONDS_FIELDS else each.name
        fields[name] = start_request(value) if isinstance(value, StartPolicy) else value
    return fields


class DriverSubscription:
    def __init__(self, session: DriverSession, sub_id: str) -> None:
        self.session = session
        self.id = sub_id
        self.inbox = Inbox()
        self.answer: dict = {}  # what the driver said when it started (effective heartbeat, consumer name)

    @property
    def effective_idle_heartbeat_s(self) -> float | None:
        """The idle heartbeat the client actually uses, when the driver says (a client may raise a small one)."""
        value = self.answer.get("effective_idle_heartbeat_s")
        return float(value) if value is not None else None

    def on_delivery(self, record: dict) -> None:
        self.inbox.put(delivery_from(record, self.session.process.loop_time(record.get("at_ns"))))

    async def stop(self) -> None:
        await self.session.stop_sub(self.id)


class DriverSession:
    """One connection of the driven client."""

    def __init__(self, process: DriverProcess, session_id: str, ids: itertools.count) -> None:
        self.process = process
        self.id = session_id
        self.events = EventLog()
        self.subscriptions: list[DriverSubscription] = []
        self.watches: list[str] = []  # the sub ids of its watches, unrouted when it closes
        self._ids = ids

    def on_event(self, record: dict) -> None:
        kind = EVENT_KINDS.get(record.get("kind", ""), ERROR)
        detail = str(record.get("detail", ""))
        if kind == ERROR and record.get("kind") != ERROR:  # a kind this version of jetcheck does not know
            detail = f"{record.get('kind')}: {detail}"
        self.events.add(kind, detail, self.process.loop_time(record.get("at_ns")))

    async def stop_sub(self, sub_id: str) -> None:
        """Ask the driver to stop subscription or watch `sub_id` (PROTOCOL.md `stop`); its records go nowhere after."""
        try:
            if not self.process.dead:
                await self.process.request("stop", sub=sub_id)
        finally:
            self.process.unroute("sub", sub_id)

    async def _subscribe(self, op: str, tag: str, **args) -> DriverSubscription:
        sub = DriverSubscription(self, f"{tag}{next(self._ids)}")
        # routed before asking: the first deliveries may overtake the answer
        self.process.route("sub", sub.id, sub.on_delivery)
        try:
            sub.answer = await self.process.request(op, session=self.id, sub=sub.id, **args)
        except BaseException:
            self.process.unroute("sub", sub.id)
            raise
        self.subscriptions.append(sub)
        return sub

    async def streamed_watch(self, start: Callable[[str], Awaitable[dict]], update: Callable[[dict], object]) -> Watch:
        """A watcher the driver streams (`watch` records for its sub): `start(sub)` asks for it, `update(record)`
        reads one record's entry or info (None: the client's end-of-initial-data signal)."""
        sub_id = f"w{next(self._ids)}"
        process = self.process
        watch = Watch(lambda: self.stop_sub(sub_id), self)
        process.route("sub", sub_id, lambda record: watch.inbox.put(update(record)))  # before: updates may overtake
        try:
            await start(sub_id)
        except BaseException:
            process.unroute("sub", sub_id)
            raise
        self.watches.append(sub_id)
        return watch

    async def ordered(
        self, stream: str, subject: str, options: OrderedOptions = OrderedOptions()
    ) -> DriverSubscription:
        return await self._subscribe("ordered", "o", stream=stream, subject=subject, **request_fields(options))

    async def push(self, stream: str, subject: str, options: PushOptions = PushOptions()) -> DriverSubscription:
        return await self._subscribe("push", "p", stream=stream, subject=subject, **request_fields(options))

    async def consume(
        self, stream: str, consumer: str, options: ConsumeOptions = ConsumeOptions()
    ) -> DriverSubscription:
        """Continuous pull consumption of an existing pull consumer, acking each message."""
        return await self._subscribe("consume", "c", stream=stream, consumer=consumer, **request_fields(options))

    async def fetch(
        self, stream: str, consumer: str, *, batch: int, expires: float, idle_heartbeat: float | None
    ) -> FetchOutcome:
        answer = await self.pull(
            "fetch", stream, consumer, batch=batch, expires=expires, idle_heartbeat_s=idle_heartbeat
        )
        deliveries = [delivery_from(r, self.process.loop_time(r.get("at_ns"))) for r in answer.get("deliveries", [])]
        error = answer.get("error")
        event = None
        if error:
            kind = EVENT_KINDS.get(error.get("kind", ""), error.get("kind") or ERROR)
            event = ClientEvent(kind, str(error.get("detail", "")), asyncio.get_running_loop().time())
        heartbeat = answer.get("effective_idle_heartbeat_s")
        return FetchOutcome(
            deliveries, event, float(answer.get("took_s", 0.0)), float(heartbeat) if heartbeat is not None else None
        )

    async def pull(self, op: str, stream: str, consumer: str, *, batch: int, expires: float, **more) -> dict:
        """The driver's answer to a pull (`fetch`, `js_group_fetch`) of `batch` messages expiring after `expires`
        seconds, with `more` arguments: a pull may take its whole expiry, so the request waits that much longer."""
        return await self.process.request(
            op,
            timeout=expires + REQUEST_TIMEOUT_S,
            session=self.id,
            stream=stream,
            consumer=consumer,
            batch=batch,
            expires_s=expires,
            **more,
        )

    async def object_store(self, bucket: str) -> DriverObjectStore:
        store = DriverObjectStore(self, bucket)
        await store.request("obj_create")
        return store

    async def ping(self, timeout: float) -> None:
        """Return once the driven client's connection made a round trip to the server (PROTOCOL.md `ping`)."""
        await self.process.request("ping", timeout=timeout, session=self.id)

    async def close(self) -> None:
        try:
            if not self.process.dead:
                await self.process.request("close", session=self.id)
        finally:
            for sub in self.subscriptions:
                self.process.unroute("sub", sub.id)
            for sub_id in self.watches:
                self.process.unroute("sub", sub_id)
            self.process.unroute("session", self.id)


class DriverObjectStore:
    """An object store bucket through the driver's `obj_*` ops (PROTOCOL.md "v2: object store")."""

    def __init__(self, session: DriverSession, bucket: str) -> None:
        self.session = session
        self.bucket = bucket

    async def request(self, op: str, **args) -> dict:
        return await self.session.process.request(op, session=self.session.id, obj={"bucket": self.bucket, **args})

    async def put(self, name: str, data: bytes, *, chunk_size: int | None = None) -> ObjectInfo:
        data_b64 = base64.b64encode(data).decode()
        answer = await self.request("obj_put", name=name, data_b64=data_b64, chunk_size=chunk_size)
        return ObjectInfo.from_json(answer["info"])

    async def get(self, name: str) -> bytes:
        return base64.b64decode((await self.request("obj_get", name=name)).get("data_b64") or "")

    async def info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        return ObjectInfo.from_json((await self.request("obj_info", name=name, show_deleted=show_deleted))["info"])

    async def list(self) -> list[ObjectInfo]:
        return [ObjectInfo.from_json(i) for i in (await self.request("obj_list")).get("infos", [])]

    async def delete(self, name: str) -> dict:
        return await self.request("obj_delete", name=name)

    async def update_meta(
        self, name: str, *, new_name: str, description: str = "", headers: Mapping[str, list[str]] | None = None
    ) -> None:
        meta = {"name": new_name, "description": description, "headers": dict(headers or {})}
        await self.request("obj_update_meta", name=name, meta=meta)

    async def add_link(self, name: str, target: str) -> ObjectInfo:
        return ObjectInfo.from_json((await self.request("obj_add_link", name=name, target=target))["info"])

    async def watch(
        self, *, include_history: bool = False, updates_only: bool = False, ignore_deletes: bool = False
    ) -> Watch:
        options = {"include_history": include_history, "updates_only": updates_only, "ignore_deletes": ignore_deletes}
        return await self.session.streamed_watch(
            lambda sub: self.request("obj_watch", sub=sub, **options),
            lambda record: ObjectInfo.from_json(record["info"]) if record.get("info") is not None else None,
        )

    async def seal(self) -> None:
        await self.request("obj_seal")

    async def status(self) -> ObjectStoreStatus:
        """The client's status as the driver reports it (PROTOCOL.md `obj_status`; a field it lacks is null)."""
        status = (await self.request("obj_status"))["status"]
        ttl = status.get("ttl_s")
        return ObjectStoreStatus(
            bucket=status.get("bucket", ""),
            description=status.get("description"),
            ttl=float(ttl) if ttl is not None else None,
            storage=status.get("storage"),
            replicas=status.get("replicas"),
            sealed=status.get("sealed"),
            size=status.get("size"),
            backing_store=status.get("backing_store"),
            metadata=status.get("metadata"),
            compressed=status.get("compressed"),
        )


class DriverAdapter:
    """A client under test behind a driver process, started on first use and shared by every check of the run."""

    def __init__(
        self,
        client: str,
        documented: Documented,
        launch: Callable[[], tuple[list[str], Path | None]],
        expected_version: str = "",
    ) -> None:
        self.client = client
        self.name = client
        self.modes: list[str] = []  # the driver's misbehave modes (the suite's own proofs), in the name too
        self.documented = documented
        self._launch = launch  # builds the driver if needed; returns its command and working directory
        self._expected_version = expected_version
        self._process: DriverProcess | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def __repr__(self) -> str:  # shown in a failing check's arguments: the client, not an object address
        return f"DriverAdapter({self.name} {self.version})"

    @property
    def version(self) -> str:
        """The client library's exact version: as the driver says once it runs, as pinned before."""
        if self._process is not None and self._process.hello:
            return normalise_version(str(self._process.hello.get("version", "")))
        return normalise_version(self._expected_version)

    @property
    def runtime(self) -> str:
        return str(self._process.hello.get("runtime", "")) if self._process is not None else ""

    def process(self) -> DriverProcess:
        """The running driver, started (and built) on the first call; DriverGone once it died."""
        with self._lock:
            if self._process is None:
                command, cwd = self._launch()
                process = DriverProcess(command, f"{self.client} driver", cwd)
                self._process = process
                try:
                    process.start()
                    if self.modes:
                        process.request_sync("misbehave", modes=self.modes)
                except (DriverGone, ClientError) as exc:
                    process.kill(str(exc))
                    if isinstance(exc, ClientError):
                        process.dead = f"the {self.client} driver refused {exc}"
            if self._process.dead:
                raise DriverGone(self._process.dead)
            return self._process

    def misbehave(self, modes: list[str]) -> None:
        """Make the driver misreport in these ways (drivers/PROTOCOL.md `misbehave`) from its start on; the name
        carries them so no result passes for the real client."""
        with self._lock:
            self.modes = [*self.modes, *modes]
            self.name = "+".join([self.client, *self.modes])
            if self._process is not None and not self._process.dead:
                self._process.request_sync("misbehave", modes=modes)

    async def connect(
        self, url: str, credentials: Credentials, options: ConnectOptions = ConnectOptions()
    ) -> DriverSession:
        process = self.process()
        # PROTOCOL.md connect's api_prefix and inbox_prefix (ADR-19) are optional: sent only when set
        connection = {name: value for name, value in request_fields(options).items() if value != ""}
        session = DriverSession(process, f"s{next(self._ids)}", self._ids)
        secrets = credentials_request(credentials)
        process.secrets.extend(v for k, v in secrets.items() if k in ("password", "token"))
        process.route("session", session.id, session.on_event)
        try:
            await process.request("connect", session=session.id, url=url, credentials=secrets, **connection)
        except BaseException:
            process.unroute("session", session.id)
            raise
        return session

    def shutdown(self) -> None:
        with self._lock:
            if self._process is not None:
                self._process.shutdown()


def normalise_version(version: str) -> str:
    """Go's module versions carry a `v` (v1.55.0), the libraries' own constants do not: one spelling in results."""
    return version.removeprefix("v")


# --- v2: KV (ADR-8) ------------------------------------------------------------------------------------------------


def kv_entry_from(record: dict) -> KvEntry:
    created = record.get("created")
    return KvEntry(
        bucket=record.get("bucket", ""),
        key=record.get("key", ""),
        value=base64.b64decode(record.get("value_b64") or ""),
        revision=int(record.get("revision", 0)),
        operation=record.get("operation") or KV_PUT,
        created=dt.datetime.fromisoformat(created) if created else None,
    )


class DriverKeyValue:
    """A bucket of the driven client; every call is one `kv_*` request naming the session and the bucket."""

    def __init__(self, session: DriverSession, bucket: str) -> None:
        self.session = session
        self.bucket = bucket

    async def _ask(self, op: str, **args) -> dict:
        try:
            return await self.session.process.request(op, session=self.session.id, bucket=self.bucket, **args)
        except ClientError as exc:
            if exc.kind == "not_found":
                raise KeyNotFound(exc.kind, str(exc), exc.code, exc.err_code) from None
            raise

    async def _write(self, op: str, key: str, value: bytes, **args) -> int:
        answer = await self._ask(op, key=key, value_b64=base64.b64encode(value).decode(), **args)
        return int(answer["revision"])

    async def put(self, key: str, value: bytes) -> int:
        return await self._write("kv_put", key, value)

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> int:
        return await self._write("kv_create_key", key, value, key_ttl_s=ttl)

    async def update(self, key: str, value: bytes, last: int) -> int:
        return await self._write("kv_update", key, value, last=last)

    async def get(self, key: str) -> KvEntry:
        return kv_entry_from((await self._ask("kv_get", key=key))["entry"])

    async def delete(self, key: str) -> None:
        await self._ask("kv_delete", key=key)

    async def purge(self, key: str, *, ttl: float | None = None) -> None:
        await self._ask("kv_purge", key=key, key_ttl_s=ttl)

    async def keys(self, filters: list[str] | None = None) -> list[str]:
        return list((await self._ask("kv_keys", filters=list(filters or [])))["keys"])

    async def history(self, key: str) -> list[KvEntry]:
        return [kv_entry_from(r) for r in (await self._ask("kv_history", key=key))["entries"]]

    async def status(self) -> KvStatus:
        answer = await self._ask("kv_status")
        markers = answer.get("limit_marker_ttl_s")  # ADR-48 LimitMarkerTTL; absent: the driver does not report it
        return KvStatus(
            answer["bucket"],
            int(answer["values"]),
            int(answer["history"]),
            float(answer["ttl_s"]),
            float(markers) if markers is not None else None,
        )

    async def watch(self, keys: str | list[str] = ">", **options: bool) -> Watch:
        """KeyValue.watch; `options` are KvWatchOptions'."""
        request = {"keys": [keys] if isinstance(keys, str) else list(keys), **request_fields(KvWatchOptions(**options))}
        return await self.session.streamed_watch(
            lambda sub: self._ask("kv_watch", sub=sub, **request),
            lambda record: kv_entry_from(record["entry"]) if record.get("entry") is not None else None,
        )


async def driver_kv_create(
    session: DriverSession, bucket: str, *, history=None, ttl=None, limit_marker_ttl=None
) -> DriverKeyValue:
    kv = DriverKeyValue(session, bucket)
    await kv._ask("kv_create", history=history, ttl_s=ttl, limit_marker_ttl_s=limit_marker_ttl)
    return kv


async def driver_kv_delete_bucket(session: DriverSession, bucket: str) -> None:
    """The client's delete of the bucket (PROTOCOL.md `kv_delete_bucket`)."""
    await DriverKeyValue(session, bucket)._ask("kv_delete_bucket")


async def driver_kv_bucket_names(session: DriverSession) -> list[str]:
    """The bucket names the client's bucket lister gives (PROTOCOL.md `kv_bucket_names`)."""
    return list((await session.process.request("kv_bucket_names", session=session.id))["names"])


# A section of its own (not a method in the class body) so the adapter's areas merge independently.
DriverSession.kv_create = driver_kv_create
DriverSession.kv_delete_bucket = driver_kv_delete_bucket
DriverSession.kv_bucket_names = driver_kv_bucket_names


# --- consumer create, update, create-or-update (ADR-37) ----------------------------------------------------------


async def driver_consumer_add(session: DriverSession, stream: str, config, action: str) -> dict:
    answer = await session.process.request(
        "consumer_add", session=session.id, stream=stream, action=action, config=dict(config)
    )
    return answer.get("info") or {}


DriverSession.consumer_add = driver_consumer_add


# --- JetStream publish retries on no responders (ADR-22) ---------------------------------------------------------


async def driver_publish_retrying(
    session: DriverSession, subject: str, payload: bytes, *, retry_attempts: int, retry_wait: float
) -> dict:
    return await session.process.request(
        "publish_retrying",
        session=session.id,
        subject=subject,
        payload_b64=base64.b64encode(payload).decode(),
        retry_attempts=retry_attempts,
        retry_wait_s=retry_wait,
    )


DriverSession.publish_retrying = driver_publish_retrying
