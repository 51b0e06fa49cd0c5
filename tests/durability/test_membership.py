"""Membership changes (nats-io/nats-server#7545): who a member-* fault removes and kills, drawn from the seed; the
servers' answers read; a removed node's store wiped and its fresh name; the fault's record as the schedule writes
it; the system account given only to the runs that ask; and one short real run in which the removed node is gone
from the stream's peers during the fault and back, as a new server, after the heal."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

import pytest

from jetcheck import cli
from jetcheck.durability import run as one_run
from jetcheck.durability.history import HISTORY_DIR, FaultRecord, read_history
from jetcheck.durability.membership import answer_of, fresh_name, wipe_store
from jetcheck.durability.schedule import PlannedFault, draw_member_change, plan_faults, run_schedule
from jetcheck.fault_kinds import MEMBER_FAULTS, PROCESS_FAULTS
from jetcheck.fixtures.process import NatsServerProcess

from ..conftest import SERVER_VERSION


def test_the_removed_node_is_the_leader_or_a_follower_drawn_from_the_seed():
    """Over seeds, both roles come up; the same seed and fault give the same change; a follower is never the
    leader; an unknown leader (None) stands as the first node."""
    changes = [draw_member_change("member-cycle", seed, 0, 5, leader=2) for seed in range(40)]
    assert {c.role for c in changes} == {"leader", "follower"}
    assert all((c.removed == 2) == (c.role == "leader") for c in changes)
    assert all(c.killed_first == () for c in changes)
    assert draw_member_change("member-cycle", 9, 1, 5, 2) == draw_member_change("member-cycle", 9, 1, 5, 2)
    leaders = [c for s in range(40) if (c := draw_member_change("member-cycle", s, 0, 3, None)).role == "leader"]
    assert leaders and all(c.removed == 0 for c in leaders)


@pytest.mark.parametrize("size", [3, 5])
def test_kill_minority_kills_a_minority_of_the_other_nodes_before_the_removal(size):
    """member-cycle-kill-minority kills (size - 1) // 2 nodes, never the one it removes nor the meta leader."""
    for seed in range(30):
        meta = (seed + 1) % size
        change = draw_member_change("member-cycle-kill-minority", seed, 2, size, leader=seed % size, meta_leader=meta)
        assert len(change.killed_first) == (size - 1) // 2
        assert change.removed not in change.killed_first and meta not in change.killed_first


def test_member_faults_are_asked_for_by_name_and_drawn_like_any_kind():
    """Not in the default faults; a schedule of them is one of them about every 12 s, each kind once first."""
    assert not set(MEMBER_FAULTS) & set(PROCESS_FAULTS)
    plan = plan_faults(3, list(MEMBER_FAULTS), 50.0, 5)
    assert [fault.kind for fault in plan[:2]] in (list(MEMBER_FAULTS), list(reversed(MEMBER_FAULTS)))


def test_the_servers_answers_are_read_as_success_or_their_error():
    assert answer_of(b'{"type":"x","success":true}') == (True, "success")
    said = b'{"error":{"code":503,"err_code":10075,"description":"peer remap failed"}}'
    assert answer_of(said) == (False, "503/10075 peer remap failed")
    assert answer_of(b"nope")[0] is False
    assert answer_of(b'{"success":false}') == (False, 'no success: {"success": false}')


def test_a_wiped_store_keeps_its_folder_and_loses_every_file(tmp_path):
    """The store folder may be a mount point (the power-loss layer): it stays, empty."""
    node = NatsServerProcess(Path("/nonexistent/nats-server"), tmp_path, name="n1")  # never started
    msgs = node.store_dir / "jetstream" / "$G" / "streams" / "S" / "msgs"
    msgs.mkdir(parents=True)
    (msgs / "1.blk").write_bytes(b"x")
    (node.store_dir / "top").write_bytes(b"y")
    assert wipe_store(node) == 2
    assert node.store_dir.is_dir() and not any(node.store_dir.iterdir())


def test_a_node_back_after_removal_has_a_fresh_name_each_time():
    assert [fresh_name("jetcheck-n2", joins) for joins in (1, 2)] == ["jetcheck-n2-r1", "jetcheck-n2-r2"]


class FakeMembership:
    def __init__(self, faults: FakeFaults) -> None:
        self.faults = faults
        self.said: list[str] = []

    async def meta_leader(self) -> str:
        return "n4"

    async def rejoin(self) -> None:
        for index in self.faults.removed:
            self.faults.nodes[index].name += "-r1"
        self.said = [f"joined again as {', '.join(self.faults.nodes[i].name for i in self.faults.removed)}"]


class FakeFaults:
    """ClusterFaults as run_schedule uses it, with nodes that are only names."""

    def __init__(self, size: int) -> None:
        self.nodes = [argparse.Namespace(name=f"n{i}") for i in range(size)]
        self.events: list[tuple[str, list[int]]] = []
        self.removed: list[int] = []
        self.members = FakeMembership(self)

    def index_of(self, name: str) -> int | None:
        return next((i for i, node in enumerate(self.nodes) if node.name == name), None)

    def kill(self, indices: list[int]) -> None:
        self.events.append(("kill", indices))

    async def remove_member(self, index: int) -> str:
        self.removed.append(index)
        self.events.append(("remove", [index]))
        return f"{self.nodes[index].name} killed; SERVER.REMOVE via n0: success"

    async def heal_all(self) -> None:
        await self.members.rejoin()


def test_the_record_names_the_nodes_as_they_were_and_says_what_was_removed_and_how_it_returned():
    """The kills come first, then the removal; the record's nodes are the names at the fault (the removed node
    returns renamed), its detail the role, the servers' answers, the kills and the return."""
    faults = FakeFaults(5)
    fault = PlannedFault(0.0, "member-cycle-kill-minority", 0.0, (0, 1))
    change = draw_member_change(fault.kind, 11, 0, 5, 3, 4)

    async def leader() -> str:
        return "n3"

    [record] = asyncio.run(run_schedule(faults, [fault], leader, 0.0, seed=11))  # type: ignore[arg-type]
    removed = f"n{change.removed}"
    assert faults.events == [("kill", list(change.killed_first)), ("remove", [change.removed])]
    assert record.nodes == [removed, *(f"n{i}" for i in change.killed_first)]
    killed = ", ".join(f"n{i}" for i in change.killed_first)
    assert record.detail == (
        f"{change.role} {removed} killed; SERVER.REMOVE via n0: success; killed just before: {killed}; "
        f"meta leader n4; joined again as {removed}-r1"
    )


def test_only_a_run_with_member_faults_gives_its_cluster_a_system_account():
    def config(faults: list[str], sync_interval: str = "default") -> str:
        return one_run.cluster_config(argparse.Namespace(sync_interval=sync_interval, faults=faults))

    assert "system_account: SYS" in config(["kill-leader", "member-cycle"])
    assert "no_auth_user: jetcheck" in config(["member-cycle"], "always")
    assert "sync_interval: always" in config(["member-cycle"], "always")
    assert config(list(PROCESS_FAULTS)) == ""


def test_a_short_run_with_a_member_removed_and_back_judges_every_rule(tmp_path, capsys):
    """20 s of writes on three nodes while one is killed, wiped and peer-removed through the API, then back under a
    fresh name: the meta group said success, the stream's peers left it out during the fault and name it, renamed,
    after the heal, and every rule passes on the current release."""
    out = tmp_path / "out"
    argv = ["durability", "--server-version", SERVER_VERSION, "--duration", "20s", "--seed", "3"]
    code = cli.main([*argv, "--faults", "member-cycle", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    [fault] = read_history(out / HISTORY_DIR, FaultRecord)
    [removed] = fault.nodes
    assert re.search(r"SERVER\.REMOVE via jetcheck-n\d: success; stream peers then ([^;]+); meta leader jetcheck-n\d;",
                     fault.detail), fault  # fmt: skip
    during = re.search(r"stream peers then ([^;]+);", fault.detail).group(1).split(", ")  # type: ignore[union-attr]
    assert removed not in during and len(during) == 2, fault.detail
    after = re.search(r"joined again as ([^;]+); stream peers ([^;]+) [\d.]+ s later$", fault.detail)
    assert after, fault.detail
    assert after.group(1) == f"{removed}-r1" and f"{removed}-r1" in after.group(2).split(", "), fault.detail
