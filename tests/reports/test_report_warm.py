"""The session `jetcheck run` warms up while its steps work (jetcheck.reports.warm): its reports, what it leaves."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import psutil
import pytest

from jetcheck.fixtures import children
from jetcheck.reports.build import build_report

# What the scripts below share: each runs in a process of its own (this one has the tests' shared session, and a warm
# session is only made where none is), its TMPDIR a folder of the test's.
PRELUDE = """
import errno, json, os, sys, time
from pathlib import Path
import psutil
from jetcheck.reports.warm import WarmSession, warms

def running(processes):
    return [p for p in processes if p.status() != psutil.STATUS_ZOMBIE]

def the_jvm():
    while not (jvms := running(p for p in psutil.Process().children() if p.name() == "java")):
        time.sleep(0.02)
    return jvms[0]

def priorities(process):
    found = set()
    for thread in process.threads():
        try:
            found.add(os.getpriority(os.PRIO_PROCESS, thread.id))
        except ProcessLookupError:  # ended meanwhile
            pass
    return sorted(found)

def what_is_left(warm):
    below = running(psutil.Process().children(recursive=True))
    return {"warm_up_running": warm._thread.is_alive(), "processes": [p.pid for p in below],
            "left": sorted(p.name for p in Path(os.environ["TMPDIR"]).iterdir())}
"""
WARM_REPORT = (
    PRELUDE
    + """
from jetcheck.reports.build import build_report

log, run, out = sys.argv[1:4]
assert warms(None)
warm = WarmSession(None, Path(log))
jvm = the_jvm()
warming = priorities(jvm)
session = warm.take()
facts = {
    "error": repr(warm.error),
    "jvms": [jvm.pid],
    "jvm_nice_warming": warming,
    "jvm_nice_taken": priorities(jvm),
    "own_nice": os.getpriority(os.PRIO_PROCESS, 0),
    "warm_up_folders": [p.name for p in Path(os.environ["TMPDIR"]).iterdir() if p.name.startswith("jetcheck-warm-up")],
}
build_report([run], out=Path(out), spark=session)
warm.close()
print(json.dumps(facts))
"""
)
GENERATED = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def facts_printed(script: str, folder: Path, *args: str, timeout_s: float = 120) -> dict:
    """What `script` printed last, its arguments the Spark log's path in `folder` and `args`, its TMPDIR an empty
    folder there."""
    temp = folder / "tmp"
    temp.mkdir()
    argv = [sys.executable, "-c", script, str(folder / "spark.log"), *args]
    # in a session of its own, stopped with its JVMs if it times out
    with children.running(argv, stdout=PIPE, stderr=PIPE, text=True, env={**os.environ, "TMPDIR": str(temp)}) as done:
        out, err = done.communicate(timeout=timeout_s)
    assert done.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def warm_run(run_folder: Path, tmp_path_factory) -> tuple[dict, Path, Path]:
    """The facts WARM_REPORT printed, its report folder and its (emptied) temp folder."""
    base = tmp_path_factory.mktemp("warm")
    facts = facts_printed(WARM_REPORT, base, str(run_folder), str(base / "report"), timeout_s=240)
    psutil.wait_procs([psutil.Process(pid) for pid in facts["jvms"] if psutil.pid_exists(pid)], timeout=10)
    return facts, base / "report", base / "tmp"


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


def test_the_warm_up_runs_at_the_lowest_priority_until_taken_and_leaves_nothing_running_or_on_disk(warm_run):
    """Its JVM runs at nice 19 (it takes only CPU the run's steps leave idle) while the process that started it
    keeps its own priority; once the report takes it, every thread of the JVM is back at that priority; once
    closed, the JVM is gone and the warm-up's temp folder deleted."""
    facts, _out, temp = warm_run
    assert facts["own_nice"] == os.getpriority(os.PRIO_PROCESS, 0)
    assert facts["jvm_nice_warming"] == [19]
    assert facts["jvm_nice_taken"] == [facts["own_nice"]]
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
CLOSE_WHILE_STARTING = (
    PRELUDE
    + """
temp, log, delay = Path(os.environ["TMPDIR"]), Path(sys.argv[1]), float(sys.argv[2])
warm = WarmSession(None, log)
while not any(p.name.startswith("tmp") for p in temp.iterdir()):
    assert warm._thread.is_alive(), warm.error
    time.sleep(0.001)
time.sleep(delay)
warm.close()
print(json.dumps(what_is_left(warm)))
"""
)
NOTHING_LEFT = {"warm_up_running": False, "processes": [], "left": []}


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.5])
def test_a_warm_up_closed_while_its_jvm_starts_ends_with_close_and_leaves_nothing(tmp_path, delay):
    """close() while pyspark is still starting the warm-up's JVM stops it and returns once the warm-up has ended:
    no process of it runs on, and neither pyspark's temp directory nor the warm-up's folder is left."""
    assert facts_printed(CLOSE_WHILE_STARTING, tmp_path, str(delay)) == NOTHING_LEFT


# As for a user who may not raise a priority again (not root): once the warm-up's JVM is up, the system refuses every
# change of priority; then the report's own session.
TAKEN_WHERE_PRIORITY_IS_REFUSED = (
    PRELUDE
    + """
from jetcheck.reports import spark

warm = WarmSession(None, Path(sys.argv[1]))
the_jvm()  # starting at nice 19: on a machine kept busy it may take minutes to be a session, which take() cuts short
allowed = os.setpriority

def refused(which, who, priority):
    raise PermissionError(errno.EACCES, "Permission denied")

os.setpriority = refused
facts = {"session": repr(warm.take()), **what_is_left(warm)}
os.setpriority = allowed
with spark.spark_session(None) as own:
    facts["own_session_counts"] = own.range(3).count()
    facts["own_session_priorities"] = priorities(the_jvm())
print(json.dumps(facts))
"""
)


def test_a_warm_up_that_cannot_get_its_priority_back_is_stopped_when_taken(tmp_path):
    """Where the system refuses to raise the warm-up's priority again, take() stops the warm-up and its JVM and
    returns None: nothing of it runs on or is left, and the report's own session works at the process's priority."""
    facts = facts_printed(TAKEN_WHERE_PRIORITY_IS_REFUSED, tmp_path)
    assert facts == {
        "session": "None",
        **NOTHING_LEFT,
        "own_session_counts": 3,
        "own_session_priorities": [os.getpriority(os.PRIO_PROCESS, 0)],
    }


WARMS = "from jetcheck.reports.warm import warms; print(warms(None))"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="drops a capability of root's")
def test_a_process_that_may_not_raise_a_priority_again_gets_no_warm_up():
    """Without the right to raise a priority (CAP_SYS_NICE, which a user other than root lacks as a rule) `jetcheck
    run` gets no warm-up at the lowest priority it could not take back: its report starts its own session."""
    as_root = subprocess.run([sys.executable, "-c", WARMS], capture_output=True, text=True, timeout=60)
    assert as_root.stdout.strip() == "True", as_root.stderr
    no_nice = ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice"]
    without = subprocess.run([*no_nice, sys.executable, "-c", WARMS], capture_output=True, text=True, timeout=60)
    assert without.stdout.strip() == "False", without.stderr
