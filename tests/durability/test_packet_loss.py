"""Packet loss between the nodes: real drops (nftables) inside a network namespace the run makes for itself, never
on the machine's own firewall, and nothing of it left behind."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from jetcheck import cli
from jetcheck.durability import packet_loss
from jetcheck.durability.history import HISTORY_DIR, FaultRecord, read_history
from jetcheck.durability.packet_loss import TABLE, PacketLoss, dropped_packets, what_is_missing
from jetcheck.fixtures.errors import TargetError

from ..conftest import SERVER_VERSION

MISSING = what_is_missing()  # root, ip and nft: what the product itself asks for before it drops packets
NEEDS_ROOT = pytest.mark.skipif(bool(MISSING), reason=MISSING)


def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def namespace_made(printed: str) -> str:
    """The namespace a lossy run said it made: found by its name, since the other test process may have namespaces
    of its own at the same moment (the fleet's workers)."""
    named = re.search(r"the run goes into network namespace (\S+)", printed)
    assert named, f"the run did not say which namespace it made: {printed[-500:]!r}"
    return named[1]


def test_the_dropped_packets_are_the_sum_of_the_rules_counters():
    """heal's count is what the counters of the drop rules say (an `nft -j list table` listing)."""
    listing = {"nftables": [
        {"metainfo": {"json_schema_version": 1}},
        {"table": {"family": "inet", "name": TABLE}},
        {"rule": {"expr": [{"match": {}}, {"counter": {"packets": 12, "bytes": 900}}, {"drop": None}]}},
        {"rule": {"expr": [{"match": {}}, {"counter": {"packets": 30, "bytes": 2000}}, {"drop": None}]}},
    ]}  # fmt: skip
    assert dropped_packets(json.dumps(listing)) == 42
    assert dropped_packets("") == 0


def test_packets_are_never_dropped_outside_a_namespace_of_the_runs_own(monkeypatch):
    """Outside the run's own namespace PacketLoss refuses to exist: the machine's firewall is not jetcheck's."""
    monkeypatch.delenv(packet_loss.NAMESPACE_ENV, raising=False)
    with pytest.raises(TargetError, match="only done inside a network namespace jetcheck made"):
        PacketLoss()


def test_a_lossy_fault_without_root_is_one_line_and_exit_2(monkeypatch, capsys):
    """Without root (or ip/nft) a lossy fault is refused before anything starts, naming what is needed."""
    monkeypatch.setattr(packet_loss.os, "geteuid", lambda: 1000)
    assert cli.main(["durability", "--faults", "lossy-leader", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "jetcheck: --faults lossy-leader: a network namespace of its own needs root", err


@NEEDS_ROOT
def test_a_short_lossy_run_drops_real_packets_and_leaves_nothing_behind(tmp_path, capsys):
    """15 s of writes while 30% of the packets of the leader's route links are dropped: the fault's record counts
    the packets the kernel dropped, every rule is judged, and neither the namespace nor a firewall rule is left."""
    out = tmp_path / "out"
    argv = ["durability", "--server-version", SERVER_VERSION, "--duration", "15s", "--seed", "7"]
    assert cli.main([*argv, "--faults", "lossy-leader", "--out", str(out)]) == 0
    (fault,) = read_history(out / HISTORY_DIR, FaultRecord)
    assert fault.kind == "lossy-leader"
    dropped = re.fullmatch(r"leader (\S+); 30% of packets dropped on \S+, \S+ \((\d+) dropped\)", fault.detail)
    assert dropped and int(dropped[2]) > 0, fault.detail
    assert namespace_made(capsys.readouterr().out) not in namespaces()
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    assert TABLE not in tables
