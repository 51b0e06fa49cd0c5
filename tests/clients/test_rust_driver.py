"""The async-nats driver (conformance/clients/drivers/rust) speaking protocol v3 against a real nats-server.

Each test starts the driver built once per module (cargo build --release --locked), talks JSON lines over its pipes,
and checks what the Rust client really reported: deliveries in order, missed heartbeats from its pull stream when the
wire stalls, the consumer deletion its ordered consumer recovers from without a word, and the misbehave modes the
suite's proofs rely on.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import pytest
from nats.js import api

from jetcheck.conformance.clients.build import rust_driver

from .driver_contract import (
    SESSION,
    MisbehaveContract,
    PullDriverContract,
    WatchContract,
    connected,
    eight_in_order_then_stopped,
    kv_bucket,
    kv_watch,
    kv_watch_request,
    load_rows,
    missed_heartbeat_of_a_stall,
    obj_watch_of_x,
    ordered,
    ordered_five,
    publish,
    push_delivers,
    put,
    watched,
)
from .driver_contract import WAIT_S as WAIT

DRIVER_DIR = Path(__file__).resolve().parents[2] / "conformance" / "clients" / "drivers" / "rust"
CARGO = shutil.which("cargo") or next((p for p in [Path.home() / ".cargo/bin/cargo"] if p.exists()), None)
HEARTBEAT = 0.5


# A first build compiles async-nats and tokio from scratch: minutes on two busy cores.
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def driver_command() -> tuple[str, ...]:
    """The driver as jetcheck builds it (build.rust_driver: --locked, into the cache keyed by the sources' digest,
    so only a changed driver is compiled again)."""
    if CARGO is None:
        pytest.skip("cargo is not installed: the async-nats driver cannot be built")
    return (rust_driver()[0],)


class TestPullDriver(PullDriverContract):
    client, runtime = "async-nats", "rustc 1."
    ops = frozenset(
        {"hello", "connect", "close", "ping", "ordered", "push", "consume", "fetch", "stop", "misbehave", "shutdown"}
        | {"kv_put", "kv_watch", "obj_put", "obj_watch", "load_publish", "load_stop"}
    )
    reset_shows_with_a_delivery = True  # the ordered consumer recreates its consumer without a word (see below)
    # Consumer::stream() asks for no heartbeat unless given one, unlike Consumer::messages()
    pull_request_heartbeats = ((1.0, None, 1.0), (None, 2.0, None), (None, None, None))

    def pinned_version(self) -> str:
        """The async-nats version Cargo.lock pins."""
        return re.search(r'name = "async-nats"\nversion = "([^"]+)"', (DRIVER_DIR / "Cargo.lock").read_text()).group(1)


@pytest.mark.asyncio
async def test_ordered_consumer_delivers_in_order_and_recreates_after_its_consumer_is_deleted(
    driver, stream, embedded_server
):
    """async-nats's ordered pull consumer recreates a deleted consumer as <name>_1 without telling the application:
    the driver streams a `reset` when the new name shows, and nothing is lost or repeated."""
    js, name = stream
    first, info = await ordered_five(driver, js, name, embedded_server.url)
    assert (info.name, info.config.ack_policy, info.config.max_deliver) == (first, api.AckPolicy.NONE, 1)

    await js.delete_consumer(name, first)
    await publish(js, name, 3)
    await driver.until(lambda: len(driver.deliveries("o")) == 8)
    assert driver.events("o", "reset") and driver.events("o", "error") == []
    assert {d["consumer"] for d in driver.deliveries("o")[5:]} == {f"{first}_1"}
    await eight_in_order_then_stopped(driver, js, name)


@pytest.mark.asyncio
async def test_the_ordered_consumers_default_heartbeat_is_15_s(driver, stream, embedded_server):
    """Without a heartbeat the ordered consumer's pull requests ask for 15 s (half its 30 s expiry)."""
    _, name = stream
    await connected(driver, embedded_server.url)
    assert (await ordered(driver, name, heartbeat=None))["result"] == {"effective_idle_heartbeat_s": 15.0}
    refused = await driver.call(
        "ordered", session="s", sub="o2", stream=name, subject=f"{name}.>", idle_heartbeat_s=None, start=None,
        inactive_threshold_s=5.0,
    )  # fmt: skip
    assert refused["error"]["kind"] == "unsupported" and "inactive_threshold" in refused["error"]["message"]


@pytest.mark.asyncio
async def test_a_stalled_wire_is_reported_as_missed_heartbeats_by_consume(driver, stream, proxy):
    """With the server's bytes held, the pull stream yields MissingHeartbeat after 2 heartbeats; after the stall
    messages flow again."""
    js, name = stream
    assert "MissingHeartbeat" in await missed_heartbeat_of_a_stall(driver, js, name, proxy)
    proxy.release()
    await publish(js, name, 1)
    await driver.until(lambda: len(driver.deliveries("c")) == 3, timeout=3 * WAIT)
    assert driver.events("c", "terminal") == []


@pytest.mark.asyncio
async def test_push_consumers_deliver_and_a_durable_queue_consumer_is_shared(driver, stream, embedded_server):
    """`push` creates a push consumer; with durable and queue a second member binds the first one's consumer."""
    js, name = stream
    await push_delivers(driver, js, name, embedded_server.url)
    for sub in ("m1", "m2"):
        await driver.ok("push", session="s", sub=sub, stream=name, subject=f"{name}.>", idle_heartbeat_s=None,
                        durable="Q", queue="Q", inactive_threshold_s=None)  # fmt: skip
    other = await driver.call("push", session="s", sub="m3", stream=name, subject=f"{name}.>", idle_heartbeat_s=None,
                              durable="Q", queue="OTHER", inactive_threshold_s=None)  # fmt: skip
    assert other["error"]["kind"] == "unsupported"  # messages() always joins the consumer's own group
    await publish(js, name, 10)
    await driver.until(lambda: len(driver.deliveries("m1")) + len(driver.deliveries("m2")) == 12)


@pytest.mark.asyncio
async def test_load_kv_puts_then_gets_the_key_put_last(driver, embedded_server):
    """A closed-loop load_kv run alternates puts and gets; every operation is one row of eight int64s."""
    await connected(driver, embedded_server.url)
    bucket = f"RSLKV{uuid.uuid4().hex[:8]}"
    await driver.ok("kv_create", session=SESSION, bucket=bucket, history=1, ttl_s=None)
    await driver.ok("load_kv", session=SESSION, sub="k", bucket=bucket, keys=["a", "b"], payload_size=8, rate=0,
                    max_inflight=1, batch_ms=20)  # fmt: skip
    await driver.until(lambda: any(r["type"] == "load" and r["sub"] == "k" for r in driver.records))
    counts = await driver.ok("load_stop", sub="k", at_ns=None)
    rows = load_rows(driver, "k")
    ops = [rows[i] for i in range(0, len(rows), 8)]
    assert counts["ops"] == counts["ok"] == len(ops) >= 2 and counts["failed"] == 0
    assert ops[:2] == [0, 1]  # a put, then a get of the key it put
    await driver.ok("kv_delete_bucket", session=SESSION, bucket=bucket)


# ---- v3: watch ------------------------------------------------------------------------------------------------


class TestMisbehave(MisbehaveContract):
    pass


class TestWatch(WatchContract):
    both_includes_refused = "each take one"
    updates_only_begins = (None,)  # DeliverPolicy::New replays nothing: the driver's null comes first

    @pytest.mark.asyncio
    async def test_kv_watch_ignore_deletes_leaves_out_delete_markers(self, driver, bucket, embedded_server):
        """async-nats's watch calls take no options: ignore_deletes is `unsupported`, naming them."""
        await kv_bucket(driver, embedded_server.url, bucket)
        refused = await driver.call("kv_watch", **kv_watch_request(bucket, ignore_deletes=True))
        assert refused["error"]["kind"] == "unsupported" and "watch_with_history" in refused["error"]["message"]

    @pytest.mark.asyncio
    async def test_kv_watch_meta_only_hands_over_no_value(self, driver, bucket, embedded_server):
        """async-nats has no meta-only watch: `unsupported`."""
        await kv_bucket(driver, embedded_server.url, bucket)
        refused = await driver.call("kv_watch", **kv_watch_request(bucket, meta_only=True))
        assert refused["error"]["kind"] == "unsupported" and "meta_only" in refused["error"]["message"]

    @pytest.mark.asyncio
    async def test_stop_ends_a_watch(self, driver, bucket, embedded_server):
        """On an empty bucket the client flags nothing before the first update: the null follows that update."""
        await kv_bucket(driver, embedded_server.url, bucket)
        await kv_watch(driver, bucket)
        await put(driver, bucket, "a", "1")
        await driver.until(lambda: len(watched(driver)) == 2)
        assert watched(driver) == [("a", "1", "PUT"), None]
        assert await driver.ok("stop", sub="w") == {}
        await put(driver, bucket, "a", "2")
        await driver.settle(0.3)
        assert len(watched(driver)) == 2 and driver.events("w") == []
        assert (await driver.call("stop", sub="w"))["error"]["kind"] == "invalid"

    @pytest.mark.asyncio
    async def test_obj_watch_streams_each_objects_last_info_then_changes_with_no_null(
        self, driver, bucket, embedded_server
    ):
        """ObjectStore::watch_with_history() yields bare infos: no end-of-initial-data record."""
        obj = await obj_watch_of_x(driver, bucket, embedded_server.url)
        await driver.ok("obj_put", session=SESSION, obj=obj | {"name": "y", "data_b64": "eQ==", "chunk_size": None})
        await driver.ok("obj_delete", session=SESSION, obj=obj | {"name": "x"})
        await driver.until(lambda: len(watched(driver)) == 3)
        assert watched(driver) == [("x", False), ("y", False), ("x", True)]
