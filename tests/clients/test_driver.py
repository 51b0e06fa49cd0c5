"""The driver adapter over a fake driver (tests/clients/fake_driver.py): the protocol without node or go."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest
import pytest_asyncio

from jetcheck.conformance.clients.base import (
    ERROR,
    MISSED_HEARTBEAT,
    RESET,
    ClientError,
    Documented,
    NotInRelease,
    ObjectInfo,
    PushOptions,
    Unsupported,
    connected,
)
from jetcheck.conformance.clients.driver_adapter import DriverAdapter
from jetcheck.conformance.clients.driver_pipe import DriverGone
from jetcheck.fixtures.target import Credentials

FAKE = Path(__file__).with_name("fake_driver.py")
SECRET = "pa55-in-no-argv"


def fake_adapter(*args: str) -> DriverAdapter:
    return DriverAdapter(
        "fake",
        Documented(ordered_idle_heartbeat_s=5.0, missed_heartbeats="fake"),
        lambda: ([sys.executable, str(FAKE), *args], None),
    )


@pytest.fixture
def adapter():
    made = fake_adapter()
    yield made
    made.shutdown()


@pytest.fixture
def slow_starting_adapter():
    """A driver whose runtime takes 0.4 s to start reading, as node's does on a busy machine."""
    made = fake_adapter("--start-delay", "0.4")
    yield made
    made.shutdown()


@pytest_asyncio.fixture
async def session(adapter):
    """A session of the fake driver's client, closed afterwards."""
    async with connected(adapter, "nats://127.0.0.1:1", Credentials()) as made:
        yield made


@pytest.mark.asyncio
async def test_the_adapter_learns_the_exact_version_from_hello(adapter, session):
    """The version is the one the driver reports, spelled without Go's `v`; the name is the client's."""
    assert (adapter.name, adapter.version) == ("fake", "9.9.9")


@pytest.mark.asyncio
async def test_a_long_request_does_not_hold_up_others(adapter):
    """A fetch waiting for its expiry does not block a connect sent after it: requests are pipelined by id."""
    session = await adapter.connect("nats://127.0.0.1:1", Credentials())
    fetching = asyncio.create_task(session.fetch("S", "C", batch=1, expires=1.0, idle_heartbeat=None))
    await asyncio.sleep(0)  # the fetch request is written first
    other = await adapter.connect("nats://127.0.0.1:1", Credentials())
    assert not fetching.done(), "the second request waited for the first"
    outcome = await fetching
    assert (outcome.deliveries, outcome.error.kind, outcome.error.detail) == ([], "timeout", "fake: no messages")
    await other.close()
    await session.close()


@pytest.mark.asyncio
async def test_a_fetch_outcome_carries_the_heartbeat_the_client_used(session):
    """The fetch's effective_idle_heartbeat_s, as the driver reports it, reaches the check."""
    outcome = await session.fetch("S", "C", batch=1, expires=0.1, idle_heartbeat=0.3)
    assert outcome.effective_idle_heartbeat_s == 0.5  # the fake raises it as nats.js does


@pytest.mark.asyncio
@pytest.mark.parametrize("which", ["adapter", "slow_starting_adapter"])
async def test_deliveries_reach_the_subscriptions_inbox_with_driver_times_on_the_loop_clock(which, request):
    """Streamed deliveries land in order in the inbox of the subscription they name; their times, taken on the
    driver's own clock, fall between asking and receiving on the loop's clock, also when the driver's runtime was
    slow to start (its first answer then tells nothing precise about its clock)."""
    adapter = request.getfixturevalue(which)
    session = await adapter.connect("nats://127.0.0.1:1", Credentials())
    asked = asyncio.get_running_loop().time()
    sub = await session.push("S", "", PushOptions(idle_heartbeat=0.5))
    got = await sub.inbox.until(3, 5.0)
    received = asyncio.get_running_loop().time()
    assert [(d.stream_seq, d.payload, d.consumer) for d in got] == [
        (1, b"m1", "C1"),
        (2, b"m2", "C1"),
        (3, b"m3", "C1"),
    ]
    assert all(asked - 0.05 <= d.at <= received + 0.05 for d in got), (asked, [d.at for d in got], received)
    assert sub.effective_idle_heartbeat_s == 0.5
    await sub.stop()
    await session.close()


@pytest.mark.asyncio
async def test_a_kv_watch_yields_the_entries_and_end_of_data_the_driver_streams_for_it(session):
    """`watch` records reach the watch whose sub they name, in order, `entry: null` as None; a record for a sub
    nobody asked for is dropped; stop() asks the driver to stop that sub."""
    kv = await session.kv_create("B")
    watch = await kv.watch("a.>", ignore_deletes=True)
    updates = [await watch.next(5.0) for _ in range(3)]
    shown = [None if e is None else (e.bucket, e.key, e.value, e.revision, e.operation) for e in updates]
    assert shown == [("B", "a", b"1", 1, "PUT"), None, ("B", "b", b"", 2, "DEL")]
    with pytest.raises(TimeoutError):
        await watch.next(0.2)
    await watch.stop()


@pytest.mark.asyncio
async def test_an_object_store_watch_yields_infos_and_end_of_data(session):
    store = await session.object_store("B")
    watch = await store.watch(include_history=True)
    assert [await watch.next(5.0) for _ in range(2)] == [ObjectInfo(name="o", bucket="B", size=3), None]
    await watch.stop()


@pytest.mark.asyncio
async def test_a_watch_option_the_client_lacks_is_unsupported(session):
    kv = await session.kv_create("B")
    with pytest.raises(Unsupported, match="fake: no ranges"):
        await kv.watch("unsupported.>")


def test_a_driver_speaking_an_older_protocol_is_refused():
    """A v1 driver (no watches) is not taken for a v3 one: the run says which protocol it speaks."""
    old = fake_adapter("--protocol", "1")
    try:
        with pytest.raises(DriverGone, match="speaks protocol 1, not 3"):
            old.process()
    finally:
        old.shutdown()


@pytest.mark.asyncio
async def test_misbehave_modes_reach_the_driver_and_the_name(adapter):
    """A proof variant's modes are sent after hello, and the adapter's name carries them."""
    adapter.misbehave(["duplicate-delivery", "swallow-missed-heartbeat"])
    answer = await adapter.process().request("connect", session="s0", url="nats://127.0.0.1:1", credentials={})
    assert answer["modes"] == ["duplicate-delivery", "swallow-missed-heartbeat"]
    assert adapter.name == "fake+duplicate-delivery+swallow-missed-heartbeat"


@pytest.mark.asyncio
async def test_events_are_mapped_onto_the_event_log_kinds(session):
    """missed-heartbeat and reset keep their kinds; a kind jetcheck does not know is an error naming it."""
    since = asyncio.get_running_loop().time() - 0.05
    await session.push("S", "missed-heartbeat,reset,strange", PushOptions(idle_heartbeat=0.5))
    assert await session.events.wait_for(ERROR, since, 5.0) is not None
    kinds = [(e.kind, e.detail) for e in session.events.events]
    assert kinds == [
        (MISSED_HEARTBEAT, "fake missed-heartbeat"),
        (RESET, "fake reset"),
        (ERROR, "strange: fake strange"),
    ]


@pytest.mark.asyncio
async def test_an_unknown_op_is_unsupported(adapter):
    """A driver answering `unsupported` raises Unsupported, which a check can turn into 'not implemented'."""
    adapter.process()
    with pytest.raises(Unsupported, match="no op kv_put"):
        await adapter.process().request("kv_put")


@pytest.mark.asyncio
async def test_an_op_the_release_lacks_is_not_in_release(adapter):
    """A driver answering `not_in_release` raises NotInRelease with its words (the check becomes na), not a
    ClientError a check could take for the client's refusal."""
    with pytest.raises(NotInRelease, match=r"^not in fake 0\.1\.0: Consumer\.pause$") as raised:
        await adapter.process().request("pause_newer")
    assert not isinstance(raised.value, ClientError)


@pytest.mark.asyncio
async def test_a_dead_driver_fails_the_request_and_every_later_one_with_its_reason(adapter):
    """The driver exiting mid-request ends that request and each later one with DriverGone naming the exit and
    its last stderr line, instead of hanging until a timeout."""
    session = await adapter.connect("nats://127.0.0.1:1", Credentials())
    with pytest.raises(DriverGone, match=r"fake driver exited with status 3 \(fake driver: boom\)"):
        await adapter.process().request("crash")
    with pytest.raises(DriverGone, match="exited with status 3"):
        await adapter.connect("nats://127.0.0.1:1", Credentials())
    with pytest.raises(DriverGone, match="exited with status 3"):
        await session.push("S", "", PushOptions(idle_heartbeat=0.5))


@pytest.mark.asyncio
async def test_credentials_reach_the_driver_only_in_its_connect_request(adapter, monkeypatch):
    """The password is received by the driver, yet is in neither its command line nor its environment, even
    though the suite's own JETCHECK_* variables carry it."""
    monkeypatch.setenv("JETCHECK_PASSWORD", SECRET)
    process = adapter.process()
    answer = await process.request("connect", session="s0", url="nats://127.0.0.1:1",
                                   credentials={"user": "u", "password": SECRET})  # fmt: skip
    assert answer == {"received": ["password", "user"], "modes": []}
    pid = process.proc.pid
    assert SECRET not in Path(f"/proc/{pid}/cmdline").read_text()
    assert SECRET.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert "JETCHECK_PASSWORD" in os.environ  # the suite's own environment did carry it


def test_one_driver_process_serves_checks_on_different_event_loops(adapter):
    """pytest-asyncio gives each check its own loop: the same process answers on each, with deliveries."""

    async def one_check() -> tuple[int, list[int]]:
        session = await adapter.connect("nats://127.0.0.1:1", Credentials())
        sub = await session.ordered("S", "s.>")
        got = await sub.inbox.until(3, 5.0)
        await session.close()
        return adapter.process().proc.pid, [d.stream_seq for d in got]

    first, second = asyncio.run(one_check()), asyncio.run(one_check())
    assert first[0] == second[0] and first[1] == second[1] == [1, 2, 3]


def test_shutdown_ends_the_driver_cleanly(adapter):
    """At the run's end the driver is asked to shut down and exits 0; later use says it was shut down."""
    process = adapter.process()
    adapter.shutdown()
    assert process.proc.returncode == 0
    with pytest.raises(DriverGone, match="shut down"):
        adapter.process()


def test_a_driver_that_cannot_start_is_one_clear_reason():
    """A launch command that does not exist is DriverGone naming the driver, not an OSError traceback."""
    adapter = DriverAdapter("fake", Documented(5.0, ""), lambda: (["/nonexistent/driver"], None))
    with pytest.raises(DriverGone, match="fake driver could not start"):
        adapter.process()


def test_concurrent_starts_share_one_process(adapter):
    """Two threads asking for the driver at once get the same process."""
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(adapter.process().proc.pid)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(seen) == 2 and seen[0] == seen[1]
