"""The wall clock a load process stamps its operations with, and how a fleet's clocks are put on one axis.

Every time in an op log (intended, sent, acked) is this process's `time_ns`. On one host all processes share the
clock. Across hosts each worker's clock is off the master's by some offset: the master measures it at the start and
the end of a test NTP-style over a Locust message (`ClockReading`: the master's send and receive times around the
worker's reading), keeps the round with the shortest round trip (`best_reading`), and moves the worker's times onto
its own axis by the offset interpolated between the two measurements (`MasterAxis`). The offset of one reading is
exact up to half its round trip, whatever the asymmetry of the two legs: that is the error bound the run reports.

`OFFSET_VARIABLE` shifts this process's clock by a number of nanoseconds, for tests only: it stands in for a host
whose clock is off, so a test can show the offset measured and corrected. Unset (always, outside tests) the clock
is `time.time_ns` itself, with no wrapper on the hot path.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

OFFSET_VARIABLE = "JETCHECK_TEST_CLOCK_OFFSET_NS"
_SHIFT_NS = int(os.environ.get(OFFSET_VARIABLE) or 0)

if _SHIFT_NS:
    _system_time_ns = time.time_ns

    def time_ns() -> int:
        return _system_time_ns() + _SHIFT_NS

else:
    time_ns = time.time_ns


@dataclass(frozen=True)
class ClockReading:
    """One round trip: the master sent at `sent_ns` and received at `received_ns` (its clock); the worker read its
    clock at `worker_ns` in between."""

    sent_ns: int
    worker_ns: int
    received_ns: int

    @property
    def round_trip_ns(self) -> int:
        return self.received_ns - self.sent_ns

    @property
    def offset_ns(self) -> int:
        """The worker's clock minus the master's, taken at the midpoint of the round trip."""
        return self.worker_ns - (self.sent_ns + self.received_ns) // 2

    @property
    def bound_ns(self) -> int:
        """How far `offset_ns` can be from the true offset: half the round trip."""
        return (self.round_trip_ns + 1) // 2

    def as_dict(self) -> dict[str, int]:
        return {
            "offset_ns": self.offset_ns,
            "bound_ns": self.bound_ns,
            "round_trip_ns": self.round_trip_ns,
            "master_ns": (self.sent_ns + self.received_ns) // 2,
            "worker_ns": self.worker_ns,
        }


def best_reading(readings: list[ClockReading]) -> ClockReading:
    """The reading with the shortest round trip: the tightest bound (queueing only ever widens one)."""
    if not readings:
        raise ValueError("no clock readings")
    return min(readings, key=lambda reading: reading.round_trip_ns)


@dataclass(frozen=True)
class MasterAxis:
    """Moves one worker's times onto the master's clock: the offset measured at the start and at the end,
    interpolated linearly in between on the worker's clock (a clock that drifts during the run drifts linearly), and
    held constant outside."""

    start: ClockReading
    end: ClockReading | None = None

    @property
    def bound_ns(self) -> int:
        return max(self.start.bound_ns, self.end.bound_ns if self.end else 0)

    def shift(self, worker_ns):
        """The master-clock times of worker times `worker_ns` (an int or a numpy int64 array)."""
        import numpy as np

        start_offset = self.start.offset_ns
        if self.end is None or self.end.worker_ns == self.start.worker_ns:
            return worker_ns - start_offset
        span = self.end.worker_ns - self.start.worker_ns
        position = np.clip((np.asarray(worker_ns) - self.start.worker_ns) / span, 0.0, 1.0)
        offset = start_offset + np.rint(position * (self.end.offset_ns - start_offset)).astype(np.int64)
        return worker_ns - offset
