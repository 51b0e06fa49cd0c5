"""Named durability profiles (`jetcheck durability --profile NAME [--seeds K]`): a schedule (faults, timing,
workload, server releases) aimed at one of Jepsen's NATS findings, run over K seeds on each release, so that a
timing-dependent finding is a rate ("reproduced in 4 of 5 seeds"), not one run's luck.

PROFILES is the table: name -> settings. A profile with `parts` runs those profiles in turn (`jepsen`: every profile
of the table, as Jepsen's table of findings). Each run is an ordinary durability run (durability.run) in its own
folder, `OUT/<profile>/<release>-<sync_interval>/seed-<seed>/`, which `jetcheck report --in` reads; the profile's
own summary goes to `OUT/profile.json` and to the terminal.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jetcheck.fault_kinds import HOLD_S
from jetcheck.option import register_choices

from .checker import ACKED_SURVIVE, CONSUMER_SURVIVES, REPLICAS_AGREE, SINGLE_LEADER, STREAM_AVAILABLE, summary
from .run import RunOutcome, run_once
from .session import StreamPlan

FIRST_SEED = 1  # a profile's seeds start here unless --seed says otherwise, so its figures can be run again
ISSUES = "https://github.com/nats-io/nats-server/issues/"


@dataclass(frozen=True)
class Profile:
    """One schedule aimed at one finding; `reproduced_by`: the rules whose failure in a run is that finding."""

    finding: str
    issue: str
    versions: tuple[str, ...]
    reproduced_by: tuple[str, ...]
    faults: tuple[str, ...] = ("kill-all",)
    duration_s: float = 60.0
    hold_s: tuple[float, float] = HOLD_S
    nodes: int = 3
    replicas: int = 0  # 0: every node
    sync_intervals: tuple[str, ...] = ("default",)
    first_fault_s: tuple[float, float] | None = None  # the first fault drawn from this window after stream creation
    consumer_after_first_fault: bool = False  # the stream's creation is the meta group's last entry at that fault
    parts: tuple[str, ...] = ()  # a profile made of other profiles
    seeds: int = 5  # unless --seeds says otherwise; fewer where a run that reproduces waits out long recovery bounds


# nats-io/nats-server#6888: the meta group's last entry is lost by a kill -9 of every node before the meta snapshot;
# 15 s of writes, the kill 1-3 s after the stream's creation, on the last release with the loss and the first without
KILL_ALL_AFTER_CREATION = {
    "issue": f"{ISSUES}6888",
    "versions": ("2.10.22", "2.10.23"),
    "duration_s": 15.0,
    "first_fault_s": (1.0, 3.0),
}

PROFILES: dict[str, Profile] = {
    # when the last entry is the stream's creation, the stream is forgotten (by hand: scripts/stream_vanish.py)
    "stream-vanish": Profile(
        finding="a whole R3 stream forgotten after kill -9 of every node soon after its creation (2.10.20-2.10.22)",
        reproduced_by=(STREAM_AVAILABLE,),
        consumer_after_first_fault=True,
        **KILL_ALL_AFTER_CREATION,
    ),
    # when it is the durable consumer's creation, the consumer is
    "consumer-vanish": Profile(
        finding="a durable consumer forgotten after kill -9 of every node soon after its creation (2.10.20-2.10.22)",
        reproduced_by=(CONSUMER_SURVIVES,),
        **KILL_ALL_AFTER_CREATION,
    ),
    # nats-io/nats-server#7549 (bit flips), truncation (no issue of its own), #7556 (snapshot damage plus kills)
    "corruption-minority": Profile(
        finding="acknowledged writes lost, replicas diverged or split-brain after .blk bit flips, truncation or "
        "snapshot damage on a minority (2.12.1)",
        issue=f"{ISSUES}7549",
        versions=("2.12.1",),
        reproduced_by=(ACKED_SURVIVE, REPLICAS_AGREE, SINGLE_LEADER, STREAM_AVAILABLE),
        faults=("bitflip-minority", "truncate-minority", "snapshot-minority", "bitflip-one-kill-all", "kill-leader"),
        duration_s=60.0,
        nodes=5,
        replicas=5,
    ),
    # nats-io/nats-server#7556: a node that lost its meta snapshot (as a corrupt one is removed) cleans up the stream
    # as orphaned; here every fault deletes the newest snapshots of a minority, on 5 nodes
    "orphaned-stream": Profile(
        finding="stream data deleted as orphaned after snapshot damage plus kills (2.12.1; partly fixed in 2.14.0)",
        issue=f"{ISSUES}7556",
        versions=("2.12.1",),
        reproduced_by=(STREAM_AVAILABLE, REPLICAS_AGREE, ACKED_SURVIVE),
        faults=("snapshot-minority",),
        duration_s=60.0,
        nodes=5,
        replicas=5,
        seeds=3,  # a reproducing run waits out the recovery bounds (60 s + 30 s + 30 s): ~190 s a seed
    ),
    # nats-io/nats-server#7567: one node's power loss (on the power-loss layer) beside pauses, partitions and a
    # leader kill, each held past the election timeout, on 5 nodes
    "split-brain-partitions": Profile(
        finding="split-brain: two leaders of one group, or replicas that disagree, after one node's power loss "
        "with pauses or partitions (2.12.1)",
        issue=f"{ISSUES}7567",
        versions=("2.12.1",),
        reproduced_by=(SINGLE_LEADER, REPLICAS_AGREE, ACKED_SURVIVE),
        faults=("power-cut-one", "pause-minority", "partition-leader", "kill-leader", "partition-minority"),
        duration_s=70.0,
        hold_s=(5.0, 7.0),  # past the election timeout, so leadership moves while the old leader is cut off
        nodes=5,
        replicas=5,
    ),
    # nats-io/nats-server#7564: what nats-server wrote but did not fsync is lost by a power cut of every node; the
    # same seed with the default sync_interval (fsync every 2 min) and with `always` (durability.power_loss)
    "power-loss-sync": Profile(
        finding="acknowledged writes lost under coordinated power loss with the default sync_interval, none with "
        "sync_interval always (every release)",
        issue=f"{ISSUES}7564",
        versions=("2.15.1",),
        reproduced_by=(ACKED_SURVIVE,),
        faults=("power-cut-all",),
        duration_s=30.0,
        sync_intervals=("default", "always"),
        seeds=2,
    ),
    # nats-io/nats-server#7545: acknowledged writes lost when kills and a peer removal come in quick succession
    # (Jepsen's membership nemesis: the node killed, its store wiped, `nats server raft peer-remove`, back under a
    # fresh name); here those removals, alone and right after kill -9 of a minority, beside kills of a minority
    # and of every node, on 5 nodes with an R5 stream as Jepsen ran it
    "membership-change": Profile(
        finding="acknowledged writes lost under membership changes (peer remove, a node back as a new server) "
        "beside kills (2.12.1)",
        issue=f"{ISSUES}7545",
        versions=("2.12.1", "2.15.1"),
        reproduced_by=(ACKED_SURVIVE, REPLICAS_AGREE),
        faults=("member-cycle-kill-minority", "member-cycle", "kill-minority", "kill-all"),
        duration_s=50.0,
        nodes=5,
        replicas=5,
        seeds=3,  # two releases: ~75 s a seed
    ),
}
# every profile of the table above, in one command: Jepsen's table of findings, measured
PROFILES["jepsen"] = Profile(
    finding="every Jepsen NATS 2.12.1 finding with a profile",
    issue="https://jepsen.io/analyses/nats-2.12.1",
    versions=(),
    reproduced_by=(),
    parts=tuple(PROFILES),
)
register_choices("profile", lambda: list(PROFILES))  # --profile's choices, in the option table


@dataclass(frozen=True)
class Setting:
    """One release and sync_interval of a profile, and what its seeds showed."""

    profile: str
    version: str
    sync_interval: str
    seeds: list[int]
    reproduced: list[int]  # the seeds whose run failed one of the profile's rules
    failing: dict[str, list[int]]  # every rule that failed in some seed -> those seeds
    evidence: list[str]  # per reproducing seed: the failing rules' examples and the fault timeline
    durations_s: list[float]


def _run_args(args: argparse.Namespace, profile: Profile, version: str, sync_interval: str) -> argparse.Namespace:
    return argparse.Namespace(
        **{
            **vars(args),
            "server_version": version,
            "sync_interval": sync_interval,
            "faults": list(profile.faults),
            "duration": profile.duration_s,
            "hold": profile.hold_s,
            "nodes": profile.nodes,
            "replicas": profile.replicas or None,
        }
    )


def _evidence(seed: int, outcome: RunOutcome, rules: tuple[str, ...]) -> str:
    """The failing rules' counts and examples, what became of the acked writes, and the faults as done."""
    shown = [rule for rule in rules if not outcome.findings[rule].holds]
    if ACKED_SURVIVE not in shown:
        shown.append(ACKED_SURVIVE)
    said = " | ".join(f"{rule}: {summary(outcome.findings[rule])}" for rule in shown)
    origin = min((fault.start_ns for fault in outcome.faults), default=0)
    started = outcome.run_info.get("schedule") or [{}]
    offset = float(started[0].get("at_s", 0.0))  # the first fault's planned time into the workload
    timeline = ", ".join(
        f"{fault.kind} of {'+'.join(fault.nodes)} at {offset + (fault.start_ns - origin) / 1e9:.1f} s "
        f"for {(fault.healed_ns - fault.start_ns) / 1e9:.1f} s"
        for fault in outcome.faults
    )
    cuts = outcome.run_info.get("power_cuts") or []
    dropped = (
        "; unsynced bytes dropped per node and cut: " + ", ".join(f"{cut['bytes']:,}" for cut in cuts) if cuts else ""
    )
    logged = outcome.run_info.get("server_log_lines") or {}
    told = "; ".join(f"{node} logged {len(lines)}, first: {lines[0]}" for node, lines in logged.items())
    return f"seed {seed}: {said}; faults: {timeline or 'none'}{dropped}" + (f"; server logs: {told}" if told else "")


def run_setting(args: argparse.Namespace, name: str, version: str, sync_interval: str, seeds: list[int]) -> Setting:
    profile = PROFILES[name]
    reproduced, failing, evidence, durations = [], {}, [], []
    for seed in seeds:
        out = Path(args.out) / name / f"{version}-{sync_interval}" / f"seed-{seed}"
        started = time.monotonic()
        stream = StreamPlan(consumer_after_first_fault=profile.consumer_after_first_fault)
        outcome = run_once(_run_args(args, profile, version, sync_interval), seed, out, stream, profile.first_fault_s)
        durations.append(round(time.monotonic() - started, 1))
        for rule, finding in outcome.findings.items():
            if not finding.holds:
                failing.setdefault(rule, []).append(seed)
        if any(not outcome.findings[rule].holds for rule in profile.reproduced_by):
            reproduced.append(seed)
            evidence.append(_evidence(seed, outcome, profile.reproduced_by))
        said = "reproduced" if seed in reproduced else "not reproduced"
        print(f"{name} {version} sync_interval {sync_interval} seed {seed}: {said} ({durations[-1]:g} s)", flush=True)
    return Setting(name, version, sync_interval, seeds, reproduced, failing, evidence, durations)


def run_profile(profile: Profile, args: argparse.Namespace) -> int:
    """Every setting of `profile` (or of each of its parts) over the seeds; prints and writes the table. Exit 0
    when every rule held in every run, 1 when one did not (a reproduced finding is a failed rule)."""
    first = args.seed if args.seed is not None else FIRST_SEED
    names = list(profile.parts) or [next(name for name, known in PROFILES.items() if known is profile)]
    started = time.monotonic()
    settings: list[Setting] = []
    timings: dict[str, float] = {}
    for name in names:
        part = PROFILES[name]
        seeds = list(range(first, first + (args.seeds or part.seeds)))
        part_started = time.monotonic()
        for version in part.versions:
            for sync_interval in part.sync_intervals:
                settings.append(run_setting(args, name, version, sync_interval, seeds))
        timings[name] = round(time.monotonic() - part_started, 1)
    print("\n" + "\n".join(table_lines(settings, timings)))
    summary_file = Path(args.out) / "profile.json"
    summary_file.write_text(
        json.dumps(
            {
                "profiles": {name: asdict(PROFILES[name]) for name in names},
                "settings": [asdict(setting) for setting in settings],
                "durations_s": timings,
                "total_s": round(time.monotonic() - started, 1),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    print(f"\nsummary: {summary_file}; each run's results under {Path(args.out)}/<profile>/<release>-<sync>/seed-N")
    return 1 if any(setting.failing for setting in settings) else 0


def table_lines(settings: list[Setting], timings: dict[str, float]) -> list[str]:
    """Per finding and setting: reproduced or not, in how many seeds, the evidence, and the issue."""
    lines = []
    for name, took in timings.items():
        profile = PROFILES[name]
        lines.append(f"{name}: {profile.finding}  [{profile.issue}]  ({took:g} s)")
        for setting in (s for s in settings if s.profile == name):
            count, total = len(setting.reproduced), len(setting.seeds)
            verdict = f"reproduced in {count} of {total} seeds" if count else f"not reproduced in {total} seeds"
            other = {rule: seeds for rule, seeds in setting.failing.items() if rule not in profile.reproduced_by}
            also = "; other rules failing: " + ", ".join(f"{r} (seeds {s})" for r, s in other.items()) if other else ""
            lines.append(f"  nats-server {setting.version}, sync_interval {setting.sync_interval}: {verdict}{also}")
            lines += [f"    {line}" for line in setting.evidence]
    return lines
