"""What the tests of the drivers share: one client for a driver process over its pipes (`PipeDriver`), the requests
their tests make, the watch behaviour (protocol v3) every driver must show alike (`WatchContract`, which each
driver's test module subclasses), and what the pull-consumer drivers show alike (`PullDriverContract`) with the
calls their tests make. The fixtures `driver`, `stream` and `proxy` are in conftest.py; `driver_command` is each
driver's test module's."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import ClassVar

import pytest
import pytest_asyncio
from nats.js import api
from nats.js.errors import NotFoundError

from jetcheck.conformance.clients.driven_clients import MISBEHAVE_MODES

from ..conftest import VENDOR_PASSWORD

WAIT_S = 5.0  # bound on any wait for the driver
# a load record carries every row of its batch: on a fast machine 20 ms of closed-loop publishes pass asyncio's
# default 64 KiB line limit, which killed the reader (fresh-clone run 31); the product's reader has no limit
MAX_LINE_BYTES = 64 * 1024 * 1024
SESSION = "s"  # the one session most tests open
WATCH_DEFAULTS = {"keys": [">"], "include_history": False, "updates_only": False, "ignore_deletes": False,
                  "meta_only": False}  # fmt: skip


class PipeDriver:
    """One driver process: requests with ids, responses matched to them, streamed records kept in order."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.records: list[dict] = []
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            record = json.loads(line)
            if "id" in record:
                self._pending.pop(record["id"]).set_result(record)
            else:
                self.records.append(record)
                self._changed.set()

    async def call(self, op: str, **arguments) -> dict:
        return await self.request({"op": op, **arguments})

    async def request(self, fields: dict) -> dict:
        """Send `fields` as a request with the next id (even a malformed one) and return its response."""
        self._next_id += 1
        answer = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = answer
        self.proc.stdin.write(json.dumps({"id": self._next_id, **fields}).encode() + b"\n")
        await self.proc.stdin.drain()
        return await asyncio.wait_for(answer, WAIT_S + 10)

    async def ok(self, op: str, **arguments) -> dict:
        response = await self.call(op, **arguments)
        assert response["ok"], response
        return response["result"]

    def deliveries(self, sub: str) -> list[dict]:
        return [r for r in self.records if r["type"] == "delivery" and r["sub"] == sub]

    def events(self, sub: str, kind: str | None = None) -> list[dict]:
        return [r for r in self.records if r["type"] == "event" and r["sub"] == sub and kind in (None, r["kind"])]

    async def until(self, condition, timeout: float = WAIT_S) -> None:
        """Wait until `condition()` holds for the records streamed so far; fail after `timeout`."""
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    async def settle(self, seconds: float) -> None:
        """Let `seconds` of streaming pass (to show that something did NOT come)."""
        with contextlib.suppress(TimeoutError):
            await self.until(lambda: False, seconds)


@contextlib.asynccontextmanager
async def running(*command: str) -> AsyncIterator[PipeDriver]:
    """The driver `command` starts, shut down afterwards; it must exit with status 0. Its stderr (its log) goes to
    the test's own, so pytest shows it with a failure."""
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(*command, stdin=pipe, stdout=pipe, limit=MAX_LINE_BYTES)
    driver = PipeDriver(proc)
    yield driver
    if proc.returncode is None:
        with contextlib.suppress(ConnectionError):
            await driver.call("shutdown")
    assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0


async def connected(driver: PipeDriver, url: str, *modes: str) -> None:
    """Session SESSION to `url`, the driver misbehaving in `modes` first."""
    if modes:
        await driver.ok("misbehave", modes=list(modes))
    await driver.ok("connect", session=SESSION, url=url, credentials={}, reconnect_wait_s=0.1)


async def kv_bucket(driver: PipeDriver, url: str, bucket: str, *modes: str) -> None:
    await connected(driver, url, *modes)
    await driver.ok("kv_create", session=SESSION, bucket=bucket, history=5, ttl_s=None)


async def put(driver: PipeDriver, bucket: str, key: str, value: str) -> int:
    value_b64 = base64.b64encode(value.encode()).decode()
    return (await driver.ok("kv_put", session=SESSION, bucket=bucket, key=key, value_b64=value_b64))["revision"]


def kv_watch_request(bucket: str, sub: str = "w", **options) -> dict:
    return {"session": SESSION, "bucket": bucket, "sub": sub, **WATCH_DEFAULTS | options}


async def kv_watch(driver: PipeDriver, bucket: str, sub: str = "w", **options) -> dict:
    return await driver.ok("kv_watch", **kv_watch_request(bucket, sub, **options))


def watched(driver: PipeDriver, sub: str = "w") -> list:
    """(key, value, operation) of each KV entry (name, deleted of each object info) streamed for `sub`; None for
    the null end-of-initial-data record."""
    seen = []
    for r in driver.records:
        if r["type"] == "watch" and r["sub"] == sub:
            if (item := r["entry"] if "entry" in r else r["info"]) is None:
                seen.append(None)
            elif "key" in item:
                seen.append((item["key"], base64.b64decode(item["value_b64"]).decode(), item["operation"]))
            else:
                seen.append((item["name"], item.get("deleted", False)))
    return seen


async def meta_only_watched(driver: PipeDriver, url: str, bucket: str, *modes: str) -> list:
    """What a meta_only watch hands over (until its end of initial data) of a bucket holding a = hello, with the
    driver in `modes`: (key, value, operation) per entry, None for the end of initial data."""
    await kv_bucket(driver, url, bucket, *modes)
    await put(driver, bucket, "a", "hello")
    await kv_watch(driver, bucket, meta_only=True)
    await driver.until(lambda: None in watched(driver))
    return watched(driver)


class MisbehaveContract:
    """What every driver's misbehave op shows alike: it knows each mode of the protocol (the drivers keep their own
    lists, JS and Go by module), and refuses one it does not know."""

    @pytest.mark.asyncio
    async def test_misbehave_knows_every_mode_of_the_protocol(self, driver):
        for mode in MISBEHAVE_MODES:  # one at a time, so a refusal names the mode
            await driver.ok("misbehave", modes=[mode])
        refused = await driver.call("misbehave", modes=["no-such-mode"])
        assert refused["error"]["kind"] == "invalid", refused


class WatchContract:
    """The watch behaviour both drivers share; where their clients differ, each module tests its own."""

    both_includes_refused = ""  # what the refusal of include_history with updates_only says, in the client's words
    updates_only_begins: tuple = ()  # what an updates-only watch streams before the changes: (None,) if a null
    # What an ignore_deletes watch streams of keys a, b, c (a deleted before it starts): before b is purged, and once
    # d is put after that; which markers the client leaves out, and where its null comes, are the client's.
    ignoring_deletes_before_purge: tuple = ()
    ignoring_deletes_at_end: tuple = ()

    @pytest_asyncio.fixture
    async def bucket(self, embedded_server):
        """A KV / object store bucket name of its own; its stream is deleted afterwards."""
        name = f"W{uuid.uuid4().hex[:8]}"
        yield name
        nc = await embedded_server.connect()
        for stream in (f"KV_{name}", f"OBJ_{name}"):
            with contextlib.suppress(NotFoundError):
                await nc.jetstream().delete_stream(stream)
        await nc.close()

    @pytest.mark.asyncio
    async def test_kv_watch_streams_the_last_values_then_null_then_later_changes(self, driver, bucket, embedded_server):
        """The watcher's initial data is each key's last value in stream order, then the client's nil, then updates."""
        await kv_bucket(driver, embedded_server.url, bucket)
        for key, value in (("a", "1"), ("b", "1"), ("a", "2")):
            await put(driver, bucket, key, value)
        assert await kv_watch(driver, bucket) == {}
        await driver.until(lambda: None in watched(driver))
        assert watched(driver) == [("b", "1", "PUT"), ("a", "2", "PUT"), None]
        await put(driver, bucket, "a", "3")
        await driver.until(lambda: len(watched(driver)) == 4)
        assert watched(driver)[3] == ("a", "3", "PUT")
        entries = [r["entry"] for r in driver.records if r["type"] == "watch"]
        assert [e and (e["bucket"], e["revision"]) for e in entries] == [(bucket, 2), (bucket, 3), None, (bucket, 4)]

    @pytest.mark.asyncio
    async def test_kv_watch_include_history_streams_every_revision(self, driver, bucket, embedded_server):
        await kv_bucket(driver, embedded_server.url, bucket)
        for key, value in (("a", "1"), ("b", "1"), ("a", "2")):
            await put(driver, bucket, key, value)
        await kv_watch(driver, bucket, include_history=True)
        await driver.until(lambda: None in watched(driver))
        assert watched(driver) == [("a", "1", "PUT"), ("b", "1", "PUT"), ("a", "2", "PUT"), None]
        both = await driver.call("kv_watch", **kv_watch_request(bucket, "w2", include_history=True, updates_only=True))
        assert both["error"]["kind"] == "invalid" and self.both_includes_refused in both["error"]["message"]

    @pytest.mark.asyncio
    async def test_kv_watch_updates_only_streams_only_later_changes(self, driver, bucket, embedded_server):
        """UpdatesOnly: only the changes after the watch started, after `updates_only_begins`."""
        await kv_bucket(driver, embedded_server.url, bucket)
        await put(driver, bucket, "a", "1")
        await kv_watch(driver, bucket, updates_only=True)
        await put(driver, bucket, "a", "2")
        await put(driver, bucket, "b", "1")
        expected = [*self.updates_only_begins, ("a", "2", "PUT"), ("b", "1", "PUT")]
        await driver.until(lambda: len(watched(driver)) == len(expected))
        assert watched(driver) == expected

    @pytest.mark.asyncio
    async def test_kv_watch_ignore_deletes_leaves_out_delete_markers(self, driver, bucket, embedded_server):
        """ignore_deletes leaves out the deletes the client counts (`ignoring_deletes_*`); a plain watch has them."""
        await kv_bucket(driver, embedded_server.url, bucket)
        for key in ("a", "b", "c"):
            await put(driver, bucket, key, "1")
        await driver.ok("kv_delete", session=SESSION, bucket=bucket, key="a")
        await kv_watch(driver, bucket, "quiet", ignore_deletes=True)
        await kv_watch(driver, bucket, "all")
        before = list(self.ignoring_deletes_before_purge)
        await driver.until(lambda: watched(driver, "quiet") == before and None in watched(driver, "all"))
        await driver.ok("kv_purge", session=SESSION, bucket=bucket, key="b")
        await put(driver, bucket, "d", "1")
        at_end = list(self.ignoring_deletes_at_end)
        await driver.until(lambda: len(watched(driver, "all")) == 6 and len(watched(driver, "quiet")) == len(at_end))
        assert watched(driver, "quiet") == at_end
        assert watched(driver, "all")[2:] == [("a", "", "DEL"), None, ("b", "", "PURGE"), ("d", "1", "PUT")]

    @pytest.mark.asyncio
    async def test_kv_watch_keys_filter_what_is_streamed(self, driver, bucket, embedded_server):
        """One filter (Watch) with a wildcard, and several (WatchFiltered)."""
        await kv_bucket(driver, embedded_server.url, bucket)
        for key in ("a.1", "b.1", "a.2"):
            await put(driver, bucket, key, "v")
        await kv_watch(driver, bucket, "one", keys=["a.*"])
        await kv_watch(driver, bucket, "two", keys=["a.1", "b.1"])
        await driver.until(lambda: None in watched(driver, "one") and None in watched(driver, "two"))
        await put(driver, bucket, "b.2", "v")
        await put(driver, bucket, "a.3", "v")
        await put(driver, bucket, "b.1", "w")
        await driver.until(lambda: len(watched(driver, "one")) == 4 and len(watched(driver, "two")) == 4)
        assert watched(driver, "one") == [("a.1", "v", "PUT"), ("a.2", "v", "PUT"), None, ("a.3", "v", "PUT")]
        assert watched(driver, "two") == [("a.1", "v", "PUT"), ("b.1", "v", "PUT"), None, ("b.1", "w", "PUT")]

    @pytest.mark.asyncio
    async def test_kv_watch_meta_only_hands_over_no_value(self, driver, bucket, embedded_server):
        assert await meta_only_watched(driver, embedded_server.url, bucket) == [("a", "", "PUT"), None]

    @pytest.mark.asyncio
    async def test_misbehave_meta_ignored_hands_over_the_value(self, driver, bucket, embedded_server):
        watched_entries = await meta_only_watched(driver, embedded_server.url, bucket, "kv-watch-meta-ignored")
        assert watched_entries == [("a", "hello", "PUT"), None]

    @pytest.mark.asyncio
    async def test_stop_ends_a_watch(self, driver, bucket, embedded_server):
        await kv_bucket(driver, embedded_server.url, bucket)
        await kv_watch(driver, bucket)
        await driver.until(lambda: watched(driver) == [None])
        await put(driver, bucket, "a", "1")
        await driver.until(lambda: len(watched(driver)) == 2)
        assert await driver.ok("stop", sub="w") == {}
        await put(driver, bucket, "a", "2")
        await driver.settle(0.3)
        assert watched(driver) == [None, ("a", "1", "PUT")] and driver.events("w") == []
        assert (await driver.call("stop", sub="w"))["error"]["kind"] == "invalid"

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        ("mode", "expected"),
        [
            ("watch-no-end-of-data", [("a", "1", "PUT"), ("b", "1", "PUT"), ("c", "1", "PUT")]),
            ("watch-drop-first", [("b", "1", "PUT"), None, ("c", "1", "PUT")]),
        ],
    )
    async def test_misbehave_watch_modes_misreport_the_watch(self, driver, bucket, embedded_server, mode, expected):
        await kv_bucket(driver, embedded_server.url, bucket, mode)
        await put(driver, bucket, "a", "1")
        await put(driver, bucket, "b", "1")
        await kv_watch(driver, bucket)
        await put(driver, bucket, "c", "1")
        await driver.until(lambda: ("c", "1", "PUT") in watched(driver))
        assert watched(driver) == expected


# --- what the tests of the pull-consumer drivers (nats.go, async-nats, jnats) share --------------------------------

PULL_HEARTBEAT = 0.5  # nats.go's smallest PullHeartbeat, jnats' smallest (half its 1 s expiry); async-nats has none


async def publish(js, stream: str, count: int) -> None:
    for i in range(count):
        await js.publish(f"{stream}.a", f"m{i}".encode())


async def ordered(driver: PipeDriver, stream: str, sub: str = "o", heartbeat: float | None = PULL_HEARTBEAT) -> dict:
    return await driver.call(
        "ordered", session="s", sub=sub, stream=stream, subject=f"{stream}.>", idle_heartbeat_s=heartbeat,
        start=None, inactive_threshold_s=None,
    )  # fmt: skip


async def consume(driver: PipeDriver, stream: str, heartbeat: float | None = PULL_HEARTBEAT, **more) -> dict:
    """Consume consumer C of `stream` as sub c (`more` overrides expires_s and max_messages, both unset)."""
    return await driver.ok("consume", session="s", sub="c", stream=stream, consumer="C", idle_heartbeat_s=heartbeat,
                           **{"expires_s": None, "max_messages": None, **more})  # fmt: skip


async def pull_consumer(js, stream: str, name: str) -> None:
    await js.add_consumer(stream, api.ConsumerConfig(durable_name=name, ack_policy=api.AckPolicy.EXPLICIT))


def sequences(deliveries: list[dict]) -> list[tuple[int, int]]:
    return [(d["stream_seq"], d["consumer_seq"]) for d in deliveries]


async def ordered_five(driver: PipeDriver, js, stream: str, url: str) -> tuple[str, api.ConsumerInfo]:
    """Five messages through an ordered consumer asked for PULL_HEARTBEAT: the name of the consumer they came from,
    and its info (the only consumer of `stream`)."""
    await publish(js, stream, 5)
    await connected(driver, url)
    assert (await ordered(driver, stream))["result"] == {"effective_idle_heartbeat_s": PULL_HEARTBEAT}
    await driver.until(lambda: len(driver.deliveries("o")) == 5)
    assert base64.b64decode(driver.deliveries("o")[0]["payload_b64"]) == b"m0"
    (info,) = await js.consumers_info(stream)
    return driver.deliveries("o")[0]["consumer"], info


async def eight_in_order_then_stopped(driver: PipeDriver, js, stream: str) -> None:
    """The ordered consumer's eight deliveries (five, then three on its new consumer) in order; after `stop`,
    nothing more."""
    assert sequences(driver.deliveries("o")) == [(n, n) for n in range(1, 6)] + [(6, 1), (7, 2), (8, 3)]
    await driver.ok("stop", sub="o")
    await publish(js, stream, 1)
    await driver.settle(0.3)
    assert len(driver.deliveries("o")) == 8


async def missed_heartbeat_of_a_stall(driver: PipeDriver, js, stream: str, proxy) -> str:
    """Consumer C consumed through `proxy` (two deliveries), then every server byte held: the detail of the first
    missed-heartbeat event the driver streams."""
    await pull_consumer(js, stream, "C")
    await connected(driver, proxy.url)
    assert await consume(driver, stream) == {"effective_idle_heartbeat_s": PULL_HEARTBEAT}
    await publish(js, stream, 2)
    await driver.until(lambda: len(driver.deliveries("c")) == 2)
    proxy.stall()
    await driver.until(lambda: driver.events("c", "missed-heartbeat"))
    return driver.events("c", "missed-heartbeat")[0]["detail"]


async def push_delivers(driver: PipeDriver, js, stream: str, url: str) -> None:
    """`push` with a 1 s idle heartbeat creates a push consumer that delivers two messages and takes the heartbeat."""
    await publish(js, stream, 2)
    await connected(driver, url)
    result = await driver.ok("push", session="s", sub="p", stream=stream, subject=f"{stream}.>", idle_heartbeat_s=1.0)
    await driver.until(lambda: len(driver.deliveries("p")) == 2)
    assert {d["consumer"] for d in driver.deliveries("p")} == {result["consumer"]}
    assert result["effective_idle_heartbeat_s"] == 1.0


async def durable_queue_shared(driver: PipeDriver, js, stream: str) -> None:
    """Two `push` members of durable Q in queue Q: the first creates the grouped consumer, the second binds it as it
    is (same deliver subject), and the two share ten messages."""
    for sub in ("m1", "m2"):
        await driver.ok("push", session="s", sub=sub, stream=stream, subject=f"{stream}.>", idle_heartbeat_s=None,
                        durable="Q", queue="Q", inactive_threshold_s=None)  # fmt: skip
        if sub == "m1":
            first = (await js.consumer_info(stream, "Q")).config
    config = (await js.consumer_info(stream, "Q")).config
    assert (config.deliver_group, config.deliver_subject) == ("Q", first.deliver_subject)
    await publish(js, stream, 10)
    await driver.until(lambda: len(driver.deliveries("m1")) + len(driver.deliveries("m2")) == 10)
    assert sorted(d["stream_seq"] for s in ("m1", "m2") for d in driver.deliveries(s)) == list(range(1, 11))


async def obj_watch_of_x(driver: PipeDriver, bucket: str, url: str) -> dict:
    """Object x put in `bucket`, then a plain obj_watch (sub w) of it; returns the object request to go on with."""
    await connected(driver, url)
    obj = {"bucket": bucket}
    await driver.ok("obj_create", session=SESSION, obj=obj)
    await driver.ok("obj_put", session=SESSION, obj=obj | {"name": "x", "data_b64": "eA==", "chunk_size": None})
    watch = {"sub": "w", "include_history": False, "updates_only": False, "ignore_deletes": False}
    assert await driver.ok("obj_watch", session=SESSION, obj=obj | watch) == {}
    return obj


def load_rows(driver: PipeDriver, sub: str) -> list[int]:
    """The int64s of every load record streamed for `sub`, in order."""
    raw = b"".join(base64.b64decode(r["rows_b64"]) for r in driver.records if r["type"] == "load" and r["sub"] == sub)
    return [int.from_bytes(raw[i : i + 8], "little", signed=True) for i in range(0, len(raw), 8)]


class PullDriverContract:
    """What the pull-consumer drivers show alike; each driver's test module subclasses it (its `driver_command`
    fixture is that module's) and says, in these attributes, where its client differs."""

    client = ""  # hello's client
    runtime = ""  # how hello's runtime begins
    ops: frozenset[str] = frozenset()  # what hello's ops hold at least
    # what else an expired fetch reports, where the client's driver says more
    expired_fetch_also: ClassVar[Mapping[str, object]] = MappingProxyType({})
    swallowed_stall_s = 4 * PULL_HEARTBEAT  # how long a held wire stays unreported with swallow-missed-heartbeat
    only_heartbeat_events = True  # False where the client streams other events of a held wire (jnats' status)
    reset_shows_with_a_delivery = False  # the driver learns of a recreated consumer only from its first delivery
    malformed_is_invalid = True  # False where the driver takes a non-string op for an unknown one
    # (idle_heartbeat_s, expires_s) a consume asks for -> the heartbeat its pull requests ask for (None: none)
    pull_request_heartbeats: ClassVar[tuple] = ()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "pull_request_heartbeat" in metafunc.fixturenames:
            metafunc.parametrize(("asked", "expires_s", "pull_request_heartbeat"), self.pull_request_heartbeats)

    def pinned_version(self) -> str:
        """The client release the driver is built with, as its build files pin it."""
        raise NotImplementedError

    @pytest.mark.asyncio
    async def test_hello_names_the_client_at_the_version_built_in(self, driver):
        """hello reports the client and the exact release built in, the runtime and its ops; an unknown op is
        `unsupported`, a malformed request `invalid` (`malformed_is_invalid`)."""
        hello = await driver.ok("hello")
        assert (hello["protocol"], hello["client"], hello["version"]) == (3, self.client, self.pinned_version())
        assert hello["runtime"].startswith(self.runtime) and hello["mono_ns"] > 0
        assert set(hello["ops"]) >= self.ops
        unknown = await driver.call("no_such_op")
        assert unknown["error"]["kind"] == "unsupported"
        if self.malformed_is_invalid:
            malformed = await driver.request({"op": 3})
            assert malformed["error"]["kind"] == "invalid"

    @pytest.mark.asyncio
    async def test_credentials_reach_the_client_and_never_its_log(self, driver_command, vendor_server):
        """user/password and the CA arrive in connect; a wrong password is a `connection` error; stderr stays clean."""
        server, directory = vendor_server
        pipe = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(*driver_command, stdin=pipe, stdout=pipe, stderr=pipe)
        driver = PipeDriver(proc)
        credentials = {"user": "vendor", "password": VENDOR_PASSWORD, "tls_ca": str(directory / "ca.pem")}
        await driver.ok("connect", session="good", url=server.url, credentials=credentials, reconnect_wait_s=0.1)
        await driver.ok("ping", session="good")
        wrong = {**credentials, "password": "not-" + VENDOR_PASSWORD}
        refused = await driver.call("connect", session="bad", url=server.url, credentials=wrong, reconnect_wait_s=0.1)
        assert refused["error"]["kind"] == "connection", refused
        await driver.ok("shutdown")
        assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0
        log = (await proc.stderr.read()).decode()
        assert "session good: connected" in log
        assert VENDOR_PASSWORD not in log and VENDOR_PASSWORD not in refused["error"]["message"]

    @pytest.mark.asyncio
    async def test_a_fetch_with_fewer_messages_ends_at_its_expiry_as_a_timeout(self, driver, stream, embedded_server):
        """The clients end an expired fetch without an error of their own: the driver reports kind `timeout`."""
        js, name = stream
        await pull_consumer(js, name, "F")
        await publish(js, name, 2)
        await connected(driver, embedded_server.url)
        result = await driver.ok("fetch", session="s", stream=name, consumer="F", batch=5, expires_s=1.0,
                                 idle_heartbeat_s=None)  # fmt: skip
        assert sequences(result["deliveries"]) == [(1, 1), (2, 2)]
        assert result["error"]["kind"] == "timeout" and 0.9 < result["took_s"] < 3.0  # margin for a busy machine
        assert {field: result[field] for field in self.expired_fetch_also} == self.expired_fetch_also
        missing = await driver.call("fetch", session="s", stream=name, consumer="NOPE", batch=1, expires_s=1.0,
                                    idle_heartbeat_s=None)  # fmt: skip
        assert (missing["error"]["kind"], missing["error"]["code"], missing["error"]["err_code"]) == ("api", 404, 10014)

    @pytest.mark.asyncio
    @pytest.mark.parametrize("mode", ["swallow-missed-heartbeat", "terminal-on-missed-heartbeat"])
    async def test_misbehave_changes_what_a_stall_reports(self, driver, stream, proxy, mode):
        """swallow-missed-heartbeat hides the client's missed heartbeats; terminal-on-missed-heartbeat ends the sub."""
        js, name = stream
        await pull_consumer(js, name, "C")
        await connected(driver, proxy.url, mode)
        await consume(driver, name)
        proxy.stall()
        if mode == "swallow-missed-heartbeat":
            await driver.settle(self.swallowed_stall_s)
            assert driver.events("c", None if self.only_heartbeat_events else "missed-heartbeat") == []
        else:
            await driver.until(lambda: driver.events("c", "terminal"))
            kinds = [e["kind"] for e in driver.events("c")]
            assert (kinds if self.only_heartbeat_events else kinds[:2]) == ["missed-heartbeat", "terminal"]
        proxy.release()

    @pytest.mark.asyncio
    async def test_misbehave_chatty_and_duplicate_invent_events_and_deliveries(self, driver, stream, embedded_server):
        """chatty-missed-heartbeat invents an event every 100 ms while data flows; duplicate-delivery streams twice."""
        js, name = stream
        await pull_consumer(js, name, "C")
        await publish(js, name, 2)
        await connected(driver, embedded_server.url, "chatty-missed-heartbeat", "duplicate-delivery")
        await consume(driver, name)
        await driver.until(lambda: len(driver.events("c", "missed-heartbeat")) >= 3)
        assert sequences(driver.deliveries("c")) == [(1, 1), (1, 1), (2, 2), (2, 2)]
        await driver.ok("stop", sub="c")
        count = len(driver.events("c"))
        await driver.settle(0.3)
        assert len(driver.events("c")) == count  # a stopped consumption is not chatty

    @pytest.mark.asyncio
    async def test_misbehave_drop_deliveries_after_reset(self, driver, stream, embedded_server):
        """drop-deliveries-after-reset: after the ordered consumer's reset, the driver streams none of its messages."""
        js, name = stream
        await publish(js, name, 2)
        await connected(driver, embedded_server.url, "drop-deliveries-after-reset")
        await ordered(driver, name)
        await driver.until(lambda: len(driver.deliveries("o")) == 2)
        await js.delete_consumer(name, driver.deliveries("o")[0]["consumer"])
        if self.reset_shows_with_a_delivery:
            await publish(js, name, 2)
        await driver.until(lambda: driver.events("o", "reset"))
        if not self.reset_shows_with_a_delivery:
            await publish(js, name, 2)
        await driver.settle(0.5)
        assert sequences(driver.deliveries("o")) == [(1, 1), (2, 2)]

    @pytest.mark.asyncio
    async def test_close_stops_the_sessions_consumptions_and_forgets_the_session(self, driver, stream, embedded_server):
        """After close nothing more streams for its subs, and the session's name is unknown again (`invalid`)."""
        js, name = stream
        await pull_consumer(js, name, "C")
        await connected(driver, embedded_server.url)
        await consume(driver, name)
        await publish(js, name, 1)
        await driver.until(lambda: len(driver.deliveries("c")) == 1)
        await driver.ok("close", session="s")
        await publish(js, name, 1)
        await driver.settle(0.3)
        assert len(driver.deliveries("c")) == 1
        assert driver.events("c", None if self.only_heartbeat_events else "missed-heartbeat") == []
        after = await driver.call("fetch", session="s", stream=name, consumer="C", batch=1, expires_s=1.0,
                                  idle_heartbeat_s=None)  # fmt: skip
        assert after["error"]["kind"] == "invalid"
        assert (await driver.call("stop", sub="c"))["error"]["kind"] == "invalid"

    @pytest.mark.asyncio
    async def test_consume_reports_the_heartbeat_its_pull_requests_ask_for(
        self, driver, stream, embedded_server, asked, expires_s, pull_request_heartbeat
    ):
        """consume's effective_idle_heartbeat_s is the idle_heartbeat of the pull requests the client sends."""
        js, name = stream
        await pull_consumer(js, name, "C")
        watcher = await embedded_server.connect()
        pull_requests = await watcher.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{name}.C")
        await connected(driver, embedded_server.url)
        started = await consume(driver, name, asked, expires_s=expires_s)
        request = json.loads((await pull_requests.next_msg(timeout=WAIT_S)).data)
        await watcher.close()
        assert started == {"effective_idle_heartbeat_s": pull_request_heartbeat}
        assert request.get("idle_heartbeat", 0) == (pull_request_heartbeat or 0) * 1e9
        await publish(js, name, 2)
        await driver.until(lambda: len(driver.deliveries("c")) == 2)

    @pytest.mark.asyncio
    async def test_load_publish_logs_every_publish_before_load_stop_answers(self, driver, stream, embedded_server):
        """A closed-loop load_publish: every publish is one row of six int64s (acked, with its stream sequence),
        all before load_stop's answer."""
        js, name = stream
        await connected(driver, embedded_server.url)
        started = await driver.ok("load_publish", session="s", sub="l", subject=f"{name}.l", payload_size=16, rate=0,
                                  max_inflight=32, batch_ms=50, stamp=True)  # fmt: skip
        assert started["started_ns"] > 0
        await driver.until(lambda: any(r["type"] == "load" for r in driver.records))
        counts = await driver.ok("load_stop", sub="l", at_ns=None)
        rows = load_rows(driver, "l")
        assert len(rows) == 6 * counts["ops"] and counts["ops"] == counts["acked"] > 0
        assert sorted(rows[3::6]) == list(range(1, counts["ops"] + 1))
        assert (await js.stream_info(name)).state.messages == counts["ops"]
