"""The jnats driver (conformance/clients/drivers/java) speaking the driver protocol against a real nats-server.

The driver is built with Maven into jetcheck's cache, once per change of its sources (skipped when java or mvn is
missing); each test starts it and checks what jnats really reported: deliveries in order, the ordered consumer's
recreation, heartbeat alarms through the connection's ErrorListener when the wire stalls, and the misbehave modes the
suite's proofs rely on.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import pytest
from nats.js import api

from jetcheck.conformance.clients.build import java_driver

from .driver_contract import (
    PULL_HEARTBEAT,
    MisbehaveContract,
    PullDriverContract,
    WatchContract,
    connected,
    durable_queue_shared,
    eight_in_order_then_stopped,
    kv_bucket,
    kv_watch_request,
    missed_heartbeat_of_a_stall,
    obj_watch_of_x,
    ordered,
    ordered_five,
    publish,
    put,
    watched,
)
from .driver_contract import WAIT_S as WAIT

DRIVER_DIR = Path(__file__).resolve().parents[2] / "conformance" / "clients" / "drivers" / "java"
JAVA, MVN = shutil.which("java"), shutil.which("mvn")
HEARTBEAT = PULL_HEARTBEAT  # the smallest jnats gets: half its smallest expiry (1 s)


@pytest.fixture(scope="module")
def driver_command() -> tuple[str, ...]:
    """The driver as jetcheck builds and runs it (build.java_driver: `mvn package` into the cache keyed by the
    sources' digest, so only a changed driver is built again; a build per module took 45-57 s of a busy machine,
    and xdist runs this module's classes as separate units, so up to three times)."""
    if JAVA is None or MVN is None:
        pytest.skip("java or mvn is not installed: the jnats driver cannot be built")
    return tuple(java_driver())


class TestPullDriver(PullDriverContract):
    client, runtime = "jnats", "java 17"
    ops = frozenset(
        {"hello", "connect", "close", "ping", "ordered", "push", "consume", "fetch", "stop", "misbehave", "shutdown"}
        | {"kv_put", "kv_watch", "obj_put", "obj_watch", "load_publish", "load_stop"}
    )
    swallowed_stall_s = 6 * HEARTBEAT  # jnats' heartbeat alarm fires after 3 intervals
    only_heartbeat_events = False  # jnats streams the held wire's other statuses too
    malformed_is_invalid = False  # the driver reads {"op": 3} as an op it does not know: `unsupported`
    pull_request_heartbeats = ((1.0, None, 1.0),)

    def pinned_version(self) -> str:
        """The jnats release the pom pins (Nats.CLIENT_VERSION)."""
        return re.search(r"<jnats.version>(\S+)</jnats.version>", (DRIVER_DIR / "pom.xml").read_text()).group(1)


@pytest.mark.asyncio
async def test_hello_lists_no_publish_retries(driver):
    """jnats has no publish retries: hello leaves publish_retrying out."""
    assert "publish_retrying" not in (await driver.ok("hello"))["ops"]


@pytest.mark.asyncio
async def test_ordered_consumer_delivers_in_order_and_recreates_after_its_consumer_is_deleted(
    driver, stream, embedded_server
):
    """jnats' ordered consumer (a pull consumer) resumes on a new consumer after a delete: the driver streams a
    `reset` for the new name, and nothing is lost or repeated."""
    js, name = stream
    first, info = await ordered_five(driver, js, name, embedded_server.url)
    assert (info.name, info.config.ack_policy, info.config.max_deliver) == (first, api.AckPolicy.NONE, 1)

    await js.delete_consumer(name, first)
    await driver.until(lambda: driver.events("o", "reset"), timeout=3 * WAIT)
    await publish(js, name, 3)
    await driver.until(lambda: len(driver.deliveries("o")) == 8)
    await eight_in_order_then_stopped(driver, js, name)


@pytest.mark.asyncio
async def test_a_heartbeat_under_the_clients_minimum_is_refused(driver, stream, embedded_server):
    """jnats derives the heartbeat from the expiry, which must be >= 1 s: 0.2 s is refused in the client's words;
    without one, consume()'s default (30 s expiry) asks for 15 s."""
    _, name = stream
    await connected(driver, embedded_server.url)
    refused = await ordered(driver, name, heartbeat=0.2)
    assert refused["error"]["kind"] == "invalid"
    assert "Expires must be greater than or equal to 1000" in refused["error"]["message"]
    default = await ordered(driver, name, sub="o2", heartbeat=None)
    assert default["result"] == {"effective_idle_heartbeat_s": 15.0}


@pytest.mark.asyncio
async def test_a_stall_is_reported_by_the_heartbeat_alarm_after_three_intervals(driver, stream, proxy):
    """With every server byte held, jnats' ErrorListener.heartbeatAlarm fires after 3 heartbeat intervals."""
    js, name = stream
    assert (await missed_heartbeat_of_a_stall(driver, js, name, proxy)).startswith("ErrorListener.heartbeatAlarm")
    proxy.release()
    assert driver.events("c", "terminal") == []


@pytest.mark.asyncio
async def test_push_and_a_durable_queue_bound_by_a_second_member(driver, stream, embedded_server):
    """`push` creates a push consumer through JetStream.subscribe; a second member binds the durable as it is; a
    queue member with an idle heartbeat is the client's refusal ("[SUB-90006] Flow Control and/or heartbeat is not
    valid in queue mode")."""
    js, name = stream
    await connected(driver, embedded_server.url)
    refused = await driver.call("push", session="s", sub="hb", stream=name, subject=f"{name}.>", idle_heartbeat_s=1.0,
                                durable="H", queue="H", inactive_threshold_s=None)  # fmt: skip
    assert refused["error"]["kind"] == "invalid" and "SUB-90006" in refused["error"]["message"]
    await durable_queue_shared(driver, js, name)
    other = await driver.call("push", session="s", sub="m3", stream=name, subject=f"{name}.>", idle_heartbeat_s=None,
                              durable="Q", queue="OTHER", inactive_threshold_s=None)  # fmt: skip
    assert other["error"]["kind"] == "invalid", other


@pytest.mark.asyncio
async def test_kv_misbehave_modes_misreport(driver, embedded_server):
    """kv-keys-unfiltered lists every key whatever the filter; kv-buckets-misreport deletes nothing."""
    bucket = f"J{uuid.uuid4().hex[:8]}"
    await kv_bucket(driver, embedded_server.url, bucket, "kv-keys-unfiltered", "kv-buckets-misreport")
    for key in ("a.1", "b.1"):
        await put(driver, bucket, key, "v")
    keys = await driver.ok("kv_keys", session="s", bucket=bucket, filters=["a.*"])
    assert sorted(keys["keys"]) == ["a.1", "b.1"]
    await driver.ok("kv_delete_bucket", session="s", bucket=bucket)
    assert f"KV_{bucket}" in (await driver.ok("kv_bucket_names", session="s"))["names"]
    nc = await embedded_server.connect()
    await nc.jetstream().delete_stream(f"KV_{bucket}")
    await nc.close()


class TestMisbehave(MisbehaveContract):
    pass


class TestWatch(WatchContract):
    # jnats leaves out delete and purge markers with IGNORE_DELETE (NatsKeyValueWatchSubscription: PUTs only)
    ignoring_deletes_before_purge = (("b", "1", "PUT"), ("c", "1", "PUT"), None)
    ignoring_deletes_at_end = (*ignoring_deletes_before_purge, ("d", "1", "PUT"))
    updates_only_begins = (None,)  # jnats sends endOfData() at once with UPDATES_ONLY (NatsWatchSubscription)

    @pytest.mark.asyncio
    async def test_kv_watch_include_history_streams_every_revision(self, driver, bucket, embedded_server):
        """jnats takes both INCLUDE_HISTORY and UPDATES_ONLY without a word: the last one given wins (a finding)."""
        await kv_bucket(driver, embedded_server.url, bucket)
        for key, value in (("a", "1"), ("b", "1"), ("a", "2")):
            await put(driver, bucket, key, value)
        await driver.ok("kv_watch", **kv_watch_request(bucket, include_history=True))
        await driver.until(lambda: None in watched(driver))
        assert watched(driver) == [("a", "1", "PUT"), ("b", "1", "PUT"), ("a", "2", "PUT"), None]
        both = await driver.call("kv_watch", **kv_watch_request(bucket, "w2", include_history=True, updates_only=True))
        assert both["ok"], both

    @pytest.mark.asyncio
    async def test_obj_watch_streams_the_objects_then_null_then_changes(self, driver, bucket, embedded_server):
        obj = await obj_watch_of_x(driver, bucket, embedded_server.url)
        await driver.until(lambda: None in watched(driver))
        await driver.ok("obj_put", session="s", obj=obj | {"name": "y", "data_b64": "eQ==", "chunk_size": None})
        await driver.until(lambda: len(watched(driver)) == 3)
        assert watched(driver) == [("x", False), None, ("y", False)]
