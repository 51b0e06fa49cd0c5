"""The steady window of a load run: the one definition of which operations its rates and percentiles cover.

A run starts its users one after another and stops them one after another; while that happens the load is not the
one asked for (fewer senders, a process busy starting or stopping). The steady window is the time in which every
user was running, less a warm-up at its start, on the clock of the operations' actual sends (start_ns):

- it starts WARMUP_S after the last user's first send (at most a quarter of the time all users ran, so that short
  runs keep most of it), and
- it ends at the first user's last send: from then on users are stopping.

The figures cover the operations *sent* in the window (`start_ns` in [start, end)): percentiles of their response
times, which still count from the intended send so a late send shows its delay, and the rate of the successful ones
per second of the window. Selecting by send rather than intended time keeps a run whose client fell behind honest:
what it sent late is measured, and its rate is what it achieved, not the schedule's. Operations sent outside the
window stay in the log and in the over-time charts, counted as warm-up and wind-down. When no moment had every user
running (a consumer that finished before the last user started), there is no steady window and the figures cover
the whole run, from the first send to the last.

The console summary (pyarrow) and the report (Spark) each reduce the log to per-user spans and counts with their own
engine, and both take the window and its description from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

NS = 1_000_000_000
WARMUP_S = 1.0
MAX_WARMUP_SHARE = 0.25


@dataclass(frozen=True)
class SteadyWindow:
    """The send times [start_ns, end_ns) of the operations a run's figures cover."""

    start_ns: int
    end_ns: int
    warmup_s: float
    users: int
    whole_run: bool  # no steady window existed: the figures cover every operation

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / NS

    def contains(self, start_ns):
        """Whether operations sent at `start_ns` (a numpy array or a Spark column) are in the window."""
        return (start_ns >= self.start_ns) & (start_ns < self.end_ns)

    def describe(self, warmup_ops: int, steady_ops: int, winddown_ops: int) -> dict[str, Any]:
        """What summary.json and the report's LoadTables carry as `window`; `definition` is the sentence to show."""
        if self.whole_run:
            definition = (
                f"No steady window: the {self.users} users never all ran at once, so rates and percentiles cover "
                f"every operation of the run, the {self.seconds:.1f} s from the first send to the last "
                "(ops/s = successful operations / that time)."
            )
        else:
            span = (
                "the user started until it stopped"
                if self.users == 1
                else f"the last of the {self.users} users started until the first one stopped"
            )
            definition = (
                f"Rates and percentiles cover the steady window: the {self.seconds:.1f} s from {self.warmup_s:.1f} s "
                f"after {span}, i.e. the operations sent in it (response times count from the intended send), "
                f"ops/s = successful ones / {self.seconds:.1f} s. "
                f"The {warmup_ops:,} operations sent before it (warm-up) and the {winddown_ops:,} after it (wind-down) "
                "are in the logs and the over-time charts, not in these figures."
            )
        return {
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "seconds": self.seconds,
            "warmup_s": self.warmup_s,
            "users": self.users,
            "whole_run": self.whole_run,
            "warmup_ops": warmup_ops,
            "steady_ops": steady_ops,
            "winddown_ops": winddown_ops,
            "definition": definition,
        }


def steady_window(user_spans: Iterable[tuple[int, int]]) -> SteadyWindow | None:
    """The window from each user's (first, last) actual send time (start_ns); None when nothing was logged."""
    spans = list(user_spans)
    if not spans:
        return None
    all_running = max(first for first, _last in spans)
    first_stopped = min(last for _first, last in spans)
    if first_stopped <= all_running:
        first = min(first for first, _last in spans)
        last = max(last for _first, last in spans)
        return SteadyWindow(first, last + 1, 0.0, len(spans), whole_run=True)
    warmup_ns = min(int(WARMUP_S * NS), int((first_stopped - all_running) * MAX_WARMUP_SHARE))
    return SteadyWindow(all_running + warmup_ns, first_stopped, warmup_ns / NS, len(spans), whole_run=False)
