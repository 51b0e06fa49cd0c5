"""Ctrl-C or SIGTERM of a jetcheck command stops every process it started within 5 s, removes what it created
(streams on the target, a managed server's store), leaves nothing in the temp directory and exits 130."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from jetcheck.fixtures.cleanup import stream_names
from jetcheck.fixtures.target import Target
from jetcheck.records import RESULTS_FILE
from jetcheck.testing.synthetic import LoadSpec, sample_results, write_certify_run, write_load_run

from .conftest import SERVER_VERSION
from .durability.test_packet_loss import MISSING, namespace_made, namespaces
from .durability.test_power_loss import MISSING as POWER_LOSS_MISSING
from .hygiene import still_running

STOP_BUDGET_S = 5.0
READY_TIMEOUT_S = 180.0


@dataclass
class Case:
    argv: list[str]
    ready: Callable[[], bool]  # true once the command is doing its real work (a check recorded, Locust loading)
    url_target: bool


def has_a_line(path: Path) -> Callable[[], bool]:
    return lambda: path.exists() and path.read_text().strip() != ""


def mentions(path: Path, *texts: str) -> Callable[[], bool]:
    return lambda: path.exists() and any(text in path.read_text(errors="replace") for text in texts)


def case_for(command: str, tmp_path: Path, url: str) -> Case:
    """Each command run on a selection that takes far longer than the test waits, so the signal lands mid-run."""
    out = tmp_path / "out"
    if command == "certify":
        prefix = "jcint" + secrets.token_hex(3)
        argv = ["certify", "--server", url, "--run-prefix", prefix, "--out", str(out)]
        return Case(argv, has_a_line(out / RESULTS_FILE), True)
    if command == "run":  # two levels of processes below the command: its certify step and that step's pytest
        return Case(["run", "--server", url, "--out", str(out)], has_a_line(out / "certify" / RESULTS_FILE), True)
    if command in ("load", "load-local"):  # mixed with two users: a Locust master and two worker processes
        server = url if command == "load" else "local"  # local: the load's own nats-server and its store
        argv = ["load", "--server", server, "--scenario", "mixed", "--users", "2", "--consumers", "1", "--rate",
                "200", "--duration", "300s", "--out", str(out)]  # fmt: skip
        # Locust says one or the other once every user runs
        return Case(argv, mentions(out / "locust.log", "All users spawned", "Spawning is complete"), server == url)
    if command == "matrix":  # certify of a managed server: a nats-server and its store in a temp directory
        argv = ["matrix", "--versions", SERVER_VERSION, "--out", str(out)]
        return Case(argv, has_a_line(out / SERVER_VERSION / RESULTS_FILE), False)
    if command == "durability":  # a cluster of three nodes on loopback, their stores in a temp directory
        argv = ["durability", "--duration", "300s", "--out", str(out)]
        return Case(argv, mentions(tmp_path / "stdout", "cluster up:"), False)
    if command == "durability-partitions":  # the same, its routes through relays in the command's own process
        argv = ["durability", "--duration", "300s", "--faults", "partition-minority,stall-leader", "--out", str(out)]
        return Case(argv, mentions(tmp_path / "stdout", "cluster up:"), False)
    if command == "durability-power":  # the same, each store on a FUSE layer served by a process of its own
        argv = ["durability", "--duration", "300s", "--faults", "power-cut-all", "--out", str(out)]
        return Case(argv, mentions(tmp_path / "stdout", "cluster up:"), False)
    if command == "durability-loss":  # the same, in a network namespace of its own made by a second process
        argv = ["durability", "--duration", "300s", "--faults", "lossy-leader", "--out", str(out)]
        return Case(argv, mentions(tmp_path / "stdout", "cluster up:"), False)
    raise AssertionError(command)


def streams_on(target: Target) -> set[str]:
    async def names() -> set[str]:
        nc = await target.connect()
        try:
            return set(await stream_names(nc))
        finally:
            await nc.close()

    return asyncio.run(names())


def wait_until_ready(proc: subprocess.Popen, case: Case, stdout: Path, stderr: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not case.ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            output = stdout.read_text()[-2000:] + stderr.read_text()[-2000:]
            pytest.fail(f"{case.argv[0]} never got going (exit {proc.poll()}):\n{output}")
        time.sleep(0.05)


SIGNALLED = [
    pytest.param(command, sig, id=f"{command}-{sig.name.lower()}")
    for command in ("run", "certify", "load", "matrix")
    for sig in (signal.SIGINT, signal.SIGTERM)
] + [
    pytest.param("load-local", signal.SIGTERM, id="load-local-sigterm"),
    *(pytest.param("durability", sig, id=f"durability-{sig.name.lower()}") for sig in (signal.SIGINT, signal.SIGTERM)),
    pytest.param("durability-partitions", signal.SIGINT, id="durability-partitions-sigint"),
    pytest.param("durability-power", signal.SIGINT, id="durability-power-sigint"),
    *(
        pytest.param("durability-loss", sig, id=f"durability-loss-{sig.name.lower()}")
        for sig in (signal.SIGINT, signal.SIGTERM)
    ),
]


def _command_line(process: psutil.Process) -> str:
    """The start of a process's command line; a short-lived helper may have exited already (a shell script's)."""
    try:
        return " ".join(process.cmdline()[:6])
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return f"pid {process.pid} (exited)"


@pytest.mark.parametrize(("command", "sig"), SIGNALLED)
def test_an_interrupted_command_stops_everything_it_started(tmp_path, embedded_server, command, sig):
    """The signal goes to the command's process alone (as `kill` sends it; Ctrl-C reaches only the terminal's
    foreground group, which the command's children are not in): within 5 s the command and every process below it
    are gone, it said "jetcheck: interrupted" and exited 130, its temp directory is empty and the target holds no
    stream the run created."""
    if command == "durability-loss" and MISSING:
        pytest.skip(MISSING)
    if command == "durability-power" and POWER_LOSS_MISSING:
        pytest.skip(POWER_LOSS_MISSING)
    case = case_for(command, tmp_path, embedded_server.url)
    temp = tmp_path / "tmp"
    temp.mkdir()
    before = streams_on(embedded_server)
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jetcheck.cli", *case.argv],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "TMPDIR": str(temp)},
            start_new_session=True,
        )
    descendants: list[psutil.Process] = []
    try:
        wait_until_ready(proc, case, stdout, stderr)
        descendants = psutil.Process(proc.pid).children(recursive=True)
        assert descendants, "the command runs its work in child processes"
        described = {p.pid: _command_line(p) for p in descendants}
        os.kill(proc.pid, sig)
        deadline = time.monotonic() + STOP_BUDGET_S
        try:
            proc.wait(timeout=STOP_BUDGET_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"jetcheck {command} still running {STOP_BUDGET_S:.0f} s after {sig.name}")
        _gone, alive = psutil.wait_procs(descendants, timeout=max(0.0, deadline - time.monotonic()))
        alive = [p for p in alive if still_running(p)]
        assert not alive, f"still running {STOP_BUDGET_S:.0f} s after {sig.name}: {[described[p.pid] for p in alive]}"
        errors = stderr.read_text()
        assert proc.returncode == 130, errors
        assert errors.strip().splitlines()[-1] == "jetcheck: interrupted"
        assert errors.count("jetcheck: interrupted") == 1, errors
        assert "Traceback" not in errors, errors
        assert sorted(p.name for p in temp.iterdir()) == []
        if case.url_target:
            assert streams_on(embedded_server) == before
        if command == "durability-loss":
            assert namespace_made(stdout.read_text()) not in namespaces(), "the run's network namespace is left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
        for process in descendants:  # on a failure, what the command left running
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        proc.wait()


def test_an_interrupt_while_spark_starts_leaves_no_jvm(tmp_path):
    """The report (run's last step) interrupted while pyspark is still starting its JVM: pyspark loses track of that
    JVM, which would then outlive the command for good; it is stopped within 5 s too."""
    run = tmp_path / "run"
    write_certify_run(run / "certify", sample_results())
    write_load_run(run / "load", LoadSpec(records=5000, duration_s=3))  # a load is what the report needs Spark for
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetcheck.cli", "report", "--in", str(run)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temp)},
        start_new_session=True,
    )
    jvms: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        # pyspark waits for the JVM to write its address into a temp directory of its own: the JVM is starting
        while not (jvms and any(p.is_dir() for p in temp.iterdir())):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            jvms = [p for p in psutil.Process(proc.pid).children() if p.name() == "java"]
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGINT)
        started = time.monotonic()
        _out, errors = proc.communicate(timeout=STOP_BUDGET_S)
        _gone, alive = psutil.wait_procs(jvms, timeout=max(0.0, started + STOP_BUDGET_S - time.monotonic()))
        assert not alive, f"the JVM still runs {STOP_BUDGET_S:.0f} s after SIGINT"
        assert proc.returncode == 130, errors
    finally:
        if proc.poll() is None:
            proc.kill()
        for jvm in jvms:
            with contextlib.suppress(psutil.NoSuchProcess):
                jvm.kill()
        proc.wait()
