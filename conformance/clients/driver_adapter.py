"""The client adapter over a driver process: any client library wrapped in a program speaking drivers/PROTOCOL.md.

One driver process serves a whole certify run. pytest-asyncio gives every check its own event loop, so the process
belongs to no loop: a reader thread takes its stdout line by line and hands each answer, delivery and event to the
loop that asked for it (`call_soon_threadsafe`); requests are written from the asking loop's thread under a lock.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import contextlib
import datetime as dt
import itertools
import json
import os
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from jetcheck.fixtures import children
from jetcheck.fixtures.target import Credentials

from .base import (
    ERROR,
    KV_PUT,
    MISSED_HEARTBEAT,
    RESET,
    SEQUENCE_MISMATCH,
    TERMINAL,
    ClientError,
    ClientEvent,
    Delivery,
    DigestMismatch,
    Documented,
    EventLog,
    FetchOutcome,
    Inbox,
    Indeterminate,
    KeyNotFound,
    KvEntry,
    KvStatus,
    NoStreamResponse,
    NotInRelease,
    ObjectExists,
    ObjectInfo,
    ObjectNotFound,
    ObjectStoreStatus,
    StartPolicy,
    Unsupported,
    Watch,
)

PROTOCOL = 3  # v3: watches (kv_watch, obj_watch)
NOT_IN_RELEASE = "not_in_release"  # an error kind: the client's release lacks the API the op needs (PROTOCOL.md)
REQUEST_TIMEOUT_S = 30.0  # an answer the driver owes (a fetch gets its own expiry on top)
HELLO_TIMEOUT_S = 30.0  # node's first start on a loaded machine
CLOCK_SAMPLES = 5  # hello round trips after the first, to map the driver's clock onto ours
SHUTDOWN_TIMEOUT_S = 5.0
EVENT_KINDS = {k: k for k in (MISSED_HEARTBEAT, SEQUENCE_MISMATCH, RESET, TERMINAL, ERROR)}
# The suite's own settings travel to pytest in JETCHECK_* variables, secrets included: never into a driver.
PRIVATE_ENV_PREFIX = "JETCHECK_"


class DriverGone(ConnectionError):
    """The driver process is not running (it exited, or never answered): nothing more can be asked of it."""


class DriverTimeout(Indeterminate, TimeoutError):
    """The client (or its driver) gave up on an operation in time: the outcome is unknown."""


class DriverConnectionError(Indeterminate, ConnectionError):
    """The client could not reach the server."""


def error_for(op: str, error: dict) -> ClientError | NotInRelease:
    kind = error.get("kind", "other")
    if kind == NOT_IN_RELEASE:  # the driver's message names the release and what it lacks
        return NotInRelease(error.get("message", "") or f"{op}: not in this release of the client")
    message = f"{op}: {kind}: {error.get('message', '')}"
    cls = {
        "unsupported": Unsupported,
        "timeout": DriverTimeout,
        "connection": DriverConnectionError,
        "not_found": ObjectNotFound,
        "exists": ObjectExists,
        "digest_mismatch": DigestMismatch,
        "no_responders": NoStreamResponse,
    }.get(kind, ClientError)
    return cls(kind, message, error.get("code"), error.get("err_code"))


Handler = Callable[[dict], None]


@dataclass
class Route:
    """Where records for one session or subscription go: a handler run on the loop that owns it."""

    loop: asyncio.AbstractEventLoop
    handler: Handler

    def send(self, record: dict) -> None:
        # RuntimeError: the check that owned it has ended and its loop is closed; nobody is listening
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.handler, record)


class DriverProcess:
    """A running driver: requests out, answers and streamed records in, its death noticed and explained."""

    def __init__(self, command: list[str], label: str, cwd: Path | None = None) -> None:
        self.label = label  # e.g. "nats.js driver", for messages
        self.dead = ""  # why it can no longer be used, once it cannot
        self._closing = ""  # why it is being shut down on purpose
        self.hello: dict = {}
        self.secrets: list[str] = []  # credential values sent to it, kept out of every message it causes
        self._ids = itertools.count(1)
        self._write_lock = threading.RLock()  # _died takes it too, also from within _send
        self._pending: dict[int, Callable[[dict], None]] = {}
        self._routes: dict[tuple[str, str], Route] = {}  # ("sub"|"session", id) -> route
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._clock_offset = 0.0  # time.monotonic() - driver monotonic seconds
        env = {k: v for k, v in os.environ.items() if not k.startswith(PRIVATE_ENV_PREFIX)}
        try:
            # in a session of its own: a Ctrl-C reaches pytest, which shuts the driver down in order
            self.proc = children.start(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
            )
        except OSError as exc:
            raise DriverGone(f"the {label} could not start: {exc.strerror or exc}") from None
        self._readers = [
            threading.Thread(target=self._read_stdout, name=f"{label} stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"{label} stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    # --- talking to it ------------------------------------------------------------------------------------------

    def start(self) -> dict:
        """Say hello (blocking); learn the client's name, version and the driver's clock."""
        hello = self.request_sync("hello", HELLO_TIMEOUT_S)
        if hello.get("protocol") != PROTOCOL:
            self.kill(f"the {self.label} speaks protocol {hello.get('protocol')!r}, not {PROTOCOL}")
            raise DriverGone(self.dead)
        self.hello = hello
        # mono_ns is read between our send and its answer, so the midpoint is within half a round trip of it. The
        # first answer waits for the runtime to start (node: ~0.1-0.2 s), so the clock comes from the quickest of a
        # few more round trips.
        samples = []
        for _ in range(CLOCK_SAMPLES):
            asked = time.monotonic()
            again = self.request_sync("hello", HELLO_TIMEOUT_S)
            answered = time.monotonic()
            samples.append((answered - asked, (asked + answered) / 2 - int(again.get("mono_ns", 0)) / 1e9))
        self._clock_offset = min(samples)[1]
        return hello

    def _send(self, op: str, args: dict, settle: Callable[[dict], None]) -> int:
        with self._write_lock:
            if self.dead:
                raise DriverGone(self.dead)
            request_id = next(self._ids)
            self._pending[request_id] = settle
            line = json.dumps({"id": request_id, "op": op, **args}, separators=(",", ":")) + "\n"
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line.encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._pending.pop(request_id, None)
                self._died()
                raise DriverGone(self.dead) from None
        return request_id

    def request_sync(self, op: str, timeout: float = REQUEST_TIMEOUT_S, **args) -> dict:
        """A request from outside any event loop (hello, shutdown)."""
        answer: concurrent.futures.Future[dict] = concurrent.futures.Future()
        request_id = self._send(op, args, answer.set_result)
        try:
            message = answer.result(timeout)
        except concurrent.futures.TimeoutError:
            raise DriverGone(f"the {self.label} did not answer {op} within {timeout:.0f} s") from None
        finally:
            self._pending.pop(request_id, None)
        return self._result(op, message)

    async def request(self, op: str, timeout: float = REQUEST_TIMEOUT_S, **args) -> dict:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict] = loop.create_future()

        def settle(message: dict) -> None:
            Route(loop, lambda m: answer.done() or answer.set_result(m)).send(message)

        request_id = self._send(op, args, settle)
        try:
            message = await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            raise DriverTimeout("timeout", f"the {self.label} did not answer {op} within {timeout:.0f} s") from None
        finally:
            self._pending.pop(request_id, None)
        return self._result(op, message)

    def _result(self, op: str, message: dict) -> dict:
        if message.get("gone"):
            raise DriverGone(self.dead)
        if message.get("ok"):
            return message.get("result") or {}
        raise error_for(op, message.get("error") or {})

    def route(self, kind: str, key: str, handler: Handler) -> None:
        self._routes[(kind, key)] = Route(asyncio.get_running_loop(), handler)

    def unroute(self, kind: str, key: str) -> None:
        self._routes.pop((kind, key), None)

    def loop_time(self, at_ns: int | None) -> float:
        """The driver's monotonic `at_ns` on the running loop's clock."""
        loop = asyncio.get_running_loop()
        if at_ns is None:
            return loop.time()
        return int(at_ns) / 1e9 + self._clock_offset + (loop.time() - time.monotonic())

    # --- what it says -------------------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            self._read_messages(self.proc.stdout)
        self._died()

    def _read_messages(self, stdout) -> None:
        for raw in stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                self._stderr_tail.append("(not JSON on stdout) " + raw.decode(errors="replace").strip()[:200])
                continue
            if not isinstance(message, dict):
                continue
            if "id" in message:
                settle = self._pending.pop(message["id"], None)
                if settle is not None:
                    settle(message)
            elif message.get("type") in ("delivery", "watch", "load"):
                self._dispatch(("sub", str(message.get("sub"))), message)
            elif message.get("type") == "event":
                self._dispatch(("session", str(message.get("session"))), message)

    def _dispatch(self, key: tuple[str, str], record: dict) -> None:
        route = self._routes.get(key)
        if route is not None:
            route.send(record)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                if line:
                    self._stderr_tail.append(line)

    def _died(self) -> None:
        if not self.dead and self._closing:
            self.dead = self._closing
        if not self.dead:
            try:
                status = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                status = None
            if self._readers[1] is not threading.current_thread():
                self._readers[1].join(1.0)  # its last words on stderr explain the exit
            said = self._redact(self._stderr_tail[-1]) if self._stderr_tail else "nothing on stderr"
            how = f"exited with status {status}" if status is not None else "closed its output"
            self.dead = f"the {self.label} {how} ({said}); client checks cannot run"
        with self._write_lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for settle in pending:
            settle({"gone": True})

    def _redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    @property
    def log_tail(self) -> list[str]:
        return [self._redact(line) for line in self._stderr_tail]

    # --- ending it ----------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Ask it to exit; kill it if it does not within a few seconds."""
        self._closing = f"the {self.label} was shut down at the end of the run"
        if self.proc.poll() is None and not self.dead:
            with contextlib.suppress(DriverGone, ClientError):  # it is killed below either way
                self.request_sync("shutdown", SHUTDOWN_TIMEOUT_S)
        self.kill(self._closing)

    def kill(self, reason: str) -> None:
        self.dead = self.dead or reason
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):  # a broken pipe: the driver is gone already
            self.proc.stdin.close()  # a driver exits when stdin closes
        children.stop(self.proc, SHUTDOWN_TIMEOUT_S, ask=None)
        for reader in self._readers:
            if reader is not threading.current_thread():
                reader.join(SHUTDOWN_TIMEOUT_S)  # each closes its pipe at the end of its output


# --- the adapter -------------------------------------------------------------------------------------------------


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
        process = self.session.process
        try:
            if not process.dead:
                await process.request("stop", sub=self.id)
        finally:
            process.unroute("sub", self.id)


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

        async def stop() -> None:
            try:
                if not process.dead:
                    await process.request("stop", sub=sub_id)
            finally:
                process.unroute("sub", sub_id)

        watch = Watch(stop, self)
        process.route("sub", sub_id, lambda record: watch.inbox.put(update(record)))  # before: updates may overtake
        try:
            await start(sub_id)
        except BaseException:
            process.unroute("sub", sub_id)
            raise
        self.watches.append(sub_id)
        return watch

    async def ordered(
        self,
        stream: str,
        subject: str,
        *,
        idle_heartbeat: float | None = None,
        start: StartPolicy | None = None,
        inactive_threshold: float | None = None,
    ) -> DriverSubscription:
        return await self._subscribe(
            "ordered",
            "o",
            stream=stream,
            subject=subject,
            idle_heartbeat_s=idle_heartbeat,
            start=start_request(start),
            inactive_threshold_s=inactive_threshold,
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
    ) -> DriverSubscription:
        return await self._subscribe(
            "push",
            "p",
            stream=stream,
            subject=subject,
            idle_heartbeat_s=idle_heartbeat,
            durable=durable,
            queue=queue,
            inactive_threshold_s=inactive_threshold,
        )

    async def consume(
        self,
        stream: str,
        consumer: str,
        *,
        idle_heartbeat: float | None = None,
        expires: float | None = None,
        max_messages: int | None = None,
    ) -> DriverSubscription:
        """Continuous pull consumption of an existing pull consumer, acking each message."""
        return await self._subscribe(
            "consume",
            "c",
            stream=stream,
            consumer=consumer,
            idle_heartbeat_s=idle_heartbeat,
            expires_s=expires,
            max_messages=max_messages,
        )

    async def fetch(
        self, stream: str, consumer: str, *, batch: int, expires: float, idle_heartbeat: float | None
    ) -> FetchOutcome:
        answer = await self.process.request(
            "fetch",
            timeout=expires + REQUEST_TIMEOUT_S,
            session=self.id,
            stream=stream,
            consumer=consumer,
            batch=batch,
            expires_s=expires,
            idle_heartbeat_s=idle_heartbeat,
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
        self,
        url: str,
        credentials: Credentials,
        *,
        reconnect_wait: float = 0.1,
        api_prefix: str = "",
        inbox_prefix: str = "",
    ) -> DriverSession:
        process = self.process()
        # PROTOCOL.md connect's optional api_prefix and inbox_prefix (ADR-19), sent only when set
        prefixes = {k: v for k, v in (("api_prefix", api_prefix), ("inbox_prefix", inbox_prefix)) if v}
        session = DriverSession(process, f"s{next(self._ids)}", self._ids)
        secrets = credentials_request(credentials)
        process.secrets.extend(v for k, v in secrets.items() if k in ("password", "token"))
        process.route("session", session.id, session.on_event)
        try:
            await process.request(
                "connect", session=session.id, url=url, credentials=secrets, reconnect_wait_s=reconnect_wait, **prefixes
            )
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

    async def watch(
        self,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        updates_only: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
    ) -> Watch:
        options = {
            "keys": [keys] if isinstance(keys, str) else list(keys),
            "include_history": include_history,
            "updates_only": updates_only,
            "ignore_deletes": ignore_deletes,
            "meta_only": meta_only,
        }
        return await self.session.streamed_watch(
            lambda sub: self._ask("kv_watch", sub=sub, **options),
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
