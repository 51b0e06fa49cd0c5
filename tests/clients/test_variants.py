"""The proof variants wrap an adapter: what reaches the application changes, the client itself is never touched."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from jetcheck.conformance.clients.base import (
    MISSED_HEARTBEAT,
    RESET,
    TERMINAL,
    ConsumeOptions,
    Delivery,
    Documented,
    EventLog,
    Inbox,
    PushOptions,
    Watch,
)
from jetcheck.testing import variants, wrapping


class FakeSubscription:
    def __init__(self) -> None:
        self.inbox = Inbox()
        self.stopped = False

    async def stop(self) -> None:
        self.stopped = True


class FakeSession:
    """A session whose client 'reports' and 'delivers' when the test says so."""

    def __init__(self) -> None:
        self.events = EventLog()
        self.subs: list[FakeSubscription] = []

    async def ordered(self, stream: str, subject: str, options=None) -> FakeSubscription:
        self.subs.append(FakeSubscription())
        return self.subs[-1]

    push = consume = ordered

    def report(self, kind: str) -> None:
        self.events.add(kind, f"the fake client says {kind}")

    def deliver(self, seq: int, consumer: str = "C1") -> None:
        loop_time = asyncio.get_running_loop().time()
        self.subs[-1].inbox.put(Delivery(seq, seq, "s.x", b"m", consumer, loop_time))

    async def close(self) -> None:
        pass


class FakeAdapter:
    name = "fake"
    version = "1.0.0"
    documented = Documented(ordered_idle_heartbeat_s=5.0, missed_heartbeats="an event")

    def __init__(self) -> None:
        self.sessions: list[FakeSession] = []

    async def connect(self, url, credentials, options=None) -> FakeSession:
        self.sessions.append(FakeSession())
        return self.sessions[-1]


async def wrapped(*modes: str):
    """A session of the fake client behind `modes`, each wrapping the one before (as `fake+a+b`), and the fake."""
    fake = FakeAdapter()
    adapter = fake
    for mode in modes:
        adapter = variants.misbehaving(mode)(adapter)
    assert adapter.name == "+".join(["fake", *modes])
    session = await adapter.connect("nats://127.0.0.1:1", None)
    return session, fake.sessions[0]


@pytest.mark.asyncio
async def test_swallowing_hides_missed_heartbeats_even_behind_another_wrapper():
    """The swallowing log replaces the innermost session's, so an outer wrapper does not bypass it."""
    session, client = await wrapped("swallow-missed-heartbeat", "duplicate-delivery")
    await session.push("S", "s.>", PushOptions(idle_heartbeat=0.5))
    client.report(MISSED_HEARTBEAT)
    client.report("error")
    assert [e.kind for e in session.events.events] == ["error"]


@pytest.mark.asyncio
async def test_duplicate_delivery_hands_every_delivery_over_twice():
    session, client = await wrapped("duplicate-delivery")
    sub = await session.ordered("S", "s.>")
    client.deliver(1)
    client.deliver(2)
    assert [d.stream_seq for d in sub.inbox.deliveries] == [1, 1, 2, 2]


@pytest.mark.asyncio
async def test_terminal_on_missed_heartbeat_ends_consumption_at_the_first_report():
    session, client = await wrapped("terminal-on-missed-heartbeat")
    sub = await session.consume("S", "C", ConsumeOptions(idle_heartbeat=0.5))
    client.deliver(1)
    client.report(MISSED_HEARTBEAT)
    client.deliver(2)
    assert [d.stream_seq for d in sub.inbox.deliveries] == [1]
    assert [e.kind for e in session.events.events] == [MISSED_HEARTBEAT, TERMINAL]


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["new consumer", "reset event"])
async def test_drop_after_reset_stops_at_a_new_consumer_or_a_reset_report(how):
    session, client = await wrapped("drop-deliveries-after-reset")
    sub = await session.ordered("S", "s.>")
    client.deliver(1)
    if how == "reset event":
        client.report(RESET)
        client.deliver(2)
    else:
        client.deliver(2, consumer="C2")
    assert [d.stream_seq for d in sub.inbox.deliveries] == [1]


@pytest.mark.asyncio
async def test_chatty_reports_missed_heartbeats_while_data_flows_and_stops_on_close():
    session, client = await wrapped("chatty-missed-heartbeat")
    await session.push("S", "s.>", PushOptions(idle_heartbeat=0.5))
    since = asyncio.get_running_loop().time()
    client.deliver(1)
    assert await session.events.wait_for(MISSED_HEARTBEAT, since, 1.0) is not None
    await session.close()
    assert all(task.done() for task in session.chatter)


def test_no_variant_swaps_a_class_or_reads_a_private_attribute():
    """Issue 16: misbehaving clients are built by composition, never by `__class__` or another object's `_x`."""
    found = [
        f"{Path(module.__file__).name} line {node.lineno}: .{node.attr}"
        for module in (variants, wrapping)  # the variants, and the wrapping they build on
        for node in ast.walk(ast.parse(Path(module.__file__).read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        and not (isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "super")
    ]
    assert not found, f"a variant reaches into other objects: {found}"


class FakeBucket:
    """A KV bucket or object store whose watcher has yielded `early` by the time watch() returns."""

    def __init__(self, early: list) -> None:
        self.early = early

    async def watch(self, *args, **options) -> Watch:
        async def stop() -> None:
            pass

        watch = Watch(stop, FakeSession())
        for update in self.early:
            watch.inbox.put(update)
        return watch


class WatchingSession(FakeSession):
    def __init__(self, early: list) -> None:
        super().__init__()
        self.bucket = FakeBucket(early)

    async def kv_create(self, bucket: str, **options) -> FakeBucket:
        return self.bucket

    async def object_store(self, bucket: str) -> FakeBucket:
        return self.bucket


async def watched_through(mode: str, updates: list) -> list:
    """What the application reads from a watch of `mode` (KV and object store alike) whose client yields `updates`:
    the first before the variant wrapped the watch, the rest after."""
    session = variants.WRAPPERS[mode](WatchingSession(updates[:1]))
    seen = []
    for bucket in (await session.kv_create("B"), await session.object_store("B")):
        watch = await bucket.watch()
        for update in updates[1:]:
            watch.inbox.put(update)
        seen.append([await watch.next(1.0) for _ in watch.inbox.deliveries])
    assert seen[0] == seen[1]
    return seen[0]


@pytest.mark.asyncio
async def test_watch_no_end_of_data_hides_only_the_end_of_initial_data():
    assert await watched_through("watch-no-end-of-data", ["a", None, "b"]) == ["a", "b"]


@pytest.mark.asyncio
async def test_watch_drop_first_hides_the_first_update_of_every_watch_only():
    assert await watched_through("watch-drop-first", ["a", None, "b"]) == [None, "b"]
    assert await watched_through("watch-drop-first", [None, "a", "b"]) == [None, "b"]
