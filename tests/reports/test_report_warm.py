"""The session `jetcheck run` warms up while its steps work (jetcheck.reports.warm): its reports, what it leaves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from jetcheck.reports.build import build_report

# Run in a process of its own: this one has the tests' shared session, and a warm session is only made where none is.
WARM_REPORT = """
import json, os, sys
from pathlib import Path
import psutil
from jetcheck.reports.build import build_report
from jetcheck.reports.warm import WarmSession, warms

run, out, log = sys.argv[1:4]
assert warms(None)
warm = WarmSession(None, Path(log))
session = warm.take()
jvms = [p for p in psutil.Process().children() if p.name() == "java"]
facts = {
    "error": repr(warm.error),
    "jvms": [p.pid for p in jvms],
    "jvm_nice": [p.nice() for p in jvms],
    "own_nice": os.getpriority(os.PRIO_PROCESS, 0),
    "warm_up_folders": [p.name for p in Path(os.environ["TMPDIR"]).iterdir() if p.name.startswith("jetcheck-warm-up")],
}
build_report([run], out=Path(out), spark=session)
warm.close()
print(json.dumps(facts))
"""
GENERATED = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@pytest.fixture(scope="module")
def warm_run(run_folder: Path, tmp_path_factory) -> tuple[dict, Path, Path]:
    """The facts WARM_REPORT printed, its report folder and its (emptied) temp folder."""
    base = tmp_path_factory.mktemp("warm")
    out, temp = base / "report", base / "tmp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", WARM_REPORT, str(run_folder), str(out), str(base / "spark.log")],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    psutil.wait_procs([psutil.Process(pid) for pid in facts["jvms"] if psutil.pid_exists(pid)], timeout=10)
    return facts, out, temp


def test_a_report_on_the_warmed_up_session_says_what_a_cold_one_says(spark, run_folder, warm_run, tmp_path):
    """The warm-up leaves nothing behind in the session: the run's report on it equals one on a fresh session."""
    facts, warm_out, _temp = warm_run
    assert facts["error"] == "None"
    cold = build_report([str(run_folder)], out=tmp_path / "cold", spark=spark)
    assert GENERATED.sub("", (warm_out / "summary.md").read_text()) == GENERATED.sub("", cold.index.with_name(
        "summary.md").read_text())  # fmt: skip
    tables = sorted(path.relative_to(tmp_path / "cold") for path in (tmp_path / "cold").rglob("*.csv"))
    assert tables, "the report writes its tables as CSV"
    for table in tables:
        assert (warm_out / table).read_text() == (tmp_path / "cold" / table).read_text(), table


def test_the_warm_up_runs_at_the_lowest_priority_and_leaves_nothing_running_or_on_disk(warm_run):
    """Its JVM runs at nice 19 (it takes only CPU the run's steps leave idle) while the process that started it
    keeps its own priority; once closed, the JVM is gone and the warm-up's temp folder deleted."""
    facts, _out, temp = warm_run
    assert len(facts["jvms"]) == 1, facts
    assert facts["jvm_nice"] == [19]
    assert facts["own_nice"] == os.getpriority(os.PRIO_PROCESS, 0)
    assert len(facts["warm_up_folders"]) == 1, "the warm-up writes its synthetic log into a temp folder"
    assert not any(psutil.pid_exists(pid) for pid in facts["jvms"])
    assert sorted(path.name for path in temp.iterdir()) == []


CUT_OFF_CALLS = """
import logging, sys
from pathlib import Path
import py4j.java_gateway
from jetcheck.reports import spark

spark.stop_starting_jvms(Path(sys.argv[1]))  # no JVM here: it only sets where py4j's records go
root = logging.getLogger()
# py4j's GatewayClient.send_command on a JVM gone: logging.exception on the root logger, from its own file
root.handle(root.makeRecord("root", logging.ERROR, py4j.java_gateway.__file__, 1, "Exception while sending command.",
                            (), None))
logging.getLogger("py4j.clientserver").error("Error while receiving.")
root.error("not py4j's")
"""


def test_what_py4j_says_of_calls_a_stopped_jvm_cut_off_goes_to_the_spark_log(tmp_path):
    """Once a JVM is stopped on purpose (an interrupted run, a warm-up closed early), py4j's records of the calls it
    cut off go to the Spark log, not after "jetcheck: interrupted" on the terminal; other records still print."""
    log = tmp_path / "spark.log"
    proc = subprocess.run([sys.executable, "-c", CUT_OFF_CALLS, str(log)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "not py4j's"
    assert log.read_text().splitlines() == ["Exception while sending command.", "Error while receiving."]


# Closed while pyspark starts the JVM, a delay after its launch made its temp directory (the JVM writes its address
# there; pyspark deletes it once the launch has seen its JVM exit).
CLOSE_WHILE_STARTING = """
import json, os, sys, time
from pathlib import Path
import psutil
from jetcheck.reports.warm import WarmSession

temp, log, delay = Path(os.environ["TMPDIR"]), Path(sys.argv[1]), float(sys.argv[2])
warm = WarmSession(None, log)
while not any(p.name.startswith("tmp") for p in temp.iterdir()):
    assert warm._thread.is_alive(), warm.error
    time.sleep(0.001)
time.sleep(delay)
warm.close()
running = [p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
print(json.dumps({"warm_up_running": warm._thread.is_alive(), "processes": running,
                  "left": sorted(p.name for p in temp.iterdir())}))
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.5])
def test_a_warm_up_closed_while_its_jvm_starts_ends_with_close_and_leaves_nothing(tmp_path, delay):
    """close() while pyspark is still starting the warm-up's JVM stops it and returns once the warm-up has ended:
    no process of it runs on, and neither pyspark's temp directory nor the warm-up's folder is left."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    closed = subprocess.run(
        [sys.executable, "-c", CLOSE_WHILE_STARTING, str(tmp_path / "spark.log"), str(delay)],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        timeout=120,
    )
    assert closed.returncode == 0, closed.stderr
    assert json.loads(closed.stdout.strip().splitlines()[-1]) == {"warm_up_running": False, "processes": [], "left": []}
