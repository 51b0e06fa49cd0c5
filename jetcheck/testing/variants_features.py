"""nats-py's variants for the server-feature ops (conformance/clients/features.py), the driver modes of the same
names (drivers/PROTOCOL.md "Server features"), each wrapping the session on the application's side:
- `ttl-dropped`: a publish with a per-message TTL is sent without it.
- `resume-ignored`: a resume of a paused consumer asks the server nothing and says it is resumed.
- `pin-forgotten`: every priority-group pull as from a fresh consumer handle (nats-py has no group pulls: its
  adapter's Unsupported passes unchanged).
- `min-pending-dropped`: every priority-group pull without its min_pending (nats-py: unchanged, as above).
"""

from __future__ import annotations

from jetcheck.conformance.clients.features import PauseState

from .wrapping import WrappedSession


class TtlDropped(WrappedSession):
    async def publish_ttl(self, subject: str, payload: bytes, *, ttl_s: float) -> int:
        """A plain publish through the same client: no TTL reaches the server."""
        return (await self.inner.js.publish(subject, payload)).seq


class ResumeIgnored(WrappedSession):
    async def resume_consumer(self, stream: str, consumer: str) -> PauseState:
        return PauseState(False)


class PinForgotten(WrappedSession):
    """Unchanged: nats-py pulls no priority group, so there is no pin id to forget."""


class MinPendingDropped(WrappedSession):
    """Unchanged: nats-py pulls no priority group, so there is no min_pending to drop."""


FEATURE_WRAPPERS = {
    "ttl-dropped": TtlDropped,
    "resume-ignored": ResumeIgnored,
    "pin-forgotten": PinForgotten,
    "min-pending-dropped": MinPendingDropped,
}
