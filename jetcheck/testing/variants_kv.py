"""nats-py's variants for the ADR-48 and ADR-8 key-filter and bucket-management KV rules, the driver modes of the same
names (drivers/PROTOCOL.md "v2: KV"), each wrapping the session (and its buckets) on the application's side:
- `kv-ttl-ignored`: a bucket's limit markers, a create's per-key TTL and a purge's TTL are not passed to the client.
- `kv-markers-as-values`: a delete, purge or limit marker reaches the application as a value (a get returns the
  key's latest message as a PUT entry; a watcher's DEL/PURGE entries arrive as PUT).
- `kv-keys-unfiltered`: keys(filters) lists the bucket's keys without its filters.
- `kv-buckets-misreport`: deleting a bucket does nothing; bucket names come back as their streams' (KV_<b>).
- `kv-watch-meta-ignored`: a watch asked for meta_only is made without it, so its entries carry their values.
"""

from __future__ import annotations

import dataclasses

from jetcheck.conformance.clients.base import KV_PUT, KeyNotFound, KvEntry
from jetcheck.conformance.jsapi import subject_messages

from .wrapping import RelayedWatches, WrappedSession, WrappedStore


class KvMisbehaviour(WrappedSession):
    bucket_class: type = WrappedStore

    async def kv_create(self, bucket: str, **options):
        return self.bucket_class(await self.inner.kv_create(bucket, **self.options(options)), self)

    def options(self, options: dict) -> dict:
        return options


class TtlIgnoredBucket(WrappedStore):
    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> int:
        return await self.inner.create(key, value)

    async def purge(self, key: str, *, ttl: float | None = None) -> None:
        await self.inner.purge(key)


class KvTtlIgnored(KvMisbehaviour):
    bucket_class = TtlIgnoredBucket

    def options(self, options: dict) -> dict:
        return {k: v for k, v in options.items() if k != "limit_marker_ttl"}


def as_value(update):
    return update if not isinstance(update, KvEntry) else dataclasses.replace(update, operation=KV_PUT)


class MarkersAsValuesBucket(WrappedStore):
    async def get(self, key: str) -> KvEntry:
        """The key's latest message as a value when nats-py says the key has none (a marker is its latest)."""
        try:
            return await self.inner.get(key)
        except KeyNotFound:
            nc, bucket = self.inner.session.nc, self.inner.bucket
            stored = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.{key}")
            if not stored:
                raise
            return KvEntry(bucket, key, stored[-1].payload, stored[-1].seq, KV_PUT)

    async def watch(self, *args, **options):
        return await RelayedWatches(self.inner, lambda: lambda update: [as_value(update)]).watch(*args, **options)


class KvMarkersAsValues(KvMisbehaviour):
    bucket_class = MarkersAsValuesBucket


class KeysUnfilteredBucket(WrappedStore):
    async def keys(self, filters: list[str] | None = None) -> list[str]:
        return await self.inner.keys()


class KvKeysUnfiltered(KvMisbehaviour):
    bucket_class = KeysUnfilteredBucket


class KvBucketsMisreport(KvMisbehaviour):
    async def kv_delete_bucket(self, bucket: str) -> None:
        """Nothing is deleted."""

    async def kv_bucket_names(self) -> list[str]:
        return [f"KV_{name}" for name in await self.inner.kv_bucket_names()]


class MetaIgnoredBucket(WrappedStore):
    async def watch(self, *args, meta_only: bool = False, **options):
        return await self.inner.watch(*args, **options)


class KvWatchMetaIgnored(KvMisbehaviour):
    bucket_class = MetaIgnoredBucket


KV_WRAPPERS = {
    "kv-ttl-ignored": KvTtlIgnored,
    "kv-markers-as-values": KvMarkersAsValues,
    "kv-keys-unfiltered": KvKeysUnfiltered,
    "kv-buckets-misreport": KvBucketsMisreport,
    "kv-watch-meta-ignored": KvWatchMetaIgnored,
}
