"""Progress of a conformance run through pytest's terminal reporter: checks done of collected, the area running,
failures so far.

On a terminal it is one line, rewritten as each check starts and ends. Otherwise (a log file, `jetcheck run`'s step
log, CI) it is one plain line per finished area, so a log's last line says how far the run is.
"""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from jetcheck.records import STATUSES, CheckResult

PREFIX = "jetcheck: "
FAILING = ("fail", "error")


class Progress:
    def __init__(self, reporter: pytest.TerminalReporter, total: int) -> None:
        self.reporter = reporter
        self.total = total
        self.live = bool(reporter.isatty())
        self.by_area: dict[str, Counter] = {}
        self.failing = 0
        self.done = 0

    def start(self, area: str, rule_id: str) -> None:
        if self.live:
            self._rewrite(f"[{self.done}/{self.total}] {area}: {rule_id} ...; {self._failing()}")

    def finish(self, result: CheckResult, next_area: str | None) -> None:
        """Count `result`; `next_area` is the area of the next check (None after the last)."""
        self.done += 1
        self.by_area.setdefault(result.area, Counter())[result.status] += 1
        self.failing += result.status in FAILING
        if self.live:
            self._rewrite(f"[{self.done}/{self.total}] {result.area}: {result.id} {result.status}; {self._failing()}")
        elif next_area != result.area:
            counts = self.by_area[result.area]
            shown = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
            line = f"{PREFIX}[{self.done}/{self.total}] {result.area} done: {shown}; {self._failing()}"
            self.reporter.write_line(line)

    def _failing(self) -> str:
        return f"{self.failing} failing so far"

    def _rewrite(self, line: str) -> None:
        width = shutil.get_terminal_size().columns - 1
        self.reporter.rewrite((PREFIX + line)[:width], erase=True)
        self.reporter.flush()
