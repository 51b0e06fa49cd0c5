"""Open-loop pacing: operation i is intended at t0 + i / rate, whether or not earlier operations have finished.

Latency measured from the intended time (response time) includes any delay in sending, so a stalled client or
server cannot hide behind a slower send rate (coordinated omission). The caller decides what to do when it is
behind: send late (the send delay is recorded) or, when too much is in flight, count an overflow.
"""

from __future__ import annotations

import asyncio

from .clock import time_ns

NS = 1_000_000_000
MAX_DUE_PER_WAKE = 10_000  # a long stall is worked off in slices, so the loop keeps turning


class Schedule:
    """Intended send times at a fixed rate from the moment the schedule is created."""

    def __init__(self, rate_per_s: float, start_ns: int | None = None) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate must be positive")
        self.interval_ns = NS / rate_per_s
        self.start_ns = time_ns() if start_ns is None else start_ns
        self.next_index = 0

    def intended_ns(self, index: int) -> int:
        return self.start_ns + int(index * self.interval_ns)

    def take_due(self, now_ns: int) -> range:
        """The indices of operations whose intended time has come and that were not taken yet."""
        last_due = int((now_ns - self.start_ns) / self.interval_ns)
        end = min(last_due + 1, self.next_index + MAX_DUE_PER_WAKE)
        due = range(self.next_index, max(self.next_index, end))
        self.next_index = due.stop
        return due

    async def sleep_until_next(self) -> None:
        delay = (self.intended_ns(self.next_index) - time_ns()) / NS
        # sleep(0) still yields, so other tasks run even when the schedule is behind
        await asyncio.sleep(delay if delay > 0 else 0)
