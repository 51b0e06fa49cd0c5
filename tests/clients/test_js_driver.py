"""The nats.js driver (conformance/clients/drivers/js) speaking protocol v1 to a real nats-server.

The driver is installed from its lockfile (`npm ci`) into jetcheck's cache, as a run installs it, and driven over
its pipes, as jetcheck's adapter drives it; faults on the wire go through the suite's proxy.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from jetcheck.conformance.clients.build import js_driver
from jetcheck.fixtures.proxy import NatsProxy

from .driver_contract import WAIT_S, MisbehaveContract, WatchContract, connected, running, watched

DRIVER_DIR = Path(__file__).resolve().parents[2] / "conformance" / "clients" / "drivers" / "js"
V1_OPS = {"hello", "connect", "close", "ordered", "push", "consume", "fetch", "stop", "misbehave", "shutdown"}
KV_OPS = {"kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get", "kv_delete", "kv_purge", "kv_keys"}
KV_OPS |= {"kv_history", "kv_status"}

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed: the nats.js driver needs it"
)


@pytest.fixture(scope="module")
def driver_script() -> Path:
    """driver.mjs as jetcheck installs it (build.js_driver: `npm ci` from the lockfile into the cache keyed by the
    sources' digest, so only a changed driver is installed again, not once per xdist unit of this module)."""
    return Path(js_driver()[1])


@pytest_asyncio.fixture
async def driver(driver_script):
    async with running("node", str(driver_script)) as d:
        yield d


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


async def publish(js, stream: str, count: int) -> list[int]:
    return [(await js.publish(f"{stream}.x", f"m{i}".encode())).seq for i in range(count)]


def pinned_version(package: str) -> str:
    return json.loads((DRIVER_DIR / "package.json").read_text())["dependencies"][package]


@pytest.mark.asyncio
async def test_hello_names_the_pinned_client_and_every_v1_op(driver):
    hello = await driver.ok("hello")
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
    await connected(driver, embedded_server.url)
    first = await publish(js, stream, 5)
    started = await driver.ok("ordered", session="s", sub="o1", stream=stream, subject=f"{stream}.>",
                                  idle_heartbeat_s=0.2, start=None, inactive_threshold_s=None)  # fmt: skip
    assert started == {"effective_idle_heartbeat_s": 0.5}  # nats.js raises a heartbeat under 0.5 s to 0.5 s
    await driver.until(lambda: len(driver.deliveries("o1")) >= 5)
    old = driver.deliveries("o1")[0]["consumer"]
    await js.delete_consumer(stream, old)
    later = await publish(js, stream, 3)
    await driver.until(lambda: len(driver.deliveries("o1")) >= 8)
    got = driver.deliveries("o1")
    assert [d["stream_seq"] for d in got] == first + later
    assert {d["consumer"] for d in got[:5]} == {old}
    assert old not in {d["consumer"] for d in got[5:]}
    reported = [e["detail"].split()[0] for e in driver.events("o1")]
    assert "consumer_deleted" in reported
    assert reported[-2:] == ["reset", "ordered_consumer_recreated"]
    await driver.ok("close", session="s")
    gone = await driver.call("stop", sub="o1")  # close stopped the session's consumptions
    assert gone["error"]["kind"] == "invalid"


@pytest.mark.asyncio
async def test_a_push_consumer_reports_missed_heartbeats_and_keeps_consuming(driver, proxy, js, stream):
    """Idle heartbeats dropped on the wire: heartbeats_missed is reported, nothing ends, messages still arrive."""
    await connected(driver, proxy.url)
    started = await driver.ok("push", session="s", sub="p1", stream=stream, subject=f"{stream}.>",
                                  idle_heartbeat_s=0.2)  # fmt: skip
    assert started["effective_idle_heartbeat_s"] == 0.2
    await proxy.wait_for(lambda: proxy.counters.heartbeats_passed >= 1)
    proxy.drop_idle_heartbeats = True
    await driver.until(lambda: driver.events("p1", "missed-heartbeat"))
    assert driver.events("p1", "missed-heartbeat")[0]["detail"] == 'heartbeats_missed {"count":2}'
    proxy.drop_idle_heartbeats = False
    seqs = await publish(js, stream, 2)
    await driver.until(lambda: len(driver.deliveries("p1")) >= 2)
    assert [d["stream_seq"] for d in driver.deliveries("p1")] == seqs
    assert not driver.events("p1", "terminal")


@pytest.mark.asyncio
async def test_fetch_says_how_it_ended(driver, proxy, js, stream):
    """Fewer messages than asked: timeout after expires; heartbeats dropped: missed-heartbeat after 2 intervals."""
    await js.add_consumer(stream, durable_name="P", ack_policy="explicit")
    await connected(driver, proxy.url)
    seqs = await publish(js, stream, 2)
    short = await driver.ok("fetch", session="s", stream=stream, consumer="P", batch=5, expires_s=1.0,
                                idle_heartbeat_s=None)  # fmt: skip
    assert [d["stream_seq"] for d in short["deliveries"]] == seqs
    assert short["error"]["kind"] == "timeout"
    assert 'discard {"messagesLeft":3' in short["error"]["detail"]
    assert short["took_s"] >= 0.9
    proxy.drop_idle_heartbeats = True
    starved = await driver.ok("fetch", session="s", stream=stream, consumer="P", batch=1, expires_s=5.0,
                                  idle_heartbeat_s=0.5)  # fmt: skip
    assert starved["deliveries"] == []
    assert starved["error"]["kind"] == "missed-heartbeat"
    assert starved["error"]["detail"].startswith("JetStreamError: heartbeats missed")
    assert 0.9 <= starved["took_s"] < 4.0  # well before the 5 s expiry; a busy machine delays the timers
    missing = await driver.call("fetch", session="s", stream=stream, consumer="NOPE", batch=1, expires_s=1.0,
                                idle_heartbeat_s=None)  # fmt: skip
    assert (missing["error"]["kind"], missing["error"]["code"], missing["error"]["err_code"]) == ("api", 404, 10014)
    refused = await driver.call("fetch", session="s", stream=stream, consumer="P", batch=1, expires_s=0.5,
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
    await connected(driver, embedded_server.url)
    started = await driver.ok("consume", session="s", sub="c1", stream=stream, consumer="C",
                                  idle_heartbeat_s=asked, expires_s=expires_s, max_messages=None)  # fmt: skip
    request = json.loads((await pull_requests.next_msg(WAIT_S)).data)
    await watcher.close()
    assert started == {"effective_idle_heartbeat_s": effective}
    assert request["idle_heartbeat"] == effective * 1e9
    seqs = await publish(js, stream, 2)
    await driver.until(lambda: len(driver.deliveries("c1")) == 2)
    assert [d["stream_seq"] for d in driver.deliveries("c1")] == seqs


@pytest.mark.asyncio
async def test_misbehave_duplicates_deliveries_and_rejects_unknown_modes(driver, embedded_server, js, stream):
    await js.add_consumer(stream, durable_name="P", ack_policy="explicit")
    await connected(driver, embedded_server.url)
    seqs = await publish(js, stream, 2)
    bad = await driver.call("misbehave", modes=["duplicate-delivery", "no-such-mode"])
    assert bad["error"]["kind"] == "invalid"
    await driver.ok("misbehave", modes=["duplicate-delivery"])
    fetched = await driver.ok("fetch", session="s", stream=stream, consumer="P", batch=2, expires_s=1.0,
                                  idle_heartbeat_s=None)  # fmt: skip
    assert [d["stream_seq"] for d in fetched["deliveries"]] == [seqs[0], seqs[0], seqs[1], seqs[1]]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["swallow-missed-heartbeat", "terminal-on-missed-heartbeat"])
async def test_misbehave_changes_the_missed_heartbeat_report(driver, proxy, js, stream, mode):
    """Swallowed: no report though heartbeats were missed; terminal: the report ends the consumption."""
    await driver.ok("misbehave", modes=[mode])
    await connected(driver, proxy.url)
    await driver.ok("push", session="s", sub="p1", stream=stream, subject=f"{stream}.>", idle_heartbeat_s=0.2)
    await proxy.wait_for(lambda: proxy.counters.heartbeats_passed >= 1)
    proxy.drop_idle_heartbeats = True
    if mode == "swallow-missed-heartbeat":
        # the client reports at 2 to 3 missed intervals (see the push test): 5 dropped is past that
        await proxy.wait_for(lambda: proxy.counters.heartbeats_dropped >= 5)
        assert driver.events("p1") == []
    else:
        await driver.until(lambda: driver.events("p1", "terminal"))
        assert [e["kind"] for e in driver.events("p1")] == ["missed-heartbeat", "terminal"]
        assert driver.events("p1", "terminal")[0]["detail"].startswith("terminal-on-missed-heartbeat")


@pytest.mark.asyncio
async def test_misbehave_chatty_reports_missed_heartbeats_while_messages_flow(driver, embedded_server, js, stream):
    await driver.ok("misbehave", modes=["chatty-missed-heartbeat"])
    await connected(driver, embedded_server.url)
    await driver.ok("push", session="s", sub="p1", stream=stream, subject=f"{stream}.>", idle_heartbeat_s=5)
    await publish(js, stream, 1)
    await driver.until(lambda: len(driver.events("p1", "missed-heartbeat")) >= 3)
    assert driver.events("p1", "missed-heartbeat")[0]["detail"].startswith("chatty-missed-heartbeat")
    await driver.ok("stop", sub="p1")
    count = len(driver.records)
    await driver.settle(0.3)  # three chatty intervals: a running timer would have reported by now
    assert len(driver.records) == count


@pytest.mark.asyncio
async def test_misbehave_drops_deliveries_after_a_reset(driver, embedded_server, js, stream):
    """After the ordered consumer resets, the driver streams nothing more for it (the client did deliver)."""
    await driver.ok("misbehave", modes=["drop-deliveries-after-reset"])
    await connected(driver, embedded_server.url)
    first = await publish(js, stream, 2)
    await driver.ok("ordered", session="s", sub="o1", stream=stream, subject=f"{stream}.x",
                        idle_heartbeat_s=0.5, start=None, inactive_threshold_s=None)  # fmt: skip
    # a witness on the same connection: what reaches it later was sent after everything o1's consumer sent
    await driver.ok("push", session="s", sub="w", stream=stream, subject=f"{stream}.marker", idle_heartbeat_s=5)
    await driver.until(lambda: len(driver.deliveries("o1")) >= 2)
    await js.delete_consumer(stream, driver.deliveries("o1")[0]["consumer"])
    later = await publish(js, stream, 2)
    await driver.until(lambda: [e for e in driver.events("o1", "reset") if "recreated" in e["detail"]])
    recreated = json.loads(driver.events("o1", "reset")[-1]["detail"].split(" ", 1)[1])["name"]

    async def delivered_by_new_consumer() -> None:
        while (await js.consumer_info(stream, recreated)).delivered.stream_seq < later[-1]:
            await asyncio.sleep(0.05)  # polls the server's record of what the new consumer sent

    await asyncio.wait_for(delivered_by_new_consumer(), WAIT_S)
    await js.publish(f"{stream}.marker", b"after")
    await driver.until(lambda: driver.deliveries("w"))
    assert [d["stream_seq"] for d in driver.deliveries("o1")] == first


@pytest.mark.asyncio
async def test_a_durable_queue_push_consumer_is_created_once_and_shared(driver, embedded_server, js, stream):
    """`push` with durable and queue creates the grouped consumer; a second member binds it as it is (same deliver
    subject) and the two share the messages."""
    await connected(driver, embedded_server.url)
    for sub in ("m1", "m2"):
        await driver.ok("push", session="s", sub=sub, stream=stream, subject=f"{stream}.>",
                            idle_heartbeat_s=None, durable="Q", queue="Q", inactive_threshold_s=None)  # fmt: skip
        if sub == "m1":
            first = (await js.consumer_info(stream, "Q")).config
    config = (await js.consumer_info(stream, "Q")).config
    assert (config.deliver_group, config.deliver_subject) == ("Q", first.deliver_subject)
    seqs = await publish(js, stream, 10)
    await driver.until(lambda: len(driver.deliveries("m1")) + len(driver.deliveries("m2")) == 10)
    assert sorted(d["stream_seq"] for sub in ("m1", "m2") for d in driver.deliveries(sub)) == seqs


# ---- v3: watch ------------------------------------------------------------------------------------------------
# @nats-io/kv and @nats-io/obj 3.4.0 have no end-of-initial-data marker: the driver places the null record where
# the client's `isUpdate` flag says the initial data ended (drivers/js/watch.mjs).


class TestMisbehave(MisbehaveContract):
    pass


class TestWatch(WatchContract):
    both_includes_refused = "not both"
    # nats.js drops only "DEL" entries (kv.js: `ignoreDeletes && e.operation === "DEL"`): a PURGE still comes. The
    # dropped DEL was the last initial entry, the one the client flags isUpdate, so the client flags no yielded entry
    # as the end of the initial data until the PURGE after it.
    ignoring_deletes_before_purge = (("b", "1", "PUT"), ("c", "1", "PUT"))
    ignoring_deletes_at_end = (*ignoring_deletes_before_purge, ("b", "", "PURGE"), None, ("d", "1", "PUT"))
    updates_only_begins = (None,)  # the client flags isUpdate from the first entry: the null comes first

    @pytest.mark.asyncio
    async def test_obj_watch_streams_null_then_changes_and_replays_only_with_include_history(
        self, driver, bucket, embedded_server
    ):
        """Without includeHistory the client's object watcher starts at DeliverPolicy.New (nothing replayed); it has
        no updates-only option at all."""
        await connected(driver, embedded_server.url)
        obj = {"bucket": bucket}
        await driver.ok("obj_create", session="s", obj=obj)
        await driver.ok("obj_put", session="s", obj=obj | {"name": "x", "data_b64": "eA==", "chunk_size": None})
        watch = {"include_history": False, "updates_only": False, "ignore_deletes": False}
        assert await driver.ok("obj_watch", session="s", obj=obj | watch | {"sub": "w"}) == {}
        await driver.ok("obj_watch", session="s", obj=obj | watch | {"sub": "h", "include_history": True})
        await driver.until(lambda: None in watched(driver, "w") and None in watched(driver, "h"))
        await driver.ok("obj_put", session="s", obj=obj | {"name": "y", "data_b64": "eQ==", "chunk_size": None})
        await driver.ok("obj_delete", session="s", obj=obj | {"name": "x"})
        await driver.until(lambda: len(watched(driver, "w")) == 3 and len(watched(driver, "h")) == 4)
        assert watched(driver, "w") == [None, ("y", False), ("x", True)]
        assert watched(driver, "h") == [("x", False), None, ("y", False), ("x", True)]
        info = next(r["info"] for r in driver.records if r["type"] == "watch" and r["info"])
        assert (info["bucket"], info["size"]) == (bucket, 1)
        updates_only = await driver.call("obj_watch", session="s", obj=obj | watch | {"sub": "u", "updates_only": True})
        assert updates_only["error"]["kind"] == "unsupported" and "updates_only" in updates_only["error"]["message"]
