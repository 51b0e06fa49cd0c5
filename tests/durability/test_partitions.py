"""Network faults: which route links each kind cuts, that they are drawn like any kind and asked for by name, and
one short real run in which the leader is cut off from its peers through the relays and every rule is judged."""

from __future__ import annotations

import itertools
import socket

import pytest

from jetcheck import cli
from jetcheck.cli import build_parser
from jetcheck.durability.faults import ClusterFaults
from jetcheck.durability.history import HISTORY_DIR, FaultRecord, read_history
from jetcheck.durability.schedule import plan_faults, severed_links
from jetcheck.fault_kinds import NETWORK_FAULTS, PROCESS_FAULTS
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import NatsServerProcess

from ..conftest import SERVER_VERSION
from .test_durability_run import run_with_failing_session


def sides(links: list[tuple[int, int]]) -> tuple[set[int], set[int]]:
    return {i for i, _ in links}, {j for _, j in links}


def test_a_minority_partition_cuts_every_link_between_the_minority_and_the_majority():
    """partition-minority on 5 nodes with minority {1, 3}: the six links across are cut, none inside a side."""
    links = severed_links("partition-minority", [1, 3], 5)
    assert sorted(links) == [(1, 0), (1, 2), (1, 4), (3, 0), (3, 2), (3, 4)]


def test_an_isolated_leader_loses_every_link_and_the_others_keep_theirs():
    """partition-leader and stall-leader sever the leader's links to each other node, and only those."""
    for kind in ("partition-leader", "stall-leader"):
        assert sorted(severed_links(kind, [2], 3)) == [(2, 0), (2, 1)]


@pytest.mark.parametrize(("size", "minority", "bridge"), [(3, [2], 0), (5, [0, 4], 1)])
def test_a_bridge_node_keeps_both_sides_while_they_lose_each_other(size, minority, bridge):
    """partition-bridge cuts the minority from every node but the lowest other one, which still reaches both."""
    links = severed_links("partition-bridge", minority, size)
    cut_from, cut_to = sides(links)
    assert cut_from == set(minority)
    assert cut_to == set(range(size)) - set(minority) - {bridge}
    assert all(bridge not in link for link in links)
    assert len(links) == len(cut_from) * len(cut_to)


def test_network_faults_are_drawn_from_the_seed_like_any_kind():
    """A schedule of the network kinds is the same for the same seed and holds each kind once before repeats."""
    kinds = list(NETWORK_FAULTS)
    plan = plan_faults(5, kinds, 90.0, 3)  # room for each kind once
    assert plan == plan_faults(5, kinds, 90.0, 3)
    assert sorted(fault.kind for fault in plan[: len(kinds)]) == sorted(NETWORK_FAULTS)


def test_long_holds_space_the_faults_so_each_heals_before_the_next():
    """--hold 12-15 on 180 s: four faults, each held 12-15 s and healed before the next one starts."""
    plan = plan_faults(1, list(NETWORK_FAULTS), 180.0, 3, (12.0, 15.0))
    assert len(plan) == 4
    assert all(12.0 <= fault.hold_s <= 15.0 for fault in plan), plan
    assert all(a.at_s + a.hold_s < b.at_s for a, b in itertools.pairwise(plan)), plan


def test_a_hold_range_is_min_dash_max_seconds(capsys):
    """--hold takes MIN-MAX seconds (default 1-4, the schedules' own); a zero or reversed range is one line, exit 2."""
    parse = build_parser().parse_args
    assert parse(["durability"]).hold == (1.0, 4.0)
    assert parse(["durability", "--hold", "12-15"]).hold == (12.0, 15.0)
    for wrong in ("5-2", "0-3", "soon"):
        assert cli.main(["durability", "--hold", wrong]) == 2
        err = capsys.readouterr().err.strip()
        assert err.splitlines() == [err] and "MIN-MAX" in err


def test_the_default_faults_need_no_relays():
    """The default --faults are the process faults alone, so a default run's cluster is routed directly and its
    schedules are the ones the durability guide's figures were measured with."""
    args = build_parser().parse_args(["durability"])
    assert args.faults == list(PROCESS_FAULTS)
    assert not set(args.faults) & set(NETWORK_FAULTS)


def test_a_network_fault_on_a_cluster_without_relays_is_refused(tmp_path):
    """Severing a link of a cluster whose routes are direct is a TargetError, not a silent no-op."""
    node = NatsServerProcess(tmp_path / "nats-server", tmp_path, name="n1")  # never started
    with pytest.raises(TargetError, match="partitionable"):
        ClusterFaults([node]).sever([(0, 1)])


def test_a_failing_partitionable_run_closes_its_relays_and_stops_every_node(tmp_path, monkeypatch, capsys):
    """When the session fails with the relays up, the relays stop listening, the nodes stop and their folder goes."""
    relay_ports: list[int] = []

    def look(nodes, links, temp):
        assert links is not None, "network faults asked for: the routes go through relays"
        relay_ports.extend(int(url.rsplit(":", 1)[1]) for i in range(len(nodes)) for url in links.routes_of(i))

    run_with_failing_session(tmp_path, monkeypatch, capsys, ["--faults", "partition-leader"], look)
    assert len(relay_ports) == 6
    for port in relay_ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()


def test_a_short_run_with_the_leader_cut_off_judges_every_rule(tmp_path, capsys):
    """15 s of writes on three nodes routed through relays while the stream's leader is cut off from both peers and
    then reconnected: the fault's record names the cut links, and every rule passes on the current release."""
    out = tmp_path / "out"
    argv = ["durability", "--server-version", SERVER_VERSION, "--duration", "15s", "--seed", "7"]
    code = cli.main([*argv, "--faults", "partition-leader", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    faults = read_history(out / HISTORY_DIR, FaultRecord)
    assert [f.kind for f in faults] == ["partition-leader"], faults
    leader = faults[0].nodes[0]
    others = sorted({"jetcheck-n1", "jetcheck-n2", "jetcheck-n3"} - {leader})
    assert faults[0].detail == f"leader {leader}; cut {leader}-{others[0]}, {leader}-{others[1]}", faults
    assert "schedule partition-leader@" in printed.out
