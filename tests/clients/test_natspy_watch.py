"""nats-py's watchers through the adapter (against a real nats-server): what nats-py yields, in its order."""

from __future__ import annotations

import uuid

import pytest

from jetcheck.conformance.clients.base import KV_DEL, KV_PUT, ObjectInfo, Unsupported, connected
from jetcheck.conformance.clients.natspy import NatsPyAdapter


@pytest.fixture
def bucket():
    return f"natspywatch{uuid.uuid4().hex[:8]}"


def shown(entry) -> tuple | None:
    return None if entry is None else (entry.key, entry.value, entry.revision, entry.operation)


@pytest.mark.asyncio
async def test_a_kv_watch_yields_latest_entries_end_of_data_then_changes(embedded_server, bucket):
    async with connected(NatsPyAdapter(), embedded_server.url, embedded_server.credentials) as session:
        kv = await session.kv_create(bucket, history=3)
        await kv.put("x.a", b"1")
        await kv.delete("x.a")
        await kv.put("y.b", b"2")
        watch = await kv.watch("x.>")
        try:
            assert [shown(await watch.next(5.0)) for _ in range(2)] == [("x.a", b"", 2, KV_DEL), None]
            await kv.put("x.c", b"3")
            assert shown(await watch.next(5.0)) == ("x.c", b"3", 4, KV_PUT)
            with pytest.raises(TimeoutError):
                await watch.next(0.2)
        finally:
            await watch.stop()
        await session.js.delete_key_value(bucket)


@pytest.mark.asyncio
async def test_options_nats_py_lacks_are_unsupported(embedded_server, bucket):
    """nats-py 2.16's KeyValue.watch has no updates_only and takes one filter: Unsupported, never ignored."""
    async with connected(NatsPyAdapter(), embedded_server.url, embedded_server.credentials) as session:
        kv = await session.kv_create(bucket)
        with pytest.raises(Unsupported, match=r"KeyValue\.watch has no updates_only option"):
            await kv.watch(updates_only=True)
        with pytest.raises(Unsupported, match="takes one key or range"):
            await kv.watch(["a", "b"])
        await session.js.delete_key_value(bucket)


@pytest.mark.asyncio
async def test_an_object_store_watch_yields_infos_then_end_of_data(embedded_server, bucket):
    async with connected(NatsPyAdapter(), embedded_server.url, embedded_server.credentials) as session:
        store = await session.object_store(bucket)
        await store.put("o", b"abc")
        watch = await store.watch()
        try:
            first, end = [await watch.next(5.0) for _ in range(2)]
            assert isinstance(first, ObjectInfo) and (first.name, first.size, end) == ("o", 3, None)
        finally:
            await watch.stop()
        await session.js.delete_object_store(bucket)
