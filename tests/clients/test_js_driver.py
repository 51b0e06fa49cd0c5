"""The nats.js driver (conformance/clients/drivers/js) speaking protocol v1 to a real nats-server.

The driver is installed from its lockfile (`npm ci`) into a temporary copy and driven over its pipes, as
jetcheck's adapter drives it; faults on the wire go through the suite's proxy.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from nats.js.errors import NotFoundError

from jetcheck.fixtures.proxy import NatsProxy

from .watch_records import WATCH_DEFAULTS, watched

DRIVER_DIR = Path(__file__).resolve().parents[2] / "conformance" / "clients" / "drivers" / "js"
V1_OPS = {"hello", "connect", "close", "ordered", "push", "consume", "fetch", "stop", "misbehave", "shutdown"}
KV_OPS = {"kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get", "kv_delete", "kv_purge", "kv_keys"}
KV_OPS |= {"kv_history", "kv_status"}
WAIT_S = 5.0

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed: the nats.js driver needs it"
)


@pytest.fixture(scope="module")
def driver_script(tmp_path_factory) -> Path:
    """driver.mjs in a copy of the driver directory with its locked dependencies installed."""
    build = tmp_path_factory.mktemp("js-driver")
    for path in [DRIVER_DIR / "package.json", DRIVER_DIR / "package-lock.json", *DRIVER_DIR.glob("*.mjs")]:
        shutil.copy(path, build / path.name)
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"],
        cwd=build, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return build / "driver.mjs"


class Driver:
    """One driver process: requests by id, and the deliveries and events it streams, in arrival order."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.records: list[dict] = []
        self._answers: dict[int, asyncio.Future] = {}
        self._ids = 0
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            if "id" in message:
                self._answers.pop(message["id"]).set_result(message)
                continue
            async with self._changed:
                self.records.append(message)
                self._changed.notify_all()

    async def call(self, op: str, **args) -> dict:
        self._ids += 1
        answer = asyncio.get_running_loop().create_future()
        self._answers[self._ids] = answer
        self.proc.stdin.write(json.dumps({"id": self._ids, "op": op, **args}).encode() + b"\n")
        await self.proc.stdin.drain()
        return await asyncio.wait_for(answer, 15)

    async def result(self, op: str, **args) -> dict:
        answer = await self.call(op, **args)
        assert answer["ok"], answer
        return answer["result"]

    def deliveries(self, sub: str) -> list[dict]:
        return [r for r in self.records if r["type"] == "delivery" and r["sub"] == sub]

    def events(self, sub: str, kind: str | None = None) -> list[dict]:
        return [r for r in self.records if r["type"] == "event" and r["sub"] == sub and kind in (None, r["kind"])]

    async def wait_for(self, condition, timeout: float = WAIT_S) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout)


@pytest_asyncio.fixture
async def driver(driver_script):
    proc = await asyncio.create_subprocess_exec(
        "node", str(driver_script), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    d = Driver(proc)
    yield d
    with contextlib.suppress(ConnectionError):
        await d.call("shutdown")
    assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0


@pytest_asyncio.fixture
async def js(embedded_server):
    nc = await embedded_server.connect()
    yield nc.jetstream()
    await nc.close()


@pytest_asyncio.fixture
async def stream(js):
    name = "JS" + uuid.uuid4().hex[:10]
    await js.add_stream(name=name, subjects=[f"{name}.>"])
    yield name
    await js.delete_stream(name)


@pytest_asyncio.fixture
async def proxy(embedded_server):
    proxy = await NatsProxy.for_url(embedded_server.url).start()
    yield proxy
    await proxy.stop()


async def connect(driver: Driver, url: str) -> None:
    await driver.result("connect", session="s1", url=url, credentials={}, reconnect_wait_s=0.1)


async def publish(js, stream: str, count: int) -> list[int]:
    return [(await js.publish(f"{stream}.x", f"m{i}".encode())).seq for i in range(count)]


def pinned_version(package: str) -> str:
    return json.loads((DRIVER_DIR / "package.json").read_text())["dependencies"][package]


@pytest.mark.asyncio
async def test_hello_names_the_pinned_client_and_every_v1_op(driver):
    hello = await driver.result("hello")
    assert (hello["protocol"], hello["client"]) == (3, "nats.js")
    assert hello["version"] == pinned_version("@nats-io/jetstream")
    assert hello["libraries"]["@nats-io/transport-node"] == pinned_version("@nats-io/transport-node")
    assert hello["runtime"].startswith("node v")
    assert isinstance(hello["mono_ns"], int)
    assert set(hello["ops"]) >= V1_OPS | KV_OPS  # v2 sections add more
    assert set(hello["ops"]) >= {"obj_create", "obj_put", "obj_get", "obj_info", "obj_list", "obj_delete"}
    assert set(hello["ops"]) >= {"kv_watch", "obj_watch"}
    unknown = await driver.call("no_such_op")
    assert (unknown["ok"], unknown["error"]["kind"]) == (False, "unsupported")


@pytest.mark.asyncio
async def test_an_ordered_consumer_delivers_in_order_and_recreates_its_deleted_consumer(
    driver, embedded_server, js, stream
):
    """All messages once, in order; deleted behind its back, the client resets onto a new consumer and goes on."""
    await connect(driver, embedded_server.url)
    first = await publish(js, stream, 5)
    started = await driver.result("ordered", session="s1", sub="o1", stream=stream, subject=f"{stream}.>",
                                  idle_heartbeat_s=0.2, start=None, inactive_threshold_s=None)  # fmt: skip
    assert started == {"effective_idle_heartbeat_s": 0.5}  # nats.js raises a heartbeat under 0.5 s to 0.5 s
    await driver.wait_for(lambda: len(driver.deliveries("o1")) >= 5)
    old = driver.deliveries("o1")[0]["consumer"]
    await js.delete_consumer(stream, old)
    later = await publish(js, stream, 3)
    await driver.wait_for(lambda: len(driver.deliveries("o1")) >= 8)
    got = driver.deliveries("o1")
    assert [d["stream_seq"] for d in got] == first + later
    assert {d["consumer"] for d in got[:5]} == {old}
    assert old not in {d["consumer"] for d in got[5:]}
    reported = [e["detail"].split()[0] for e in driver.events("o1")]
    assert "consumer_deleted" in reported
    assert reported[-2:] == ["reset", "ordered_consumer_recreated"]
    await driver.result("close", session="s1")
    gone = await driver.call("stop", sub="o1")  # close stopped the session's consumptions
    assert gone["error"]["kind"] == "invalid"


@pytest.mark.asyncio
async def test_a_push_consumer_reports_missed_heartbeats_and_keeps_consuming(driver, proxy, js, stream):
    """Idle heartbeats dropped on the wire: heartbeats_missed is reported, nothing ends, messages still arrive."""
    await connect(driver, proxy.url)
    started = await driver.result("push", session="s1", sub="p1", stream=stream, subject=f"{stream}.>",
                                  idle_heartbeat_s=0.2)  # fmt: skip
    assert started["effective_idle_heartbeat_s"] == 0.2
    await proxy.wait_for(lambda: proxy.counters.heartbeats_passed >= 1)
    proxy.drop_idle_heartbeats = True
    await driver.wait_for(lambda: driver.events("p1", "missed-heartbeat"))
    assert driver.events("p1", "missed-heartbeat")[0]["detail"] == 'heartbeats_missed {"count":2}'
    proxy.drop_idle_heartbeats = False
    seqs = await publish(js, stream, 2)
    await driver.wait_for(lambda: len(driver.deliveries("p1")) >= 2)
    assert [d["stream_seq"] for d in driver.deliveries("p1")] == seqs
    assert not driver.events("p1", "terminal")


@pytest.mark.asyncio
async def test_fetch_says_how_it_ended(driver, proxy, js, stream):
    """Fewer messages than asked: timeout after expires; heartbeats dropped: missed-heartbeat after 2 intervals."""
    await js.add_consumer(stream, durable_name="P", ack_policy="explicit")
    await connect(driver, proxy.url)
    seqs = await publish(js, stream, 2)
    short = await driver.result("fetch", session="s1", stream=stream, consumer="P", batch=5, expires_s=1.0,
                                idle_heartbeat_s=None)  # fmt: skip
    assert [d["stream_seq"] for d in short["deliveries"]] == seqs
    assert short["error"]["kind"] == "timeout"
    assert 'discard {"messagesLeft":3' in short["error"]["detail"]
    assert short["took_s"] >= 0.9
    proxy.drop_idle_heartbeats = True
    starved = await driver.result("fetch", session="s1", stream=stream, consumer="P", batch=1, expires_s=5.0,
                                  idle_heartbeat_s=0.5)  # fmt: skip
    assert starved["deliveries"] == []
    assert starved["error"]["kind"] == "missed-heartbeat"
    assert starved["error"]["detail"].startswith("JetStreamError: heartbeats missed")
    assert 0.9 <= starved["took_s"] < 2.5
    missing = await driver.call("fetch", session="s1", stream=stream, consumer="NOPE", batch=1, expires_s=1.0,
                                idle_heartbeat_s=None)  # fmt: skip
    assert (missing["error"]["kind"], missing["error"]["code"], missing["error"]["err_code"]) == ("api", 404, 10014)
    refused = await driver.call("fetch", session="s1", stream=stream, consumer="P", batch=1, expires_s=0.5,
                                idle_heartbeat_s=None)  # fmt: skip
    assert refused["error"]["kind"] == "invalid"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("asked", "expires_s", "effective"),
    [
        (0.2, None, 0.5),  # raised to the client's minimum
        (None, 2.0, 1.0),  # half the expiry
        (None, None, 15.0),  # half the default 30 s expiry
    ],
)
async def test_consume_reports_the_heartbeat_its_pull_requests_ask_for(
    driver, embedded_server, js, stream, asked, expires_s, effective
):
    """consume()'s effective_idle_heartbeat_s is the idle_heartbeat of the pull requests the client sends."""
    await js.add_consumer(stream, durable_name="C", ack_policy="explicit")
    watcher = await embedded_server.connect()
    pull_requests = await watcher.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.C")
    await connect(driver, embedded_server.url)
    started = await driver.result("consume", session="s1", sub="c1", stream=stream, consumer="C",
                                  idle_heartbeat_s=asked, expires_s=expires_s, max_messages=None)  # fmt: skip
    request = json.loads((await pull_requests.next_msg(WAIT_S)).data)
    await watcher.close()
    assert started == {"effective_idle_heartbeat_s": effective}
    assert request["idle_heartbeat"] == effective * 1e9
    seqs = await publish(js, stream, 2)
    await driver.wait_for(lambda: len(driver.deliveries("c1")) == 2)
    assert [d["stream_seq"] for d in driver.deliveries("c1")] == seqs


@pytest.mark.asyncio
async def test_misbehave_duplicates_deliveries_and_rejects_unknown_modes(driver, embedded_server, js, stream):
    await js.add_consumer(stream, durable_name="P", ack_policy="explicit")
    await connect(driver, embedded_server.url)
    seqs = await publish(js, stream, 2)
    bad = await driver.call("misbehave", modes=["duplicate-delivery", "no-such-mode"])
    assert bad["error"]["kind"] == "invalid"
    await driver.result("misbehave", modes=["duplicate-delivery"])
    fetched = await driver.result("fetch", session="s1", stream=stream, consumer="P", batch=2, expires_s=1.0,
                                  idle_heartbeat_s=None)  # fmt: skip
    assert [d["stream_seq"] for d in fetched["deliveries"]] == [seqs[0], seqs[0], seqs[1], seqs[1]]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["swallow-missed-heartbeat", "terminal-on-missed-heartbeat"])
async def test_misbehave_changes_the_missed_heartbeat_report(driver, proxy, js, stream, mode):
    """Swallowed: no report though heartbeats were missed; terminal: the report ends the consumption."""
    await driver.result("misbehave", modes=[mode])
    await connect(driver, proxy.url)
    await driver.result("push", session="s1", sub="p1", stream=stream, subject=f"{stream}.>", idle_heartbeat_s=0.2)
    await proxy.wait_for(lambda: proxy.counters.heartbeats_passed >= 1)
    proxy.drop_idle_heartbeats = True
    if mode == "swallow-missed-heartbeat":
        # the client reports at 2 to 3 missed intervals (see the push test): 5 dropped is past that
        await proxy.wait_for(lambda: proxy.counters.heartbeats_dropped >= 5)
        assert driver.events("p1") == []
    else:
        await driver.wait_for(lambda: driver.events("p1", "terminal"))
        assert [e["kind"] for e in driver.events("p1")] == ["missed-heartbeat", "terminal"]
        assert driver.events("p1", "terminal")[0]["detail"].startswith("terminal-on-missed-heartbeat")


@pytest.mark.asyncio
async def test_misbehave_chatty_reports_missed_heartbeats_while_messages_flow(driver, embedded_server, js, stream):
    await driver.result("misbehave", modes=["chatty-missed-heartbeat"])
    await connect(driver, embedded_server.url)
    await driver.result("push", session="s1", sub="p1", stream=stream, subject=f"{stream}.>", idle_heartbeat_s=5)
    await publish(js, stream, 1)
    await driver.wait_for(lambda: len(driver.events("p1", "missed-heartbeat")) >= 3)
    assert driver.events("p1", "missed-heartbeat")[0]["detail"].startswith("chatty-missed-heartbeat")
    await driver.result("stop", sub="p1")
    count = len(driver.records)
    await asyncio.sleep(0.3)  # three chatty intervals: a running timer would have reported by now
    assert len(driver.records) == count


@pytest.mark.asyncio
async def test_misbehave_drops_deliveries_after_a_reset(driver, embedded_server, js, stream):
    """After the ordered consumer resets, the driver streams nothing more for it (the client did deliver)."""
    await driver.result("misbehave", modes=["drop-deliveries-after-reset"])
    await connect(driver, embedded_server.url)
    first = await publish(js, stream, 2)
    await driver.result("ordered", session="s1", sub="o1", stream=stream, subject=f"{stream}.x",
                        idle_heartbeat_s=0.5, start=None, inactive_threshold_s=None)  # fmt: skip
    # a witness on the same connection: what reaches it later was sent after everything o1's consumer sent
    await driver.result("push", session="s1", sub="w", stream=stream, subject=f"{stream}.marker", idle_heartbeat_s=5)
    await driver.wait_for(lambda: len(driver.deliveries("o1")) >= 2)
    await js.delete_consumer(stream, driver.deliveries("o1")[0]["consumer"])
    later = await publish(js, stream, 2)
    await driver.wait_for(lambda: [e for e in driver.events("o1", "reset") if "recreated" in e["detail"]])
    recreated = json.loads(driver.events("o1", "reset")[-1]["detail"].split(" ", 1)[1])["name"]

    async def delivered_by_new_consumer() -> None:
        while (await js.consumer_info(stream, recreated)).delivered.stream_seq < later[-1]:
            await asyncio.sleep(0.05)  # polls the server's record of what the new consumer sent

    await asyncio.wait_for(delivered_by_new_consumer(), WAIT_S)
    await js.publish(f"{stream}.marker", b"after")
    await driver.wait_for(lambda: driver.deliveries("w"))
    assert [d["stream_seq"] for d in driver.deliveries("o1")] == first


@pytest.mark.asyncio
async def test_a_durable_queue_push_consumer_is_created_once_and_shared(driver, embedded_server, js, stream):
    """`push` with durable and queue creates the grouped consumer; a second member binds it as it is (same deliver
    subject) and the two share the messages."""
    await connect(driver, embedded_server.url)
    for sub in ("m1", "m2"):
        await driver.result("push", session="s1", sub=sub, stream=stream, subject=f"{stream}.>",
                            idle_heartbeat_s=None, durable="Q", queue="Q", inactive_threshold_s=None)  # fmt: skip
        if sub == "m1":
            first = (await js.consumer_info(stream, "Q")).config
    config = (await js.consumer_info(stream, "Q")).config
    assert (config.deliver_group, config.deliver_subject) == ("Q", first.deliver_subject)
    seqs = await publish(js, stream, 10)
    await driver.wait_for(lambda: len(driver.deliveries("m1")) + len(driver.deliveries("m2")) == 10)
    assert sorted(d["stream_seq"] for sub in ("m1", "m2") for d in driver.deliveries(sub)) == seqs


# ---- v3: watch ------------------------------------------------------------------------------------------------
# @nats-io/kv and @nats-io/obj 3.4.0 have no end-of-initial-data marker: the driver places the null record where
# the client's `isUpdate` flag says the initial data ended (drivers/js/watch.mjs).


@pytest_asyncio.fixture
async def bucket(js):
    """A KV / object store bucket name of its own; its stream is deleted afterwards."""
    name = f"W{uuid.uuid4().hex[:8]}"
    yield name
    for stream in (f"KV_{name}", f"OBJ_{name}"):
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(stream)


async def kv_bucket(driver: Driver, url: str, bucket: str, *modes: str) -> None:
    if modes:
        await driver.result("misbehave", modes=list(modes))
    await connect(driver, url)
    await driver.result("kv_create", session="s1", bucket=bucket, history=5, ttl_s=None)


async def put(driver: Driver, bucket: str, key: str, value: str) -> int:
    value_b64 = base64.b64encode(value.encode()).decode()
    return (await driver.result("kv_put", session="s1", bucket=bucket, key=key, value_b64=value_b64))["revision"]


def kv_watch_request(bucket: str, sub: str = "w", **options) -> dict:
    return {"session": "s1", "bucket": bucket, "sub": sub, **WATCH_DEFAULTS | options}


@pytest.mark.asyncio
async def test_kv_watch_streams_the_last_values_then_null_then_later_changes(driver, bucket, embedded_server):
    await kv_bucket(driver, embedded_server.url, bucket)
    for key, value in (("a", "1"), ("b", "1"), ("a", "2")):
        await put(driver, bucket, key, value)
    assert await driver.result("kv_watch", **kv_watch_request(bucket)) == {}
    await driver.wait_for(lambda: None in watched(driver))
    assert watched(driver) == [("b", "1", "PUT"), ("a", "2", "PUT"), None]
    await put(driver, bucket, "a", "3")
    await driver.wait_for(lambda: len(watched(driver)) == 4)
    assert watched(driver)[3] == ("a", "3", "PUT")
    entries = [r["entry"] for r in driver.records if r["type"] == "watch"]
    assert [e and (e["bucket"], e["revision"]) for e in entries] == [(bucket, 2), (bucket, 3), None, (bucket, 4)]


@pytest.mark.asyncio
async def test_kv_watch_include_history_streams_every_revision(driver, bucket, embedded_server):
    await kv_bucket(driver, embedded_server.url, bucket)
    for key, value in (("a", "1"), ("b", "1"), ("a", "2")):
        await put(driver, bucket, key, value)
    await driver.result("kv_watch", **kv_watch_request(bucket, include_history=True))
    await driver.wait_for(lambda: None in watched(driver))
    assert watched(driver) == [("a", "1", "PUT"), ("b", "1", "PUT"), ("a", "2", "PUT"), None]
    both = await driver.call("kv_watch", **kv_watch_request(bucket, "w2", include_history=True, updates_only=True))
    assert both["error"]["kind"] == "invalid"


@pytest.mark.asyncio
async def test_kv_watch_updates_only_streams_null_first_then_later_changes(driver, bucket, embedded_server):
    await kv_bucket(driver, embedded_server.url, bucket)
    await put(driver, bucket, "a", "1")
    await driver.result("kv_watch", **kv_watch_request(bucket, updates_only=True))
    await put(driver, bucket, "a", "2")
    await put(driver, bucket, "b", "1")
    await driver.wait_for(lambda: len(watched(driver)) == 3)
    assert watched(driver) == [None, ("a", "2", "PUT"), ("b", "1", "PUT")]


@pytest.mark.asyncio
async def test_kv_watch_keys_filter_what_is_streamed(driver, bucket, embedded_server):
    await kv_bucket(driver, embedded_server.url, bucket)
    for key in ("a.1", "b.1", "a.2"):
        await put(driver, bucket, key, "v")
    await driver.result("kv_watch", **kv_watch_request(bucket, "one", keys=["a.*"]))
    await driver.result("kv_watch", **kv_watch_request(bucket, "two", keys=["a.1", "b.1"]))
    await driver.wait_for(lambda: None in watched(driver, "one") and None in watched(driver, "two"))
    await put(driver, bucket, "b.2", "v")
    await put(driver, bucket, "a.3", "v")
    await put(driver, bucket, "b.1", "w")
    await driver.wait_for(lambda: len(watched(driver, "one")) == 4 and len(watched(driver, "two")) == 4)
    assert watched(driver, "one") == [("a.1", "v", "PUT"), ("a.2", "v", "PUT"), None, ("a.3", "v", "PUT")]
    assert watched(driver, "two") == [("a.1", "v", "PUT"), ("b.1", "v", "PUT"), None, ("b.1", "w", "PUT")]


@pytest.mark.asyncio
async def test_kv_watch_ignore_deletes_leaves_out_delete_markers_only(driver, bucket, embedded_server):
    """nats.js drops only "DEL" entries (kv.js: `ignoreDeletes && e.operation === "DEL"`): a PURGE still comes.
    The dropped DEL was the last initial entry, the one the client flags isUpdate, so the client flags no yielded
    entry as the end of the initial data until the PURGE after it."""
    await kv_bucket(driver, embedded_server.url, bucket)
    for key in ("a", "b", "c"):
        await put(driver, bucket, key, "1")
    await driver.result("kv_delete", session="s1", bucket=bucket, key="a")
    await driver.result("kv_watch", **kv_watch_request(bucket, "quiet", ignore_deletes=True))
    await driver.result("kv_watch", **kv_watch_request(bucket, "all"))
    await driver.wait_for(lambda: len(watched(driver, "quiet")) == 2 and None in watched(driver, "all"))
    await driver.result("kv_purge", session="s1", bucket=bucket, key="b")
    await put(driver, bucket, "d", "1")
    await driver.wait_for(lambda: len(watched(driver, "all")) == 6 and len(watched(driver, "quiet")) == 5)
    quiet = [("b", "1", "PUT"), ("c", "1", "PUT"), ("b", "", "PURGE"), None, ("d", "1", "PUT")]
    assert watched(driver, "quiet") == quiet
    assert watched(driver, "all")[2:] == [("a", "", "DEL"), None, ("b", "", "PURGE"), ("d", "1", "PUT")]


@pytest.mark.asyncio
async def test_kv_watch_meta_only_hands_over_no_value(driver, bucket, embedded_server):
    await kv_bucket(driver, embedded_server.url, bucket)
    await put(driver, bucket, "a", "hello")
    await driver.result("kv_watch", **kv_watch_request(bucket, meta_only=True))
    await driver.wait_for(lambda: None in watched(driver))
    assert watched(driver) == [("a", "", "PUT"), None]


@pytest.mark.asyncio
async def test_obj_watch_streams_null_then_changes_and_replays_only_with_include_history(
    driver, bucket, embedded_server
):
    """Without includeHistory the client's object watcher starts at DeliverPolicy.New (nothing replayed); it has
    no updates-only option at all."""
    await connect(driver, embedded_server.url)
    obj = {"bucket": bucket}
    await driver.result("obj_create", session="s1", obj=obj)
    await driver.result("obj_put", session="s1", obj=obj | {"name": "x", "data_b64": "eA==", "chunk_size": None})
    watch = {"include_history": False, "updates_only": False, "ignore_deletes": False}
    assert await driver.result("obj_watch", session="s1", obj=obj | watch | {"sub": "w"}) == {}
    await driver.result("obj_watch", session="s1", obj=obj | watch | {"sub": "h", "include_history": True})
    await driver.wait_for(lambda: None in watched(driver, "w") and None in watched(driver, "h"))
    await driver.result("obj_put", session="s1", obj=obj | {"name": "y", "data_b64": "eQ==", "chunk_size": None})
    await driver.result("obj_delete", session="s1", obj=obj | {"name": "x"})
    await driver.wait_for(lambda: len(watched(driver, "w")) == 3 and len(watched(driver, "h")) == 4)
    assert watched(driver, "w") == [None, ("y", False), ("x", True)]
    assert watched(driver, "h") == [("x", False), None, ("y", False), ("x", True)]
    info = next(r["info"] for r in driver.records if r["type"] == "watch" and r["info"])
    assert (info["bucket"], info["size"]) == (bucket, 1)
    updates_only = await driver.call("obj_watch", session="s1", obj=obj | watch | {"sub": "u", "updates_only": True})
    assert updates_only["error"]["kind"] == "unsupported" and "updates_only" in updates_only["error"]["message"]


@pytest.mark.asyncio
async def test_stop_ends_a_watch(driver, bucket, embedded_server):
    await kv_bucket(driver, embedded_server.url, bucket)
    await driver.result("kv_watch", **kv_watch_request(bucket))
    await driver.wait_for(lambda: watched(driver) == [None])
    await put(driver, bucket, "a", "1")
    await driver.wait_for(lambda: len(watched(driver)) == 2)
    assert await driver.result("stop", sub="w") == {}
    await put(driver, bucket, "a", "2")
    with contextlib.suppress(TimeoutError):  # show that nothing more comes
        await driver.wait_for(lambda: len(watched(driver)) > 2, 0.3)
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
async def test_misbehave_watch_modes_misreport_the_watch(driver, bucket, embedded_server, mode, expected):
    await kv_bucket(driver, embedded_server.url, bucket, mode)
    await put(driver, bucket, "a", "1")
    await put(driver, bucket, "b", "1")
    await driver.result("kv_watch", **kv_watch_request(bucket))
    await put(driver, bucket, "c", "1")
    await driver.wait_for(lambda: ("c", "1", "PUT") in watched(driver))
    assert watched(driver) == expected
