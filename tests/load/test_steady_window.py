"""The figures `jetcheck load` prints describe the server under steady load, not the load's own start and stop."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow.compute as pc
import pytest

from .test_load_runs import NS, assert_no_lost_records, ops_table, run_load

PROBE_TICK_S = 0.005


class StallProbe:
    """Measures how long the machine keeps a ready thread off the CPU, outside the load's processes: a thread that
    asks to sleep PROBE_TICK_S and records by how much each wake-up came late. On a machine shared with other busy
    jobs a load's processes stall the same way, and those stalls are the machine's latency, not the server's or
    the tool's."""

    def __init__(self) -> None:
        self.late_ns: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            before = time.perf_counter_ns()
            self._stop.wait(PROBE_TICK_S)  # the wait is the measurement: how late does the thread get back?
            self.late_ns.append(time.perf_counter_ns() - before - int(PROBE_TICK_S * NS))

    def __enter__(self) -> StallProbe:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()

    def stalled_ns(self, longer_than_ns: int) -> int:
        """The time lost in stalls longer than `longer_than_ns`."""
        return sum(late for late in self.late_ns if late > longer_than_ns)


def test_publish_p99_is_that_of_the_steady_seconds_not_of_the_wind_down(tmp_path, embedded_server):
    """The default run's load (mixed, 2,000/s, 3 users) for 8 s: the printed publish p99 is that of the operations
    sent in the steady window, and within 25% of the median of the per-second p99s of the seconds between the
    first and the last (the issue's done criterion).

    Before the fix, stopping Locust froze each process's event loop for 150-300 ms while sends kept falling due,
    and those late sends made the whole-run p99 several times any steady second's."""
    with StallProbe() as probe:
        rc, run, summary, out = run_load(
            tmp_path,
            embedded_server,
            "--scenario",
            "mixed",
            "--duration",
            "8s",
            "--users",
            "3",
            "--consumers",
            "1",
            "--rate",
            "2000",
        )
    assert rc == 0
    assert_no_lost_records(summary)
    table = ops_table(out)
    last_intended = table.group_by("process").aggregate([("intended_ns", "max")]).to_pylist()
    intended_while_stopping = {
        row["process"]: (row["intended_ns_max"] - run["stopping_ns"][str(row["process"])]) / 1e6
        for row in last_intended
        if row["intended_ns_max"] >= run["stopping_ns"][str(row["process"])]
    }
    assert not intended_while_stopping, f"ms by which processes kept intending operations: {intended_while_stopping}"
    publish = table.filter(pc.and_(pc.equal(table["op"], "publish"), table["ok"])).to_pandas()
    first = table["intended_ns"].to_numpy().min()
    second = (publish["intended_ns"] - first) // NS
    response = publish["end_ns"] - publish["intended_ns"]
    p99_by_second = response.groupby(second).quantile(0.99, interpolation="nearest")
    steady = p99_by_second.iloc[1:-1]  # the first second starts the users, the last one is cut by the stop
    assert len(steady) >= 3, p99_by_second
    median_us = float(np.median(steady)) / 1000
    printed_us = summary["ops"]["publish"]["response_us"]["p99"]
    window = summary["window"]
    in_window = publish[(publish["start_ns"] >= window["start_ns"]) & (publish["start_ns"] < window["end_ns"])]
    exact = pc.quantile((in_window["end_ns"] - in_window["intended_ns"]).to_numpy(), q=0.99, interpolation="nearest")[
        0
    ].as_py()
    assert printed_us == exact / 1000, "the printed p99 is not that of the operations sent in the steady window"
    per_second_ms = ", ".join(f"{v / 1e6:.1f}" for v in p99_by_second)
    figures = f"printed publish p99 {printed_us / 1000:.1f} ms, median per-second p99 {median_us / 1000:.1f} ms "
    figures += f"(per second: {per_second_ms} ms)"
    # Stalls of the machine longer than the steady p99, adding up to more than the 1% of the run a p99 leaves out,
    # set the p99 themselves whatever the load does: the relation cannot be measured then.
    lost_ns = probe.stalled_ns(int(median_us * 1000))
    run_ns = int(publish["intended_ns"].max() - first)
    if lost_ns > 0.01 * run_ns:
        pytest.skip(f"the machine was too busy to measure: threads outside the load stalled {lost_ns / 1e6:.0f} ms; "
                    + figures)  # fmt: skip
    assert abs(printed_us - median_us) <= 0.25 * median_us, figures
