"""`jetcheck load --master` with three `jetcheck load --worker` processes, each in a folder of its own, against one
real server: every worker's log reaches the master's run folder, on the master's clock, and a killed worker makes
the run incomplete, named, with the others' data kept.

Each test runs twice: with the workers as separate processes on this host's loopback, and (as root, with ip(8))
with each worker in a network namespace of its own that has only its own loopback. There the worker reaches the
master's port and the NATS server through fixtures.unix_bridge (a Unix socket per port in the run's folder, which
crosses namespaces as a file; no veth, no bridge, no address off 127.0.0.1), and a probe from inside shows that a
host port not bridged (the server's monitor port) is refused (docs/guides/load.md, "Across hosts")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from jetcheck.conformance.jsapi import eventually
from jetcheck.durability.packet_loss import own_namespace
from jetcheck.fixtures.process import free_port
from jetcheck.fixtures.unix_bridge import forwarder
from jetcheck.load import runfile
from jetcheck.load.clock import OFFSET_VARIABLE
from jetcheck.options import new_run_prefix

from .test_load_runs import ops_table

MS = 1_000_000
WORKERS = 3
SHIFTED_NS = 250 * MS  # the clock of worker 2 runs this far ahead
BOUND_S = 240.0


ISOLATION = pytest.mark.parametrize("isolated", [False, True], ids=["loopback", "netns"])


def _jetcheck(*args: str) -> list[str]:
    return [sys.executable, "-m", "jetcheck.cli", "load", *args]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def why_no_namespaces() -> str:
    """Why this machine cannot run the workers in namespaces of their own ("" when it can)."""
    if os.geteuid() != 0:
        return "a network namespace per worker needs root (ip netns add)"
    if shutil.which("ip") is None:
        return "a network namespace per worker needs ip(8) (Debian: iproute2)"
    return ""


def isolate(stack: contextlib.ExitStack, tmp_path: Path, target, prefix: str, master_port: int) -> list[list[str]]:
    """WORKERS namespaces, each with only its loopback up and the master's and the server's ports bridged to the
    host over Unix sockets in tmp_path/bridge; the command prefix that runs a program in each. A direct connection
    from a namespace to the server's monitor port (on the host, not bridged) must be refused."""
    if reason := why_no_namespaces():
        pytest.skip(reason)
    server_port, monitor_port = _port(target.url), _port(target.process.monitor_url)
    (tmp_path / "bridge").mkdir()
    sockets = {port: tmp_path / "bridge" / f"{port}.sock" for port in (master_port, server_port)}
    stack.enter_context(forwarder("to-tcp", sockets))  # one host side for every namespace
    prefixes = []
    for n in range(WORKERS):
        enter = stack.enter_context(own_namespace(f"{prefix}-w{n}"))  # killed and deleted at the end, whatever happens
        stack.enter_context(forwarder("to-unix", sockets, prefix=enter))
        probe = [*enter, sys.executable, "-m", "jetcheck.fixtures.unix_bridge", "probe", str(server_port)]
        answers = subprocess.run([*probe, str(monitor_port)], capture_output=True, text=True, timeout=60, check=True)
        print(f"namespace {prefix}-w{n}: {answers.stdout.strip()!r}")
        bridged, direct = answers.stdout.splitlines()
        assert bridged.startswith(f"{server_port} connected b'INFO ") and direct == f"{monitor_port} refused", answers
        prefixes.append(enter)
    return prefixes


@contextlib.contextmanager
def fleet(tmp_path: Path, target, prefix: str, duration: str, rate: int, isolated: bool = False):
    """The master and its three workers started (`isolated`: each in a network namespace of its own); yields
    (master, workers, worker folders); everything still running at the end is killed, every namespace deleted."""
    port = str(free_port())
    workers: list[subprocess.Popen] = []
    with contextlib.ExitStack() as stack:  # unwound last: log files, forwarders, namespaces
        enter = isolate(stack, tmp_path, target, prefix, int(port)) if isolated else [[]] * WORKERS
        master = subprocess.Popen(
            _jetcheck("--master", "--expect-workers", str(WORKERS), "--master-bind-port", port, "--server", target.url,
                      "--monitor", target.process.monitor_url, "--scenario", "publish-async", "--rate", str(rate),
                      "--users", str(WORKERS), "--duration", duration, "--run-prefix", prefix,
                      "--out", str(tmp_path / "master")),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            command = ""
            for line in master.stdout:  # the master prints the workers' command before it waits for them
                if "--worker" in line:
                    command = line.strip()
                    break
            assert command == f"jetcheck load --worker --master-host 127.0.0.1 --master-port {port}", command
            folders = [tmp_path / f"host{n}" for n in range(WORKERS)]
            for n, folder in enumerate(folders):
                folder.mkdir()
                env = {k: v for k, v in os.environ.items() if k != OFFSET_VARIABLE}
                if n == 2:
                    env[OFFSET_VARIABLE] = str(SHIFTED_NS)
                log = stack.enter_context(open(folder / "worker.out", "w"))
                worker = [*enter[n], *_jetcheck(*command.split()[2:]), "--out", "work"]
                workers.append(
                    subprocess.Popen(
                        worker, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
            yield master, workers, folders
        finally:
            for proc in [master, *workers]:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for stream in (master.stdout, master.stderr):
                stream.close()


def network_namespaces(pids: list[int]) -> list[str]:
    """The network namespace each process runs in (as /proc names it: net:[inode])."""
    return [os.readlink(f"/proc/{pid}/ns/net") for pid in pids]


def figures(run: dict, rows: int) -> str:
    """The run's figures, for `pytest -s`: rows logged against messages stored, and each worker's share."""
    shares = ", ".join(f"{w['worker']} ops={w['ops']} rows={w['rows_received']}" for w in run["workers"])
    return f"rows {rows} / stored {run['server']['stream']['messages']}: {shares}"


def finish(master: subprocess.Popen) -> tuple[int, str]:
    out, err = master.communicate(timeout=BOUND_S)
    return master.returncode, out + err


@ISOLATION
def test_three_workers_log_to_the_masters_folder_on_its_clock(tmp_path, embedded_server, isolated):
    """Three workers, one with its clock 250 ms ahead: the master's folder holds the three logs, their rows are the
    stream's messages, the offset is measured within its bound and removed from that worker's times."""
    with fleet(tmp_path, embedded_server, new_run_prefix(), "4s", 300, isolated) as (master, workers, folders):
        rc, output = finish(master)
        for worker in workers:
            assert worker.wait(timeout=BOUND_S) == 0
    assert rc == 0, output
    out = tmp_path / "master"
    run = runfile.read(out)
    summary = json.loads((out / "summary.json").read_text())
    assert run["complete"] and run["incomplete_workers"] == []
    assert [c for c in summary["checks"] if not c["pass"]] == []
    assert len(run["workers"]) == WORKERS and run["processes"] == WORKERS
    table = ops_table(out)
    print(figures(run, table.num_rows))
    assert table.num_rows == run["server"]["stream"]["messages"] == sum(w["ops"] for w in run["workers"])
    by_pid = {w["pid"]: w for w in run["workers"]}
    assert all(w["ops"] > 0 and w["rows_received"] == w["ops"] for w in run["workers"])
    assert sorted(set(table["process"].to_pylist())) == sorted(by_pid)
    assert not (out / "ops" / ".incoming").exists()
    for worker in run["workers"]:
        for phase in ("start", "end"):
            reading = worker["clock"][phase]
            assert reading["bound_ns"] < 50 * MS, reading  # loopback: a round trip of milliseconds at most
        files = [out / item["file"] for item in worker["files"]]
        assert files and all(path.parent == out / "ops" for path in files)  # the log rolls every fleet.SHIP_EVERY_S
        assert all(path.name.startswith(f"ops-{worker['worker']}-") for path in files)
    for n, folder in enumerate(folders):  # each worker logged in its own folder; the master's copy is corrected
        logged = folder / "work" / run["run_id"] / "ops"
        raw = ds.dataset(logged, format="parquet").to_table()
        worker = by_pid[raw["process"][0].as_py()]
        injected = SHIFTED_NS if n == 2 else 0
        for phase in ("start", "end"):
            reading = worker["clock"][phase]
            assert abs(reading["offset_ns"] - injected) <= reading["bound_ns"], (phase, reading)
        offsets = sorted(worker["clock"][phase]["offset_ns"] for phase in ("start", "end"))
        for item in worker["files"]:  # ops-<worker>-<rest> on the master is ops-<rest> in the worker's folder
            placed = pq.read_table(out / item["file"])
            original = pq.read_table(
                logged / ("ops-" + Path(item["file"]).name.removeprefix(f"ops-{worker['worker']}-"))
            )
            shift = (original["intended_ns"].to_numpy() - placed["intended_ns"].to_numpy()).tolist()
            assert offsets[0] <= min(shift) <= max(shift) <= offsets[1]
        if injected:  # the console names the offset it removed
            assert f"clock offset {worker['clock']['start']['offset_ns'] / 1e6:+.3f} ms" in output


@ISOLATION
@pytest.mark.asyncio
async def test_a_worker_killed_mid_run_makes_an_incomplete_run_that_names_it(tmp_path, embedded_server, isolated):
    """SIGKILL to one worker once every worker has sent the master a first file: the command fails, load.json names
    that worker and marks the run incomplete, what it had sent is kept, and the other two workers' logs are whole."""
    with fleet(tmp_path, embedded_server, new_run_prefix(), "10s", 300, isolated) as (master, workers, _folders):
        incoming = tmp_path / "master" / "ops" / ".incoming"

        async def every_worker_sent_a_file() -> bool:  # files roll and travel every fleet.SHIP_EVERY_S
            return len({path.parts[-3] for path in incoming.glob("*/ops/*.parquet")}) == WORKERS

        assert await eventually(every_worker_sent_a_file, BOUND_S), "not every worker sent a file in time"
        assert master.poll() is None, "the run ended before a worker could be killed"
        spaces = network_namespaces([master.pid, *(worker.pid for worker in workers)])
        if isolated:  # each worker in a namespace of its own, none in the master's
            assert len(set(spaces)) == WORKERS + 1, spaces
        else:
            assert len(set(spaces)) == 1, spaces
        victim = psutil.Process(workers[1].pid)
        locusts = victim.children(recursive=True)  # Locust runs in a session of its own: each is killed
        for process in [victim, *locusts]:
            process.kill()
        locust_pids = {process.pid for process in locusts}
        rc, output = await asyncio.to_thread(finish, master)
    assert rc == 1, output
    run = runfile.read(tmp_path / "master")
    assert not run["complete"]
    dead = [w for w in run["workers"] if not w["complete"]]
    assert len(dead) == 1 and dead[0]["pid"] in locust_pids, run["workers"]
    assert run["incomplete_workers"] == [dead[0]["worker"]]
    assert any("never reported its log drained" in error for error in dead[0]["errors"]), dead[0]["errors"]
    assert f"incomplete run, missing {dead[0]['worker']}" in output
    alive = [w for w in run["workers"] if w["complete"]]
    assert len(alive) == 2 and all(w["rows_received"] == w["ops"] > 0 for w in alive)
    assert dead[0]["rows_received"] > 0 and dead[0]["files"], "what the killed worker had sent was not kept"
    assert dead[0]["ops"] is None  # it never said how many it logged
    table = ops_table(tmp_path / "master")
    print(figures(run, table.num_rows))
    assert table.num_rows == sum(w["rows_received"] for w in run["workers"])
    assert set(table["process"].to_pylist()) == {w["pid"] for w in run["workers"]}
    # what the killed worker stored is on the server but not in the log: the run says so instead of looking whole
    assert table.num_rows < run["server"]["stream"]["messages"]
