"""The nats.go driver (conformance/clients/drivers/go) speaking protocol v1 against a real nats-server.

Each test starts the driver built once per module, talks JSON lines over its pipes, and checks what the Go client
really reported: deliveries in order, missed heartbeats through ConsumeErrHandler when the wire stalls, the
consumer deletion an ordered consumer recovers from, and every misbehave mode the suite's proofs rely on.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path
from types import MappingProxyType

import pytest
from nats.js import api

from .driver_contract import WAIT_S as WAIT
from .driver_contract import (
    MisbehaveContract,
    PullDriverContract,
    WatchContract,
    connected,
    consume,
    durable_queue_shared,
    eight_in_order_then_stopped,
    obj_watch_of_x,
    ordered,
    ordered_five,
    publish,
    pull_consumer,
    push_delivers,
    watched,
)

DRIVER_DIR = Path(__file__).resolve().parents[2] / "conformance" / "clients" / "drivers" / "go"
GO = shutil.which("go") or next((p for p in ["/usr/local/go/bin/go"] if Path(p).exists()), None)
HEARTBEAT = 0.5  # the Go client's smallest PullHeartbeat


# Plain `go build` rather than build.go_driver, whose release-aware build would leave out a feature file that fails
# to compile. Once per worker process: xdist runs this module's classes as separate units (a build each, 10 s of a
# busy machine, when the fixture was per module).
@pytest.fixture(scope="session")
def driver_command(tmp_path_factory) -> tuple[str, ...]:
    if GO is None:
        pytest.skip("go is not installed: the nats.go driver cannot be built")
    binary = tmp_path_factory.mktemp("go-driver") / "driver"
    build = subprocess.run(
        [GO, "build", "-o", str(binary), "."], cwd=DRIVER_DIR, capture_output=True, text=True, timeout=300
    )
    assert build.returncode == 0, build.stderr
    return (str(binary),)


async def pull_request_waiting(js, stream: str, consumer: str) -> None:
    """Until the server holds a pull request of `consumer` (num_waiting), polling its info for up to WAIT s."""
    async with asyncio.timeout(WAIT):
        while (await js.consumer_info(stream, consumer)).num_waiting == 0:
            await asyncio.sleep(0.02)


class TestPullDriver(PullDriverContract):
    client, runtime = "nats.go", "go1."
    ops = frozenset(
        {"hello", "connect", "close", "ping", "ordered", "push", "consume", "fetch", "stop", "misbehave", "shutdown"}
        | {"kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get", "kv_delete", "kv_purge", "kv_keys"}
        | {"kv_history", "kv_status", "kv_watch", "obj_watch"}
        | {"obj_create", "obj_put", "obj_get", "obj_info", "obj_list", "obj_delete"}
    )
    # Fetch sends no heartbeat for an expiry under 10 s
    expired_fetch_also = MappingProxyType({"effective_idle_heartbeat_s": None})
    pull_request_heartbeats = (
        (1.0, None, 1.0),  # PullHeartbeat as given
        (None, 2.0, 1.0),  # half the PullExpiry
        (None, None, 15.0),  # half jetstream.DefaultExpires (30 s)
    )

    def pinned_version(self) -> str:
        """The nats.go version go.mod requires."""
        return re.search(r"github.com/nats-io/nats.go (v\S+)", (DRIVER_DIR / "go.mod").read_text()).group(1)


@pytest.mark.asyncio
async def test_ordered_consumer_delivers_in_order_and_recreates_after_its_consumer_is_deleted(
    driver, stream, embedded_server
):
    """The Go ordered consumer reports ErrConsumerDeleted through ConsumeErrHandler, then resumes on a new consumer
    (the driver streams a `reset` for the new name) with nothing lost or repeated."""
    js, name = stream
    first, info = await ordered_five(driver, js, name, embedded_server.url)
    assert (info.name, info.config.ack_policy, info.config.deliver_subject) == (first, api.AckPolicy.NONE, None)

    await js.delete_consumer(name, first)
    await driver.until(lambda: driver.events("o", "reset"))
    assert "ErrConsumerDeleted" in driver.events("o", "error")[0]["detail"]
    await publish(js, name, 3)
    await driver.until(lambda: len(driver.deliveries("o")) == 8)
    assert {d["consumer"] for d in driver.deliveries("o")[5:]} == {first.rsplit("_", 1)[0] + "_2"}
    await eight_in_order_then_stopped(driver, js, name)


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
    assert await consume(driver, name) == {"effective_idle_heartbeat_s": HEARTBEAT}
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
async def test_a_deleted_pull_consumer_ends_the_consumption_with_an_error_then_terminal(
    driver, stream, embedded_server
):
    """Consume gets ErrConsumerDeleted through ConsumeErrHandler and closes itself: `error` then `terminal`.

    Only a pull request the server holds gets the 409: deleted before its pull request arrives, the Go client
    reports nats.ErrNoResponders and ErrNoHeartbeat every 2 heartbeats and never ends (see the driver notes)."""
    js, name = stream
    await pull_consumer(js, name, "C")
    await connected(driver, embedded_server.url)
    await consume(driver, name)
    await pull_request_waiting(js, name, "C")
    await js.delete_consumer(name, "C")
    await driver.until(lambda: driver.events("c", "terminal"))
    assert [e["kind"] for e in driver.events("c")] == ["error", "terminal"]
    assert driver.events("c")[0]["detail"].startswith("jetstream.ErrConsumerDeleted")


@pytest.mark.asyncio
async def test_push_consumers_exist_in_this_nats_go_and_deliver(driver, stream, embedded_server):
    """nats.go's jetstream package has push consumers (CreateOrUpdatePushConsumer): `push` is supported."""
    js, name = stream
    await push_delivers(driver, js, name, embedded_server.url)


@pytest.mark.asyncio
async def test_a_durable_queue_push_consumer_is_created_once_and_shared(driver, stream, embedded_server):
    """`push` with durable and queue creates the grouped consumer; a second member binds it as it is (same deliver
    subject) and the two share the messages."""
    js, name = stream
    await connected(driver, embedded_server.url)
    await durable_queue_shared(driver, js, name)


# ---- v3: watch ------------------------------------------------------------------------------------------------


class TestMisbehave(MisbehaveContract):
    pass


class TestWatch(WatchContract):
    both_includes_refused = "include history"
    # nats.go leaves out delete and purge markers
    ignoring_deletes_before_purge = (("b", "1", "PUT"), ("c", "1", "PUT"), None)
    ignoring_deletes_at_end = (*ignoring_deletes_before_purge, ("d", "1", "PUT"))
    updates_only_begins = ()  # nats.go sends no nil with UpdatesOnly (jetstream/kv.go: "Skip if UpdatesOnly() is set")

    @pytest.mark.asyncio
    async def test_obj_watch_streams_the_objects_then_null_then_changes(self, driver, bucket, embedded_server):
        obj = await obj_watch_of_x(driver, bucket, embedded_server.url)
        await driver.until(lambda: None in watched(driver))
        await driver.ok("obj_put", session="s", obj=obj | {"name": "y", "data_b64": "eQ==", "chunk_size": None})
        await driver.ok("obj_delete", session="s", obj=obj | {"name": "x"})
        await driver.until(lambda: len(watched(driver)) == 4)
        assert watched(driver) == [("x", False), None, ("y", False), ("x", True)]
        info = next(r["info"] for r in driver.records if r["type"] == "watch" and r["info"])
        assert (info["bucket"], info["size"]) == (bucket, 1)
