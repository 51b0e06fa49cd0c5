"""A report session started early: `jetcheck run` starts Spark and warms it up while certify and load work.

On a quiet 2-core machine the report of a default run's folder took 15 s from cold: 4 s for the JVM to start, 8-9 s
for the first aggregation, whose same query run again takes 3-4 s (the rest is class loading and compiling), and
the charts. Started during certify, the JVM is ready and compiled when the run's logs are, and the report step
is left with the work of the report itself.

The warm-up runs at the lowest CPU priority (its thread's, which the JVM and its workers inherit), so it takes
only time certify leaves idle, and it reports on a small synthetic load log in a temp folder of its own. The report
step takes it back to the run's own priority (WarmSession.take).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from jetcheck.reports import spark

NICE = 19
# Enough rows for every query of a load report to compile with the same plan a real log gets.
RECORDS = 3000
DURATION_S = 3.0
# close() gives the warm-up this long to end once its JVM is stopped (pyspark's launch looks every 0.1 s)
CLOSE_S = 3.0
CLOSE_POLL_S = 0.05


def warms(master: str | None) -> bool:
    """Whether a run with this --master gets a warm session: a local one, when this process has no session yet (a
    cluster's executors could not read the warm-up's temp folder; a session already active is used as it is) and
    may give the warm-up its priority back when the report takes it (WarmSession.take; not so for a user other
    than root, as a rule: the report then starts its own session, as `jetcheck report` does)."""
    from pyspark.sql import SparkSession

    local = master is None or master.startswith("local")
    return local and SparkSession.getActiveSession() is None and _priority_comes_back()


@functools.cache
def _priority_comes_back() -> bool:
    """Whether a thread of this process, its priority lowered to NICE, may raise it to this thread's again."""
    if sys.platform != "linux":
        return True  # nothing is lowered there
    own = os.getpriority(os.PRIO_PROCESS, 0)
    outcome: list[bool] = []

    def lower_and_raise() -> None:
        thread = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, thread, NICE)
            os.setpriority(os.PRIO_PROCESS, thread, own)
            outcome.append(True)
        except PermissionError:
            outcome.append(False)

    probe = threading.Thread(target=lower_and_raise, name="jetcheck-priority-probe")
    probe.start()
    probe.join()
    return outcome == [True]


class WarmSession:
    """Starts a SparkSession on a background thread and runs one small report on it; take() hands it over."""

    def __init__(self, master: str | None = None, log: Path | None = None):
        self._master, self._log = master, log  # the JVM's output: spark.spark_log_path() unless given
        self._folder = Path(tempfile.mkdtemp(prefix="jetcheck-warm-up-"))
        self._session = None
        self.error: BaseException | None = None  # what stopped the warm-up, if anything did
        self._closing = threading.Event()
        self._priority = os.getpriority(os.PRIO_PROCESS, 0)  # this thread's on Linux: what take() gives back
        self._priority_lock = threading.Lock()
        self._needed = False  # take() was called: the warm-up is the report's own work now
        self._thread = threading.Thread(target=self._warm, name="jetcheck-report-warm-up", daemon=True)
        self._thread.start()

    def _warm(self) -> None:
        from jetcheck.reports.build import build_report
        from jetcheck.reports.synthetic_load import LoadSpec, write_load_run

        with self._priority_lock:
            if not self._needed:
                _lower_this_threads_priority()
        try:
            if self._closing.is_set():
                return
            # the size of a default run's log: the same JVM options as its report would choose
            self._session = spark.build_session(self._master, log_bytes=0, log=self._log)
            load = write_load_run(self._folder / "load", LoadSpec(records=RECORDS, duration_s=DURATION_S))
            if not self._closing.is_set():
                build_report([str(load)], out=self._folder / "report", spark=self._session)
        except Exception as exc:  # any failure means a cold report, which says what is wrong
            self.error = exc
            if self._log is not None:
                with contextlib.suppress(OSError), open(self._log, "a", encoding="utf-8") as log:
                    log.write(f"jetcheck: the report's warm-up failed, the report starts Spark itself: {exc!r}\n")

    def take(self):
        """The warmed-up session once the warm-up ends, or None when it failed (the report then starts its own).

        What is left of the warm-up, and the JVM the report will work in, are the report's own now, so they go back to
        this process's priority: at the lowest one, other work on the machine could hold them, and the report with
        them, for as long as that work lasts (3 busy loops on 2 cores: take() still waited after 180 s). Should the
        system refuse (warms() asks beforehand), the warm-up and its JVM are stopped and the report starts its own."""
        if not self._back_to_own_priority():
            self.close()
            spark.stop_starting_jvms(self._log)
            return None
        self._thread.join()
        if self.error is not None:
            self.close()
            return None
        return self._session

    def _back_to_own_priority(self) -> bool:
        """The warm-up's thread, its JVM and what the JVM started back at this process's priority; False when the
        system refuses."""
        with self._priority_lock:
            self._needed = True  # a warm-up thread that has not lowered its priority yet will not
        if sys.platform != "linux":
            return True  # nothing was lowered
        try:
            for _ in range(2):  # the second pass: a thread the JVM started while the first walked it
                # the warm-up thread's id only while it runs: once it has ended, the id may be another thread's
                warm_thread = [self._thread.native_id] if self._thread.is_alive() else []
                tasks = warm_thread + _tasks_below(spark.launched_jvms())
                for task in tasks:
                    with contextlib.suppress(ProcessLookupError):  # a thread that has ended meanwhile
                        os.setpriority(os.PRIO_PROCESS, task, self._priority)
        except PermissionError:
            return False
        return True

    def close(self) -> None:
        """Stop the session (and a JVM still starting), let the warm-up end and delete its folder; safe to call
        twice. The folder goes last: a warm-up still working would write into it again, and pyspark deletes its own
        temp directory only once the launch it waits in has seen its JVM exit."""
        self._closing.set()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                session.stop()
        deadline = time.monotonic() + CLOSE_S
        while self._thread.is_alive() and time.monotonic() < deadline:
            # each round: the JVM that is starting, or busy with the warm-up, or was not yet launched last round
            spark.stop_starting_jvms(self._log)
            self._thread.join(CLOSE_POLL_S)
        shutil.rmtree(self._folder, ignore_errors=True)


def _lower_this_threads_priority() -> None:
    # Linux keeps a nice value per thread, and a process started from this thread inherits it; elsewhere the call
    # would lower the whole process's priority, so the warm-up there simply runs at normal priority.
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)


def _tasks_below(pids: list[int]) -> list[int]:
    """Every thread of these processes and of the processes below them (Linux keeps a priority per thread)."""
    parents = spark.parents()
    tree, index = list(pids), 0
    while index < len(tree):
        tree += [pid for pid, parent in parents.items() if parent == tree[index]]
        index += 1
    tasks = []
    for pid in tree:
        with contextlib.suppress(OSError):  # gone meanwhile
            tasks += [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]
    return tasks
