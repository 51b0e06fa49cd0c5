"""Durability profiles: a name runs its settings once per variant, each into its own folder, and says whether each
variant did what the finding says (lost acknowledged writes, or none)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from jetcheck import cli
from jetcheck.durability.checker import ACKED_SURVIVE, STREAM_AVAILABLE
from jetcheck.durability.profiles import PROFILE_FILE, PROFILES, run_profile, variant_args
from jetcheck.records import RESULTS_FILE, RUN_FILE, CheckResult, write_results

PROFILE = PROFILES["power-loss-sync"]


def given(**values) -> argparse.Namespace:
    defaults = {"seed": None, "out": "out", "faults": ["kill-leader"], "duration": 60.0, "sync_interval": "default"}
    return argparse.Namespace(**{**defaults, "profile": "power-loss-sync", **values})


def test_a_variant_runs_the_profiles_settings_with_its_own_in_its_own_folder_on_one_seed():
    """The profile's settings replace the given ones, the variant's replace both; the seed is the profile's unless
    one was given, so every variant runs the same schedule."""
    default, always = (variant_args(given(), PROFILE, variant) for variant in PROFILE.variants)
    assert (default.faults, default.duration, default.seed) == (["power-cut-all"], 30.0, PROFILE.seed)
    assert (default.sync_interval, always.sync_interval) == ("default", "always")
    assert (default.out, always.out) == (str(Path("out/sync-default")), str(Path("out/sync-always")))
    assert default.profile == "" and always.seed == default.seed
    assert variant_args(given(seed=9), PROFILE, PROFILE.variants[1]).seed == 9


def fake_run(lost_by_sync: dict[str, int]):
    """A durability command that writes the two results and run.json a profile reads, losing `lost_by_sync[...]`
    of 100 acked writes."""

    def run(args: argparse.Namespace) -> int:
        out = Path(args.out)
        out.mkdir(parents=True)
        lost = lost_by_sync[args.sync_interval]
        common = {"area": "durability", "title": "", "level": "MUST", "source": "", "min_version": "2.2.0"}
        common |= {"server_version": "2.15.1", "client": {}, "duration_s": 1.0}
        status = "fail" if lost else "pass"
        write_results(out / RESULTS_FILE, [
            CheckResult(ACKED_SURVIVE, status, observed={"acked": 100, "lost": lost}, **common),
            CheckResult(STREAM_AVAILABLE, "pass", **common),
        ])  # fmt: skip
        cuts = [{"node": "n1", "files": 1, "bytes": 4096, "pages": 1}]
        (out / RUN_FILE).write_text(json.dumps({"power_cuts": cuts}))
        return 1 if lost else 0

    return run


@pytest.mark.parametrize(
    ("lost", "code", "said"),
    [
        ({"default": 40, "always": 0}, 0, "power-loss-sync: reproduced"),
        ({"default": 0, "always": 0}, 1, "power-loss-sync: not reproduced"),
        ({"default": 40, "always": 3}, 1, "power-loss-sync: not reproduced"),
    ],
)
def test_a_profile_is_reproduced_only_when_every_variant_does_as_the_finding_says(tmp_path, capsys, lost, code, said):
    """The default sync_interval must lose acked writes and `always` none; anything else is not reproduced, and
    profile.json keeps each variant's figures."""
    args = given(out=str(tmp_path))
    assert run_profile(args, fake_run(lost)) == code
    printed = capsys.readouterr().out
    assert said in printed
    assert f"sync-default: {lost['default']} of 100 acked writes lost" in printed
    assert "unsynced bytes dropped per node and cut: 4,096" in printed
    record = json.loads((tmp_path / PROFILE_FILE).read_text())
    assert [(o["variant"], o["lost"]) for o in record["outcomes"]] == [
        ("sync-default", lost["default"]),
        ("sync-always", lost["always"]),
    ]


def test_an_unknown_profile_is_one_line_and_exit_2(capsys):
    """A profile name not in PROFILES is refused before anything starts, naming the ones there are."""
    assert cli.main(["durability", "--profile", "no-such-profile"]) == 2
    assert "no such profile (profiles: power-loss-sync" in capsys.readouterr().err
