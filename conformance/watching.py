"""Reading a client's watcher (KV, object store) in checks: until the end-of-initial-data signal or a count. A watch
that stalls fails the check only while the client still answers (conformance.silence)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from jetcheck.conformance.clients.base import ClientSession, Watch
from jetcheck.conformance.silence import answering

WATCH_TIMEOUT_S = 1.0


async def watched(watch: Watch, show: Callable[[Any], str], count: int | None = None, expected: str = "") -> list:
    """Updates up to and including the end-of-initial-data None (or `count` of them); a missing one fails the check
    while the watch's session still answers. `show` renders an update for the failure message; `expected` begins it
    (what the documentation says, then whose watch it is)."""
    seen: list = []
    while True:
        try:
            update = await watch.next(WATCH_TIMEOUT_S)
        except TimeoutError:
            break  # judged below, outside the handler: the timeout's own traceback says nothing more
        seen.append(update)
        if (count is None and update is None) or (count is not None and len(seen) == count):
            return seen
    await answering(watch.session)
    shown = [show(u) for u in seen]
    pytest.fail(f"{expected or 'watch'} stalled after {shown}: nothing more within {WATCH_TIMEOUT_S}s")


async def within(session: ClientSession, awaitable: Awaitable, what: str):
    """`awaitable`'s result; not finishing within the watch timeout fails the check (it waits for end-of-data) while
    `session` still answers."""
    try:
        return await asyncio.wait_for(awaitable, WATCH_TIMEOUT_S)
    except TimeoutError:
        pass  # judged below, outside the handler
    await answering(session)
    pytest.fail(f"{what} did not finish within {WATCH_TIMEOUT_S}s (no end-of-initial-data signal?)")
