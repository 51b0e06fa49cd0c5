"""One durability run (`jetcheck durability`, and each seed of a profile): the cluster started, the session run
beside its fault schedule, the history judged rule by rule and written into the out folder (results.jsonl, run.json,
history/), the cluster removed however the run ends."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from jetcheck import __version__
from jetcheck.conformance.catalog import rules_checked_by
from jetcheck.errors import ConfigError
from jetcheck.fault_kinds import MEMBER_FAULTS, NETWORK_FAULTS, POWER_FAULTS
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.records import RESULTS_FILE, RUN_FILE, CheckResult, utc_now, write_results
from jetcheck.verdict import RunVerdict, judge

from . import history as kinds
from .checker import Finding, check_history, summary
from .described_cluster import DescribedClusterProvider
from .history import HISTORY_DIR, write_history
from .membership import CLUSTER_CONFIG as MEMBERSHIP_CONFIG
from .power_loss import PowerLossDisks
from .power_loss import what_is_missing as power_loss_missing
from .schedule import describe, plan_faults
from .session import StreamPlan, run_session
from .workload import WorkloadPlan

LOGS_DIR = "logs"  # each node's server log, copied before the cluster's folders are removed
# what nats-server logs when it throws state away or finds it damaged (#7556's "Detected orphaned stream ..., will
# cleanup", a corrupt snapshot or block, a stream reset)
TELLING = re.compile(r"orphaned|corrupt|will cleanup|[Rr]esetting stream|checksum", re.IGNORECASE)
TELLING_KEPT = 5
SYNC_ALWAYS = "jetstream {\n  sync_interval: always\n}\n"


@dataclass(frozen=True)
class RunOutcome:
    findings: dict[str, Finding]
    results: list[CheckResult]
    run_info: dict
    verdict: RunVerdict
    schedule: str  # the run in one line: seed, nodes, replicas, sync_interval, schedule
    faults: list[kinds.FaultRecord]  # as done: which nodes, when


def _provider(args: argparse.Namespace, partitionable: bool) -> ClusterProvider | DescribedClusterProvider:
    if args.server.kind == "cluster-file":
        provider = DescribedClusterProvider(Path(args.server.path))
        if any(kind.startswith("pause") for kind in args.faults) and not provider.can_pause:
            raise ConfigError(f"{provider.path}: the pause-* faults need pause and resume commands for every node")
        return provider
    binary = wheel_binary(args.server_version, Path(args.server_cache) if args.server_cache else None)
    return ClusterProvider(binary, size=args.nodes, config=cluster_config(args), partitionable=partitionable)


def cluster_config(args: argparse.Namespace) -> str:
    """The nats-server configuration text of every node of jetcheck's own cluster: sync_interval always when asked
    for, and a system account when a member-* fault will ask for peer removals (other runs' clusters stay as they
    were)."""
    config = SYNC_ALWAYS if args.sync_interval == "always" else ""
    if any(kind in MEMBER_FAULTS for kind in args.faults):
        config += MEMBERSHIP_CONFIG
    return config


def wants_power_loss_layer(args: argparse.Namespace) -> bool:
    """Whether the nodes' stores go on the power-loss layer: asked for, or needed by a power-cut-* fault."""
    return args.power_loss_layer or any(kind in POWER_FAULTS for kind in args.faults)


def _keep_logs(provider: ClusterProvider, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for node in provider.nodes:
        if node.log_path.is_file():
            shutil.copyfile(node.log_path, folder / f"{node.name}.log")


def telling_lines(folder: Path) -> dict[str, list[str]]:
    """Per node, the lines of its kept log where the server says it dropped or distrusted state (TELLING), first
    few of each; what a failed rule's evidence can point at."""
    found: dict[str, list[str]] = {}
    for log in sorted(folder.glob("*.log")):
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if TELLING.search(line)]
        if lines:
            found[log.stem] = lines[:TELLING_KEPT]
    return found


def run_once(
    args: argparse.Namespace,
    seed: int,
    out: Path,
    stream: StreamPlan | None = None,
    first_at_s: tuple[float, float] | None = None,
) -> RunOutcome:
    """One run as `args` says, with `seed`, into `out`; `stream` and `first_at_s` are a profile's (the stream's
    consumer created late, the first fault right after the stream's creation)."""
    power = wants_power_loss_layer(args)
    if power and (missing := power_loss_missing()):
        raise ConfigError(f"the power-loss layer (power-cut-* faults, --power-loss-layer): {missing}")
    out.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS_FILE, RUN_FILE):
        (out / stale).unlink(missing_ok=True)
    # routes through relays only when the schedule may cut them: every other run's cluster is routed as before
    provider = _provider(args, partitionable=any(kind in NETWORK_FAULTS for kind in args.faults))
    size = len(provider.nodes)
    replicas = min(args.replicas or size, size)
    stream = StreamPlan(replicas, stream.consumer_after_first_fault if stream else False)
    sync_interval = args.sync_interval if isinstance(provider, ClusterProvider) else "as configured"
    # a described cluster's nodes are the user's (no store of ours): --power-loss-layer is refused for it (cli)
    layer = (
        PowerLossDisks([node.store_dir for node in provider.nodes], remove=provider.workdir)
        if power
        else contextlib.nullcontext()
    )
    plan = plan_faults(seed, args.faults, args.duration, size, args.hold, first_at_s)
    workload = WorkloadPlan(duration_s=args.duration)
    where = f"nats-server {args.server_version}" if isinstance(provider, ClusterProvider) else str(provider.path)
    print(f"jetcheck durability: seed {seed}, {size} nodes, R{replicas} stream, {where}")
    print(f"schedule: {describe(plan)}", flush=True)
    started_at, started = utc_now(), time.monotonic()
    with layer as disks:  # mounted before the nodes start, taken down once they are stopped
        try:
            provider.start()
            up = ", ".join(node.url for node in provider.nodes)
            print(f"cluster up: {up}; writing for {args.duration:g} s", flush=True)
            users_cluster = isinstance(provider, DescribedClusterProvider)
            observed = asyncio.run(
                run_session(provider.nodes, plan, workload, seed, provider.links, users_cluster, stream, disks)
            )
        finally:
            if isinstance(provider, ClusterProvider):  # the servers' own account of the run, kept past their folders
                _keep_logs(provider, out / LOGS_DIR)
            provider.stop()  # a local cluster: every node, and its folder; a described one: what was faulted, healed
    findings = check_history(observed.history)
    history_dir = out / HISTORY_DIR
    seen = observed.history
    for records, kind in (
        (seen.publishes, kinds.PublishRecord),
        (seen.deliveries, kinds.DeliveryRecord),
        ([message for messages in seen.reads.values() for message in messages], kinds.StoredMessage),
        (observed.faults, kinds.FaultRecord),
        (seen.leaders, kinds.LeaderClaim),
        (seen.deletes, kinds.DeleteRecord),
        (seen.purges, kinds.PurgeRecord),
    ):
        write_history(history_dir, records, kind)
    on_layer = ", power-loss layer" if power else ""
    schedule = (
        f"seed {seed}, {size} nodes, R{replicas}, sync_interval {sync_interval}{on_layer}, schedule {describe(plan)}"
    )
    client = {"name": "nats-py", "version": metadata.version("nats-py")}
    results = []
    of_run = {"server_version": provider.version, "client": client, "check": "jetcheck durability"}
    of_run["run_id"] = f"durability-{seed}"
    duration_s = round(time.monotonic() - started, 3)
    for rule_id, rule in sorted(rules_checked_by("durability").items()):
        finding = findings[rule_id]
        status = "pass" if finding.holds else "fail"
        message = f"{summary(finding)}; {schedule}"
        figures = {**finding.figures, "seed": seed}
        results.append(
            CheckResult(
                **rule.result_fields(),
                **of_run,
                status=status,
                duration_s=duration_s,
                message=message,
                observed=figures,
            )
        )
    write_results(out / RESULTS_FILE, results)
    run_info = {
        "kind": "durability",
        "server": {
            "version": provider.version,
            "nodes": size,
            "replicas": replicas,
            "sync_interval": sync_interval,
            "power_loss_layer": power,
        },
        "client": client,
        "options": {
            "seed": seed,
            "faults": args.faults,
            "duration_s": args.duration,
            "nodes": size,
            "replicas": replicas,
            "hold_s": args.hold,
            "consumer_after_first_fault": stream.consumer_after_first_fault,
        },
        "counts": {
            "publishes": len(observed.history.publishes),
            "deliveries": len(observed.history.deliveries),
            "faults": len(observed.faults),
            "leader_claims": len(observed.history.leaders),
            "deletes": len(observed.history.deletes),
            "purges": len(observed.history.purges),
        },
        "schedule": [vars(fault) for fault in plan],
        "recovery_s": observed.recovery_s,
        "power_cuts": observed.power_cuts,  # per node of each power cut: the unsynced files, bytes, pages dropped
        # how the final read was judged, so that `jetcheck report` re-reads history/ as the checker did
        "final_read": {
            "reference": observed.history.reference,
            "unreadable": observed.history.unreadable,
            "node_states": observed.history.node_states,
            "stream_error": observed.history.stream_error,
            "consumer_error": observed.history.consumer_error,
        },
        "server_log_lines": telling_lines(out / LOGS_DIR),
        "jetcheck_version": __version__,
        "started_at": started_at,
        "finished_at": utc_now(),
        "duration_s": duration_s,
        "collected": len(results),
    }
    (out / RUN_FILE).write_text(json.dumps(run_info, indent=2, default=list), encoding="utf-8")
    return RunOutcome(findings, results, run_info, judge(results, run_info), schedule, observed.faults)
