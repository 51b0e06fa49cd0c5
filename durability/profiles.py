"""Named durability profiles: the settings that reproduce one finding, run as one command
(`jetcheck durability --profile NAME`), once per variant, with a line per variant saying whether it did what the
finding says it does.

A profile is a name -> settings mapping: option values (the command's own, by their argument names) shared by every
run, and its variants, each with the values that set it apart and whether it is expected to lose acknowledged
writes. Each variant's run is an ordinary durability run in `<--out>/<variant>` (results.jsonl, run.json, history/,
readable by `jetcheck report`); `<--out>/profile.json` holds the comparison. The seed is the profile's unless
--seed is given, so every variant runs the same schedule.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jetcheck.records import RESULTS_FILE, RUN_FILE, read_results

from .checker import ACKED_SURVIVE, STREAM_AVAILABLE

PROFILE_FILE = "profile.json"


@dataclass(frozen=True)
class Variant:
    name: str  # its folder under --out
    settings: dict[str, Any]
    loses: bool  # whether the finding says this variant loses acknowledged writes


@dataclass(frozen=True)
class Profile:
    about: str
    seed: int
    settings: dict[str, Any]
    variants: tuple[Variant, ...]
    source: str = ""  # where the finding is reported


PROFILES = {
    "power-loss-sync": Profile(
        about="coordinated power loss of every node loses acknowledged writes with the default sync_interval "
        "(fsync every 2 min) and none with sync_interval always",
        seed=1,
        settings={"faults": ["power-cut-all"], "duration": 30.0},
        variants=(
            Variant("sync-default", {"sync_interval": "default"}, loses=True),
            Variant("sync-always", {"sync_interval": "always"}, loses=False),
        ),
        source="Jepsen, NATS 2.12.1 (2025-12); nats-io/nats-server#7564",
    ),
}


def variant_args(args: argparse.Namespace, profile: Profile, variant: Variant) -> argparse.Namespace:
    """The command's arguments for one variant's run: the profile's settings over the given ones, the variant's
    over both, its own out folder, and the profile's seed unless one was given."""
    values = {**vars(args), **profile.settings, **variant.settings, "profile": ""}
    values["seed"] = args.seed if args.seed is not None else profile.seed
    values["out"] = str(Path(args.out) / variant.name)
    return argparse.Namespace(**values)


@dataclass(frozen=True)
class Outcome:
    variant: str
    expected_loss: bool
    exit_code: int
    acked: int
    lost: int
    stream_error: str
    dropped_bytes: list[int]  # per node of each power cut

    @property
    def as_expected(self) -> bool:
        return (self.lost > 0) == self.expected_loss


def outcome_of(variant: Variant, out: Path, exit_code: int) -> Outcome:
    """What a variant's run folder says: acked writes, how many of them were lost, and the bytes each cut dropped."""
    results = {result.id: result for result in read_results(out / RESULTS_FILE)}
    survived = results[ACKED_SURVIVE]
    available = results[STREAM_AVAILABLE]
    run = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    return Outcome(
        variant.name,
        variant.loses,
        exit_code,
        int(survived.observed.get("acked", 0)),
        int(survived.observed.get("lost", 0)),
        "" if available.status == "pass" else available.message.split("; seed ", 1)[0],
        [cut["bytes"] for cut in run.get("power_cuts", [])],
    )


def run_profile(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """Run every variant of the profile `args.profile` with `run` (the durability command), print the comparison,
    write profile.json; 0 when every variant did as the finding says, 1 otherwise."""
    name = args.profile
    profile = PROFILES[name]
    print(f"jetcheck durability --profile {name}: {profile.about}", flush=True)
    outcomes = []
    for variant in profile.variants:
        one = variant_args(args, profile, variant)
        settings = ", ".join(f"{key} {value}" for key, value in variant.settings.items())
        print(f"\n== {variant.name} ({settings}) ==", flush=True)
        code = run(one)
        outcomes.append(outcome_of(variant, Path(one.out), code))
    print(f"\n{name}: {profile.source}")
    for outcome in outcomes:
        expected = "loses acked writes" if outcome.expected_loss else "loses none"
        verdict = "as expected" if outcome.as_expected else "NOT as expected"
        cuts = ", ".join(f"{b:,}" for b in outcome.dropped_bytes) or "none"
        gone = f"; {outcome.stream_error}" if outcome.stream_error else ""
        print(
            f"  {outcome.variant}: {outcome.lost:,} of {outcome.acked:,} acked writes lost ({expected}: {verdict}); "
            f"unsynced bytes dropped per node and cut: {cuts}{gone}"
        )
    Path(args.out).mkdir(parents=True, exist_ok=True)
    record = {"profile": name, "about": profile.about, "source": profile.source}
    record["outcomes"] = [asdict(outcome) for outcome in outcomes]
    (Path(args.out) / PROFILE_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
    reproduced = all(outcome.as_expected for outcome in outcomes)
    print(f"{name}: {'reproduced' if reproduced else 'not reproduced'}")
    return 0 if reproduced else 1
