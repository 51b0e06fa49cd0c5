"""`--server cluster-file:PATH`: a cluster the user describes by URLs and shell commands. Refused without
--allow-faults before anything is read or reached; with it, faulted only through the file's commands, healed at
the end (also when the run fails), and left without the run's stream. Proven on a cluster started by shell commands
(kill -9 through the pid file nats-server writes)."""

from __future__ import annotations

import asyncio
import subprocess
import time

import nats.js.errors
import pytest

from jetcheck import cli
from jetcheck.durability import run as one_run
from jetcheck.durability.described_cluster import DescribedNode, read_cluster_file
from jetcheck.durability.history import HISTORY_DIR, FaultRecord, read_history
from jetcheck.durability.session import STREAM
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import free_port
from jetcheck.fixtures.target import Target

from ..conftest import SERVER_VERSION

READY_S = 90.0  # a busy 2-core machine


def refused(argv: list[str], capsys) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_users_cluster_is_refused_without_allow_faults_before_its_file_is_read(tmp_path, capsys):
    """Without --allow-faults the command says why in one line and exits 2; the file (absent here) is not read."""
    missing = tmp_path / "absent.toml"
    err = refused(["durability", "--server", f"cluster-file:{missing}", "--out", str(tmp_path / "out")], capsys)
    assert "--allow-faults" in err and "your cluster" in err
    assert not (tmp_path / "out").exists()


def test_faults_a_users_cluster_cannot_take_are_refused(tmp_path, capsys):
    """Network and disk faults need a cluster jetcheck starts: refused by name for a described one."""
    argv = ["durability", "--server", f"cluster-file:{tmp_path / 'c.toml'}", "--allow-faults"]
    err = refused([*argv, "--faults", "kill-leader,partition-leader,bitflip-minority"], capsys)
    assert "bitflip-minority,partition-leader need a cluster jetcheck starts" in err


def test_a_cluster_file_names_what_a_node_lacks(tmp_path):
    """A node without its kill command, or with pause but no resume, is a TargetError naming the node and field."""
    node = 'name = "n{}"\nurl = "nats://127.0.0.1:1"\nmonitor = "http://127.0.0.1:2"\nstart = "true"\n'
    path = tmp_path / "c.toml"
    path.write_text("".join(f"[[node]]\n{node.format(i)}kill = 'true'\n" for i in (1, 2)) + f"[[node]]\n{node}")
    with pytest.raises(TargetError, match="node 3: missing kill"):
        read_cluster_file(path)
    path.write_text("".join(f"[[node]]\n{node.format(i)}kill = 'true'\npause = 'true'\n" for i in (1, 2, 3)))
    with pytest.raises(TargetError, match="node 1: pause and resume come together"):
        read_cluster_file(path)


def test_a_failing_command_is_a_target_error_with_its_output(tmp_path):
    """A command that exits non-zero says so, with the tail of what it printed."""
    node = DescribedNode({"name": "n1", "url": "", "monitor": "", "kill": "echo no such pid >&2; exit 3", "start": ""})
    with pytest.raises(TargetError, match="n1: kill command exited 3: no such pid"):
        node.kill()
    assert node.running


@pytest.fixture
def shell_cluster(tmp_path):
    """Three nats-servers started by shell commands (as a user's scripts would), their cluster file, and a kill of
    every one at the end."""
    binary = wheel_binary(SERVER_VERSION)
    names = ["u1", "u2", "u3"]
    ports = {name: (free_port(), free_port(), free_port()) for name in names}
    routes = ",".join(f"nats://127.0.0.1:{ports[name][2]}" for name in names)
    tables, starts, pids = [], [], []
    for name in names:
        client, monitor, cluster = ports[name]
        home = tmp_path / name
        home.mkdir()
        pid = home / "pid"
        pids.append(pid)
        start = (
            f"{binary} -a 127.0.0.1 -p {client} -m {monitor} -n {name} -js -sd {home / 'store'} -P {pid} "
            f"--cluster_name shell --cluster nats://127.0.0.1:{cluster} --routes {routes} >> {home / 'log'} 2>&1 &"
        )
        starts.append(start)
        tables.append(
            f'[[node]]\nname = "{name}"\nurl = "nats://127.0.0.1:{client}"\nmonitor = "http://127.0.0.1:{monitor}"\n'
            f"start = '{start}'\nkill = 'kill -9 $(cat {pid})'\n"
            f"pause = 'kill -STOP $(cat {pid})'\nresume = 'kill -CONT $(cat {pid})'\n"
        )
    path = tmp_path / "cluster.toml"
    path.write_text("\n".join(tables))
    for start in starts:
        subprocess.run(["/bin/sh", "-c", start], check=True, timeout=30)
    nodes = read_cluster_file(path)
    try:
        wait_healthy(nodes)
        yield path, nodes
    finally:
        for pid in pids:
            subprocess.run(["/bin/sh", "-c", f"kill -CONT $(cat {pid}); kill -9 $(cat {pid})"], check=False)


def wait_healthy(nodes: list[DescribedNode]) -> None:
    deadline = time.monotonic() + READY_S
    while not all(node.healthy() for node in nodes):
        assert time.monotonic() < deadline, "the shell-started cluster is not healthy"
        time.sleep(0.1)


def has_stream(url: str, name: str) -> bool:
    async def ask() -> bool:
        nc = await Target(url).connect()
        try:
            await nc.jetstream(timeout=10).stream_info(name)
            return True
        except nats.js.errors.NotFoundError:
            return False
        finally:
            await nc.close()

    return asyncio.run(ask())


def test_a_described_cluster_is_faulted_by_its_commands_and_left_healed(shell_cluster, tmp_path, capsys):
    """25 s of writes on the shell-started cluster while its leader is killed (-9, by the file's command) and a
    minority paused: every rule passes, the faults name the file's nodes, every node is healthy afterwards and the
    run's stream is gone."""
    path, nodes = shell_cluster
    out = tmp_path / "out"
    argv = ["durability", "--server", f"cluster-file:{path}", "--allow-faults", "--duration", "25s", "--seed", "3"]
    code = cli.main([*argv, "--faults", "kill-leader,pause-minority", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    faults = read_history(out / HISTORY_DIR, FaultRecord)
    assert sorted(f.kind for f in faults) == ["kill-leader", "pause-minority"], faults
    assert all(set(f.nodes) <= {"u1", "u2", "u3"} for f in faults), faults
    assert "sync_interval as configured" in printed.out
    wait_healthy(nodes)
    assert not has_stream(nodes[0].url, STREAM)


def test_a_failing_run_on_a_described_cluster_starts_again_what_it_killed(shell_cluster, tmp_path, monkeypatch, capsys):
    """When the session fails after killing a node, the run's end starts it again with the file's command."""
    path, nodes = shell_cluster
    was_down: list[bool] = []

    async def failing_session(session_nodes, plan, workload, seed, links, users_cluster, stream, disks=None):
        assert users_cluster
        session_nodes[1].kill()
        deadline = time.monotonic() + READY_S
        while session_nodes[1].healthy() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        was_down.append(not nodes[1].healthy())
        raise TargetError("the session failed")

    monkeypatch.setattr(one_run, "run_session", failing_session)
    argv = ["durability", "--server", f"cluster-file:{path}", "--allow-faults", "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "--faults", "kill-leader"]) == 2
    assert "the session failed" in capsys.readouterr().err
    assert was_down == [True]
    wait_healthy(nodes)
