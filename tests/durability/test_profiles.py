"""Durability profiles: the table names only what a run can do, a profile's seeds become a rate per finding, and
--profile is refused where it cannot run. (The profiles' real runs are measured by hand: docs/guides/durability.md.)"""

from __future__ import annotations

import argparse

import pytest

from jetcheck import cli
from jetcheck.durability import profiles
from jetcheck.durability.checker import RULES, STREAM_AVAILABLE, Finding
from jetcheck.durability.history import FaultRecord
from jetcheck.durability.run import RunOutcome, telling_lines
from jetcheck.fault_kinds import FAULT_KINDS
from jetcheck.versions import parse_version


@pytest.mark.parametrize("name", [name for name, p in profiles.PROFILES.items() if not p.parts])
def test_every_profile_names_faults_rules_and_releases_a_run_knows(name):
    """A profile's faults are fault kinds, its rules are the checker's, its releases are X.Y.Z, its shape fits."""
    profile = profiles.PROFILES[name]
    assert set(profile.faults) <= set(FAULT_KINDS)
    assert profile.reproduced_by and set(profile.reproduced_by) <= set(RULES)
    assert profile.versions and all(parse_version(v) for v in profile.versions)
    assert profile.nodes in (3, 5) and profile.replicas in (0, 3, 5) and profile.replicas <= profile.nodes
    assert set(profile.sync_intervals) <= {"default", "always"}


def test_the_jepsen_profile_runs_every_other_profile():
    assert profiles.PROFILES["jepsen"].parts == tuple(n for n, p in profiles.PROFILES.items() if not p.parts)


def _outcome(stream_lost: bool) -> RunOutcome:
    findings = {rule: Finding(rule, 0) for rule in RULES}
    if stream_lost:
        findings[STREAM_AVAILABLE] = Finding(STREAM_AVAILABLE, 1, ("STREAM.INFO answered 404/10059 stream not found",))
    fault = FaultRecord(0, "kill-all", ["n1", "n2", "n3"], 1_000_000_000, 3_500_000_000)
    info = {"schedule": [{"at_s": 2.0}]}
    return RunOutcome(findings, [], info, None, "seed S", [fault])  # type: ignore[arg-type]


def test_a_profile_counts_the_seeds_that_reproduced_its_finding(monkeypatch, tmp_path, capsys):
    """Seeds 1-5 where 1, 2 and 4 lose the stream: "reproduced in 3 of 5 seeds", with each seed's evidence; a
    release where no seed does: "not reproduced in 5 seeds"."""
    lost_on = {("2.10.22", 1), ("2.10.22", 2), ("2.10.22", 4)}
    monkeypatch.setattr(
        profiles,
        "run_once",
        lambda args, seed, out, stream, first: _outcome((args.server_version, seed) in lost_on),
    )
    args = argparse.Namespace(out=str(tmp_path), seed=None, seeds=None)
    assert profiles.run_profile(profiles.PROFILES["stream-vanish"], args) == 1
    printed = capsys.readouterr().out
    assert "nats-server 2.10.22, sync_interval default: reproduced in 3 of 5 seeds" in printed
    assert "nats-server 2.10.23, sync_interval default: not reproduced in 5 seeds" in printed
    assert "seed 4: durability.stream-available-after-heal: 1 violation(s): STREAM.INFO answered 404" in printed
    assert "faults: kill-all of n1+n2+n3 at 2.0 s for 2.5 s" in printed
    assert "https://github.com/nats-io/nats-server/issues/6888" in printed
    assert (tmp_path / "profile.json").is_file()


def test_a_profile_is_refused_on_a_users_cluster(tmp_path, capsys):
    described = tmp_path / "c.toml"
    described.write_text("")
    code = cli.main(["durability", "--server", f"cluster-file:{described}", "--profile", "stream-vanish"])
    assert code == 2
    assert "--profile stream-vanish starts clusters of its own" in capsys.readouterr().err


def test_more_replicas_than_nodes_is_refused(capsys):
    assert cli.main(["durability", "--nodes", "3", "--replicas", "5"]) == 2
    assert "--replicas 5 needs at least as many nodes (--nodes 3)" in capsys.readouterr().err


def test_the_server_log_lines_kept_as_evidence_are_those_where_it_drops_or_distrusts_state(tmp_path):
    """#7556's orphan cleanup is kept, with its node; ordinary lines are not."""
    (tmp_path / "jetcheck-n1.log").write_text(
        "[1] [INF] Starting nats-server\n[1] [WRN] Detected orphaned stream '$G > S', will cleanup\n"
    )
    (tmp_path / "jetcheck-n2.log").write_text("[2] [INF] Server is ready\n")
    assert telling_lines(tmp_path) == {"jetcheck-n1": ["[1] [WRN] Detected orphaned stream '$G > S', will cleanup"]}
