"""`jetcheck durability` for real, short: a 3-node cluster, one kill of the leader, every rule judged into results
that the report's reader and the verdict take as any other; and nothing left behind when the run fails."""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time

import nats.errors
import nats.js.errors
import psutil
import pytest

from jetcheck import cli
from jetcheck.conformance.catalog import rules_checked_by
from jetcheck.durability import run as one_run
from jetcheck.durability import session as run_session
from jetcheck.durability import workload
from jetcheck.durability.history import HISTORY_DIR, FaultRecord, LeaderClaim, PublishRecord, read_history
from jetcheck.durability.schedule import describe, plan_faults
from jetcheck.fault_kinds import PROCESS_FAULTS
from jetcheck.fixtures import sticky_cancel
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.fixtures.target import Target
from jetcheck.records import RESULTS_FILE, RUN_FILE
from jetcheck.reports.inputs import resolve

from ..conftest import SERVER_VERSION


def processes_under(folder) -> list[str]:
    """Command lines of running processes that name `folder` (a node's store lives there)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if str(folder) in line:
            found.append(line)
    return found


def test_a_short_run_with_one_leader_kill_judges_every_durability_rule(tmp_path, capsys):
    """15 s of writes on three nodes while the stream's leader is killed (-9) and restarted: every rule passes on
    the current release, and the results, run.json and history are ones `jetcheck report` reads."""
    out = tmp_path / "out"
    argv = ["durability", "--server-version", SERVER_VERSION, "--duration", "15s", "--seed", "7"]
    code = cli.main([*argv, "--faults", "kill-leader", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    result_set = resolve(out)
    results = result_set.results()
    assert {r.id for r in results} == set(rules_checked_by("durability"))
    assert all(r.status == "pass" for r in results), [r.message for r in results if r.status != "pass"]
    assert all("seed 7, 3 nodes, R3, sync_interval default, schedule kill-leader@" in r.message for r in results)
    assert result_set.verdict().ok
    faults = read_history(out / HISTORY_DIR, FaultRecord)
    assert [f.kind for f in faults] == ["kill-leader"], faults
    assert faults[0].detail == f"leader {faults[0].nodes[0]}", faults
    # every node was sampled for the split-brain check: each said at some time that it led some group
    claims = read_history(out / HISTORY_DIR, LeaderClaim)
    assert {claim.group for claim in claims} >= {"_meta_"}, claims[:3]
    assert json.loads((out / RUN_FILE).read_text())["counts"]["leader_claims"] == len(claims)
    # each server's log outlives the cluster's folders
    logs = {path.name: path.read_text() for path in (out / "logs").iterdir()}
    assert sorted(logs) == ["jetcheck-n1.log", "jetcheck-n2.log", "jetcheck-n3.log"]
    assert all("Starting nats-server" in text for text in logs.values())
    publishes = read_history(out / HISTORY_DIR, PublishRecord)
    assert sum(p.outcome == "ok" for p in publishes) > 100
    assert json.loads((out / RUN_FILE).read_text())["options"]["seed"] == 7
    assert (out / RESULTS_FILE).is_file()


def test_an_interrupted_session_does_not_wait_out_its_consumers_fetch(monkeypatch):
    """Cancelled as Ctrl-C and SIGTERM cancel it, the session ends at once, not when the fetch its consumer has
    waiting on the server expires (here made 60 s long; an interrupted command has 5 s to stop)."""
    monkeypatch.setattr(workload, "FETCH_WAIT_S", 60.0)
    monkeypatch.setattr(asyncio, "wait_for", sticky_cancel.wait_for)  # as in every jetcheck command
    provider = ClusterProvider(wheel_binary(SERVER_VERSION))
    provider.start()

    async def cancelled_while_fetching() -> float:
        no_faults: list = []
        session = asyncio.create_task(
            run_session.run_session(provider.nodes, no_faults, workload.WorkloadPlan(duration_s=300.0), 7, None)
        )
        observer = await Target(provider.nodes[0].url).connect()
        try:
            async with asyncio.timeout(60.0):  # a session that never fetches is an error, not a hang
                while not await _pull_waiting(observer):
                    assert not session.done(), session
                    await asyncio.sleep(0.05)
        finally:
            await observer.close()
        session.cancel()
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await session
        return time.monotonic() - started

    try:
        took = asyncio.run(cancelled_while_fetching())
    finally:
        provider.stop()
    assert took < 10.0, f"the cancelled session took {took:.1f} s to end"


async def _pull_waiting(nc) -> bool:
    """The run's consumer has a pull request waiting on the server (not yet: no consumer, or a cluster still electing
    the leader that answers)."""
    try:
        info = await nc.jetstream(timeout=1.0).consumer_info(run_session.STREAM, run_session.CONSUMER)
    except (nats.js.errors.NotFoundError, nats.errors.TimeoutError):
        return False
    return info.num_waiting > 0


def run_with_failing_session(tmp_path, monkeypatch, capsys, argv: list[str], look) -> None:
    """`jetcheck durability *argv` whose session calls look(nodes, links, temp) once the cluster is up, then fails:
    exit 2 with the failure's line, and afterwards no node process and nothing in the run's temp folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    async def failing_session(nodes, plan, workload, seed, links, users_cluster, stream, disks=None):
        look(nodes, links, temp)
        raise TargetError("the session failed")

    monkeypatch.setattr(one_run, "run_session", failing_session)
    code = cli.main(["durability", "--server-version", SERVER_VERSION, *argv, "--out", str(tmp_path / "out")])
    assert code == 2 and "the session failed" in capsys.readouterr().err
    assert processes_under(temp) == []
    assert list(temp.iterdir()) == []


def test_a_failing_run_stops_every_node_and_removes_their_folders(tmp_path, monkeypatch, capsys):
    """When the run fails once the cluster is up, its nodes are stopped and its temp folder removed."""
    seen: list[bool] = []

    def look(nodes, links, temp):
        seen.extend(node.running for node in nodes)
        assert processes_under(temp), "the nodes run with their stores under the temp folder"

    run_with_failing_session(tmp_path, monkeypatch, capsys, [], look)
    assert seen == [True, True, True]


def test_the_same_seed_gives_the_same_fault_schedule():
    """The schedule is drawn from the seed alone; each kind comes once before any repeats."""
    kinds = list(PROCESS_FAULTS)
    first, again = plan_faults(42, kinds, 60.0, 3), plan_faults(42, kinds, 60.0, 3)
    assert describe(first) == describe(again)
    assert describe(first) != describe(plan_faults(43, kinds, 60.0, 3))
    assert sorted(f.kind for f in first) == sorted(PROCESS_FAULTS)
    assert all(6.0 <= f.at_s <= 54.0 and len(f.minority) == 1 for f in first)
    assert all(len(f.minority) == 2 for f in plan_faults(42, kinds, 60.0, 5))


def test_the_sync_always_config_is_one_nats_server_accepts(tmp_path):
    """--sync-interval always hands nats-server a configuration it parses (`nats-server -t`)."""
    config = tmp_path / "always.conf"
    config.write_text(one_run.SYNC_ALWAYS)
    checked = subprocess.run(
        [str(wheel_binary(SERVER_VERSION)), "-c", str(config), "-t"], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
