"""nats-py's variant for the ADR-19 API-prefix rule, the driver mode of the same name (drivers/PROTOCOL.md connect):
- `kv-prefix-ignored`: a KV put is published to `$KV.<bucket>.<key>` through the session's JetStream context, whatever
  its API prefix (nats-py 2.16.0's KeyValue does so itself; the variant keeps doing it once nats-py follows ADR-19).
"""

from __future__ import annotations

from jetcheck.conformance.clients.natspy_failures import natspy_failures

from .variants_kv import KvMisbehaviour
from .wrapping import WrappedStore


class PrefixIgnoredBucket(WrappedStore):
    async def put(self, key: str, value: bytes) -> int:
        with natspy_failures("put"):
            ack = await self.inner.session.js.publish(f"$KV.{self.inner.bucket}.{key}", value)
        return ack.seq


class KvPrefixIgnored(KvMisbehaviour):
    bucket_class = PrefixIgnoredBucket


PREFIX_WRAPPERS = {"kv-prefix-ignored": KvPrefixIgnored}
