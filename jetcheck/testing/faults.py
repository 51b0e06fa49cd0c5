"""Faults for the suite's own tests of the fault fixtures (the product's checks call restart_server itself)."""

from __future__ import annotations

from jetcheck.fixtures.faults import restart_server
from jetcheck.fixtures.target import Target


async def kill_server(target: Target) -> float:
    """kill -9 and start again (same port and store): a crash, with no shutdown and no flush."""
    return await restart_server(target, graceful=False)
