"""The nats.go driver (conformance/clients/drivers/go) speaking protocol v1 against a real nats-server.

Each test starts the driver built once per module, talks JSON lines over its pipes, and checks what the Go client
really reported: deliveries in order, missed heartbeats through ConsumeErrHandler when the wire stalls, the
consumer deletion an ordered consumer recovers from, and every misbehave mode the suite's proofs rely on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import pytest_asyncio
from nats.js import api

from ..conftest import VENDOR_PASSWORD
from .driver_contract import WAIT_S as WAIT
from .driver_contract import (
    PipeDriver,
    WatchContract,
    connected,
    ordered,
    publish,
    pull_consumer,
    running,
    sequences,
    watched,
)

DRIVER_DIR = Path(__file__).resolve().parents[2] / "conformance" / "clients" / "drivers" / "go"
GO = shutil.which("go") or next((p for p in ["/usr/local/go/bin/go"] if Path(p).exists()), None)
HEARTBEAT = 0.5  # the Go client's smallest PullHeartbeat


@pytest.fixture(scope="module")
def driver_binary(tmp_path_factory) -> Path:
    if GO is None:
        pytest.skip("go is not installed: the nats.go driver cannot be built")
    binary = tmp_path_factory.mktemp("go-driver") / "driver"
    build = subprocess.run(
        [GO, "build", "-o", str(binary), "."], cwd=DRIVER_DIR, capture_output=True, text=True, timeout=300
    )
    assert build.returncode == 0, build.stderr
    return binary


@pytest_asyncio.fixture
async def driver(driver_binary):
    async with running(str(driver_binary)) as d:
        yield d


async def pull_request_waiting(js, stream: str, consumer: str) -> None:
    """Until the server holds a pull request of `consumer` (num_waiting), polling its info for up to WAIT s."""
    async with asyncio.timeout(WAIT):
        while (await js.consumer_info(stream, consumer)).num_waiting == 0:
            await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_hello_names_nats_go_at_the_version_go_mod_requires(driver):
    """hello reports the client and the exact module version built in, the Go runtime and every v1 op."""
    required = re.search(r"github.com/nats-io/nats.go (v\S+)", (DRIVER_DIR / "go.mod").read_text()).group(1)
    hello = await driver.ok("hello")
    assert (hello["protocol"], hello["client"], hello["version"]) == (3, "nats.go", required)
    assert hello["runtime"].startswith("go1.") and hello["mono_ns"] > 0
    v1 = {"hello", "connect", "close", "ordered", "push", "consume", "fetch", "stop", "misbehave", "shutdown"}
    kv = {"kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get", "kv_delete", "kv_purge", "kv_keys"}
    assert set(hello["ops"]) >= v1 | kv | {"kv_history", "kv_status"}  # v2 sections add more
    assert set(hello["ops"]) >= {"obj_create", "obj_put", "obj_get", "obj_info", "obj_list", "obj_delete"}
    assert set(hello["ops"]) >= {"kv_watch", "obj_watch"}
    unknown = await driver.call("no_such_op")
    assert unknown["error"]["kind"] == "unsupported"
    malformed = await driver.request({"op": 3})
    assert malformed["error"]["kind"] == "invalid"


@pytest.mark.asyncio
async def test_credentials_reach_the_client_and_never_its_log(driver_binary, vendor_server):
    """user/password and the CA arrive in connect; a wrong password is a `connection` error; stderr stays clean."""
    server, directory = vendor_server
    proc = await asyncio.create_subprocess_exec(
        str(driver_binary), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    driver = PipeDriver(proc)
    credentials = {"user": "vendor", "password": VENDOR_PASSWORD, "tls_ca": str(directory / "ca.pem")}
    await driver.ok("connect", session="good", url=server.url, credentials=credentials, reconnect_wait_s=0.1)
    wrong = {**credentials, "password": "not-" + VENDOR_PASSWORD}
    refused = await driver.call("connect", session="bad", url=server.url, credentials=wrong, reconnect_wait_s=0.1)
    assert refused["error"]["kind"] == "connection", refused
    await driver.ok("shutdown")
    assert await asyncio.wait_for(proc.wait(), WAIT) == 0
    log = (await proc.stderr.read()).decode()
    assert "session good: connected" in log
    assert VENDOR_PASSWORD not in log and VENDOR_PASSWORD not in refused["error"]["message"]


@pytest.mark.asyncio
async def test_ordered_consumer_delivers_in_order_and_recreates_after_its_consumer_is_deleted(
    driver, stream, embedded_server
):
    """The Go ordered consumer reports ErrConsumerDeleted through ConsumeErrHandler, then resumes on a new consumer
    (the driver streams a `reset` for the new name) with nothing lost or repeated."""
    js, name = stream
    await publish(js, name, 5)
    await connected(driver, embedded_server.url)
    assert (await ordered(driver, name))["result"] == {"effective_idle_heartbeat_s": HEARTBEAT}
    await driver.until(lambda: len(driver.deliveries("o")) == 5)
    first = driver.deliveries("o")[0]["consumer"]
    assert base64.b64decode(driver.deliveries("o")[0]["payload_b64"]) == b"m0"
    (info,) = await js.consumers_info(name)
    assert (info.name, info.config.ack_policy, info.config.deliver_subject) == (first, api.AckPolicy.NONE, None)

    await js.delete_consumer(name, first)
    await driver.until(lambda: driver.events("o", "reset"))
    assert "ErrConsumerDeleted" in driver.events("o", "error")[0]["detail"]
    await publish(js, name, 3)
    await driver.until(lambda: len(driver.deliveries("o")) == 8)
    assert sequences(driver.deliveries("o")) == [(n, n) for n in range(1, 6)] + [(6, 1), (7, 2), (8, 3)]
    assert {d["consumer"] for d in driver.deliveries("o")[5:]} == {first.rsplit("_", 1)[0] + "_2"}

    await driver.ok("stop", sub="o")
    await publish(js, name, 1)
    await driver.settle(0.3)
    assert len(driver.deliveries("o")) == 8


@pytest.mark.asyncio
async def test_a_heartbeat_under_the_clients_minimum_is_refused_and_leaves_no_consumer(driver, stream, embedded_server):
    """PullHeartbeat below 500 ms is an `invalid` error in the client's words; the consumer the Go ordered
    consumer creates before it checks its options is removed again."""
    js, name = stream
    await connected(driver, embedded_server.url)
    refused = await ordered(driver, name, heartbeat=0.2)
    assert refused["error"]["kind"] == "invalid"
    assert "idle_heartbeat value must be within 500ms-30s range" in refused["error"]["message"]
    assert await js.consumers_info(name) == []
    default = await ordered(driver, name, sub="o2", heartbeat=None)
    assert default["result"] == {"effective_idle_heartbeat_s": 5}  # ordered Consume's default with 30 s expiry


@pytest.mark.asyncio
async def test_a_stalled_wire_is_reported_as_missed_heartbeats_by_consume_and_fetch(
    driver, stream, proxy, embedded_server
):
    """With the server's bytes held, Consume's ConsumeErrHandler gets ErrNoHeartbeat after 2 heartbeats, and a
    fetch ends with it; after the stall messages flow again."""
    js, name = stream
    await pull_consumer(js, name, "C")
    await pull_consumer(js, name, "F")
    await connected(driver, proxy.url)
    consume = await driver.ok("consume", session="s", sub="c", stream=name, consumer="C", idle_heartbeat_s=HEARTBEAT,
                              expires_s=None, max_messages=None)  # fmt: skip
    assert consume == {"effective_idle_heartbeat_s": HEARTBEAT}
    await publish(js, name, 2)
    await driver.until(lambda: len(driver.deliveries("c")) == 2)
    # Stall once the fetch's pull request reached the server (the proxy holds only server->client bytes).
    watcher = await embedded_server.connect()
    pull_requests = await watcher.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{name}.F")
    fetch = asyncio.create_task(
        driver.ok("fetch", session="s", stream=name, consumer="F", batch=10, expires_s=3.0, idle_heartbeat_s=HEARTBEAT)
    )
    await pull_requests.next_msg(timeout=WAIT)
    await watcher.close()
    proxy.stall()
    await driver.until(lambda: driver.events("c", "missed-heartbeat"))
    assert driver.events("c", "missed-heartbeat")[0]["detail"].startswith("jetstream.ErrNoHeartbeat")
    ended = await fetch
    assert ended["error"]["kind"] == "missed-heartbeat" and ended["took_s"] < 3.0
    assert ended["effective_idle_heartbeat_s"] == HEARTBEAT
    proxy.release()
    await publish(js, name, 1)
    await driver.until(lambda: len(driver.deliveries("c")) == 3)
    assert driver.events("c", "terminal") == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("asked", "expires_s", "effective"),
    [
        (1.0, None, 1.0),  # PullHeartbeat as given
        (None, 2.0, 1.0),  # half the PullExpiry
        (None, None, 15.0),  # half jetstream.DefaultExpires (30 s)
    ],
)
async def test_consume_reports_the_heartbeat_its_pull_requests_ask_for(
    driver, stream, embedded_server, asked, expires_s, effective
):
    """Consume's effective_idle_heartbeat_s is the idle_heartbeat of the pull requests the client sends."""
    js, name = stream
    await pull_consumer(js, name, "C")
    watcher = await embedded_server.connect()
    pull_requests = await watcher.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{name}.C")
    await connected(driver, embedded_server.url)
    started = await driver.ok("consume", session="s", sub="c", stream=name, consumer="C", idle_heartbeat_s=asked,
                              expires_s=expires_s, max_messages=None)  # fmt: skip
    request = json.loads((await pull_requests.next_msg(timeout=WAIT)).data)
    await watcher.close()
    assert started == {"effective_idle_heartbeat_s": effective}
    assert request["idle_heartbeat"] == effective * 1e9
    await publish(js, name, 2)
    await driver.until(lambda: len(driver.deliveries("c")) == 2)


@pytest.mark.asyncio
async def test_a_fetch_with_fewer_messages_ends_at_its_expiry_as_a_timeout(driver, stream, embedded_server):
    """The Go client ends an expired fetch with MessageBatch.Error() nil: the driver reports kind `timeout`."""
    js, name = stream
    await pull_consumer(js, name, "F")
    await publish(js, name, 2)
    await connected(driver, embedded_server.url)
    result = await driver.ok("fetch", session="s", stream=name, consumer="F", batch=5, expires_s=1.0,
                             idle_heartbeat_s=None)  # fmt: skip
    assert sequences(result["deliveries"]) == [(1, 1), (2, 2)]
    assert result["error"]["kind"] == "timeout" and 0.9 < result["took_s"] < 3.0  # margin for a busy machine
    assert result["effective_idle_heartbeat_s"] is None  # Fetch sends no heartbeat for an expiry under 10 s
    missing = await driver.call("fetch", session="s", stream=name, consumer="NOPE", batch=1, expires_s=1.0,
                                idle_heartbeat_s=None)  # fmt: skip
    assert (missing["error"]["kind"], missing["error"]["code"], missing["error"]["err_code"]) == ("api", 404, 10014)


@pytest.mark.asyncio
async def test_a_deleted_pull_consumer_ends_the_consumption_with_an_error_then_terminal(
    driver, stream, embedded_server
):
    """Consume gets ErrConsumerDeleted through ConsumeErrHandler and closes itself: `error` then `terminal`.

    Only a pull request the server holds gets the 409: deleted before its pull request arrives, the Go client
    reports nats.ErrNoResponders and ErrNoHeartbeat every 2 heartbeats and never ends (see the driver notes)."""
    js, name = stream
    await pull_consumer(js, name, "C")
    await connected(driver, embedded_server.url)
    await driver.ok("consume", session="s", sub="c", stream=name, consumer="C", idle_heartbeat_s=HEARTBEAT,
                    expires_s=None, max_messages=None)  # fmt: skip
    await pull_request_waiting(js, name, "C")
    await js.delete_consumer(name, "C")
    await driver.until(lambda: driver.events("c", "terminal"))
    assert [e["kind"] for e in driver.events("c")] == ["error", "terminal"]
    assert driver.events("c")[0]["detail"].startswith("jetstream.ErrConsumerDeleted")


@pytest.mark.asyncio
async def test_push_consumers_exist_in_this_nats_go_and_deliver(driver, stream, embedded_server):
    """nats.go's jetstream package has push consumers (CreateOrUpdatePushConsumer): `push` is supported."""
    js, name = stream
    await publish(js, name, 2)
    await connected(driver, embedded_server.url)
    result = await driver.ok("push", session="s", sub="p", stream=name, subject=f"{name}.>", idle_heartbeat_s=1.0)
    await driver.until(lambda: len(driver.deliveries("p")) == 2)
    assert {d["consumer"] for d in driver.deliveries("p")} == {result["consumer"]}
    assert result["effective_idle_heartbeat_s"] == 1.0


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["swallow-missed-heartbeat", "terminal-on-missed-heartbeat"])
async def test_misbehave_changes_what_a_stall_reports(driver, stream, proxy, mode):
    """swallow-missed-heartbeat hides the client's ErrNoHeartbeat; terminal-on-missed-heartbeat ends the sub."""
    js, name = stream
    await pull_consumer(js, name, "C")
    await connected(driver, proxy.url, mode)
    await driver.ok("consume", session="s", sub="c", stream=name, consumer="C", idle_heartbeat_s=HEARTBEAT,
                    expires_s=None, max_messages=None)  # fmt: skip
    proxy.stall()
    if mode == "swallow-missed-heartbeat":
        await driver.settle(4 * HEARTBEAT)
        assert driver.events("c") == []
    else:
        await driver.until(lambda: driver.events("c", "terminal"))
        assert [e["kind"] for e in driver.events("c")] == ["missed-heartbeat", "terminal"]
    proxy.release()


@pytest.mark.asyncio
async def test_misbehave_chatty_and_duplicate_invent_events_and_deliveries(driver, stream, embedded_server):
    """chatty-missed-heartbeat invents an event every 100 ms while data flows; duplicate-delivery streams twice."""
    js, name = stream
    await pull_consumer(js, name, "C")
    await publish(js, name, 2)
    await connected(driver, embedded_server.url, "chatty-missed-heartbeat", "duplicate-delivery")
    await driver.ok("consume", session="s", sub="c", stream=name, consumer="C", idle_heartbeat_s=HEARTBEAT,
                    expires_s=None, max_messages=None)  # fmt: skip
    await driver.until(lambda: len(driver.events("c", "missed-heartbeat")) >= 3)
    assert sequences(driver.deliveries("c")) == [(1, 1), (1, 1), (2, 2), (2, 2)]
    await driver.ok("stop", sub="c")
    count = len(driver.events("c"))
    await driver.settle(0.3)
    assert len(driver.events("c")) == count  # a stopped consumption is not chatty


@pytest.mark.asyncio
async def test_misbehave_drop_deliveries_after_reset(driver, stream, embedded_server):
    """drop-deliveries-after-reset: after the ordered consumer's reset, the driver streams none of its messages."""
    js, name = stream
    await publish(js, name, 2)
    await connected(driver, embedded_server.url, "drop-deliveries-after-reset")
    await ordered(driver, name)
    await driver.until(lambda: len(driver.deliveries("o")) == 2)
    await js.delete_consumer(name, driver.deliveries("o")[0]["consumer"])
    await driver.until(lambda: driver.events("o", "reset"))
    await publish(js, name, 2)
    await driver.settle(0.5)
    assert sequences(driver.deliveries("o")) == [(1, 1), (2, 2)]


@pytest.mark.asyncio
async def test_close_stops_the_sessions_consumptions_and_forgets_the_session(driver, stream, embedded_server):
    """After close nothing more streams for its subs, and the session's name is unknown again (`invalid`)."""
    js, name = stream
    await pull_consumer(js, name, "C")
    await connected(driver, embedded_server.url)
    await driver.ok("consume", session="s", sub="c", stream=name, consumer="C", idle_heartbeat_s=HEARTBEAT,
                    expires_s=None, max_messages=None)  # fmt: skip
    await publish(js, name, 1)
    await driver.until(lambda: len(driver.deliveries("c")) == 1)
    await driver.ok("close", session="s")
    await publish(js, name, 1)
    await driver.settle(0.3)
    assert len(driver.deliveries("c")) == 1 and driver.events("c") == []
    after = await driver.call("fetch", session="s", stream=name, consumer="C", batch=1, expires_s=1.0,
                              idle_heartbeat_s=None)  # fmt: skip
    assert after["error"]["kind"] == "invalid"
    assert (await driver.call("stop", sub="c"))["error"]["kind"] == "invalid"


@pytest.mark.asyncio
async def test_a_durable_queue_push_consumer_is_created_once_and_shared(driver, stream, embedded_server):
    """`push` with durable and queue creates the grouped consumer; a second member binds it as it is (same deliver
    subject) and the two share the messages."""
    js, name = stream
    await connected(driver, embedded_server.url)
    for sub in ("m1", "m2"):
        await driver.ok("push", session="s", sub=sub, stream=name, subject=f"{name}.>", idle_heartbeat_s=None,
                        durable="Q", queue="Q", inactive_threshold_s=None)  # fmt: skip
        if sub == "m1":
            first = (await js.consumer_info(name, "Q")).config
    config = (await js.consumer_info(name, "Q")).config
    assert (config.deliver_group, config.deliver_subject) == ("Q", first.deliver_subject)
    await publish(js, name, 10)
    await driver.until(lambda: len(driver.deliveries("m1")) + len(driver.deliveries("m2")) == 10)
    seqs = sorted(d["stream_seq"] for sub in ("m1", "m2") for d in driver.deliveries(sub))
    assert seqs == list(range(1, 11))


# ---- v3: watch ------------------------------------------------------------------------------------------------


class TestWatch(WatchContract):
    both_includes_refused = "include history"
    # nats.go leaves out delete and purge markers
    ignoring_deletes_before_purge = (("b", "1", "PUT"), ("c", "1", "PUT"), None)
    ignoring_deletes_at_end = (*ignoring_deletes_before_purge, ("d", "1", "PUT"))
    updates_only_begins = ()  # nats.go sends no nil with UpdatesOnly (jetstream/kv.go: "Skip if UpdatesOnly() is set")

    @pytest.mark.asyncio
    async def test_obj_watch_streams_the_objects_then_null_then_changes(self, driver, bucket, embedded_server):
        await connected(driver, embedded_server.url)
        obj = {"bucket": bucket}
        await driver.ok("obj_create", session="s", obj=obj)
        await driver.ok("obj_put", session="s", obj=obj | {"name": "x", "data_b64": "eA==", "chunk_size": None})
        watch = {"sub": "w", "include_history": False, "updates_only": False, "ignore_deletes": False}
        assert await driver.ok("obj_watch", session="s", obj=obj | watch) == {}
        await driver.until(lambda: None in watched(driver))
        await driver.ok("obj_put", session="s", obj=obj | {"name": "y", "data_b64": "eQ==", "chunk_size": None})
        await driver.ok("obj_delete", session="s", obj=obj | {"name": "x"})
        await driver.until(lambda: len(watched(driver)) == 4)
        assert watched(driver) == [("x", False), None, ("y", False), ("x", True)]
        info = next(r["info"] for r in driver.records if r["type"] == "watch" and r["info"])
        assert (info["bucket"], info["size"]) == (bucket, 1)
