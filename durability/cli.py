"""`jetcheck durability`: does every acknowledged write survive crashes, pauses and partitions of a cluster's nodes?

One run: start a local cluster (3 or 5 nodes, the stream replicated on all of them), run the recorded workload
(durability.workload) while a seeded fault schedule kills, pauses and partitions nodes (durability.schedule), heal
everything, check that the stream and its durable consumer answer, drain the consumer, read the stream from every
node (durability.session), and judge the history (durability.checker) rule by rule into ordinary results
(results.jsonl, run.json) that `jetcheck report` and jetcheck.verdict read. The history stays in the out folder.

The cluster's processes and folders are removed when the run ends, however it ends (failure, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import time
from importlib import metadata
from pathlib import Path

from jetcheck import __version__
from jetcheck.conformance.catalog import rules_checked_by
from jetcheck.errors import ConfigError
from jetcheck.fault_kinds import LOSS_FAULTS, NETWORK_FAULTS, POWER_FAULTS, PROCESS_FAULTS
from jetcheck.fixtures import children
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.options import add_command
from jetcheck.records import RESULTS_FILE, RUN_FILE, CheckResult, utc_now, write_results
from jetcheck.verdict import judge

from .checker import check_history, summary
from .described_cluster import DescribedClusterProvider
from .history import HISTORY_DIR, DeliveryRecord, FaultRecord, PublishRecord, StoredMessage, write_history
from .packet_loss import NAMESPACE_ENV, in_own_namespace, own_namespace, what_is_missing
from .power_loss import PowerLossDisks
from .power_loss import what_is_missing as power_loss_missing
from .profiles import PROFILES, run_profile
from .schedule import describe, plan_faults
from .session import run_session
from .workload import WorkloadPlan

SYNC_ALWAYS = "jetstream {\n  sync_interval: always\n}\n"


def register(subparsers: argparse._SubParsersAction) -> None:
    add_command(
        subparsers,
        "durability",
        run=durability_command,
        validate=validate,
        help="certify that acknowledged writes survive crashes, pauses and partitions of a cluster's nodes",
        description="Run paced publishers (with and without message ids) and a durable consumer against a local "
        "cluster while a seeded schedule kills (-9) and pauses (SIGSTOP) nodes (and, when asked, damages their "
        "stores, or cuts, stalls, slows or drops packets of their route links); heal, read the stream from every "
        "node and judge each durability.* rule. Writes results.jsonl, run.json and history/ into --out. Exit 0 when "
        "every rule held, 1 when one did not.",
    )


def validate(args: argparse.Namespace) -> None:
    """A described cluster is the user's: refused without --allow-faults (before its file is read or anything is
    reached), and only faults its commands can do. A profile must be one of PROFILES."""
    if args.profile and args.profile not in PROFILES:
        raise ConfigError(f"--profile {args.profile}: no such profile (profiles: {', '.join(PROFILES)})")
    if args.server.kind != "cluster-file":
        return
    if not args.allow_faults:
        raise ConfigError(
            f"--server {args.server} is your cluster: jetcheck durability kills and restarts its nodes only with "
            "--allow-faults"
        )
    if needs_local := sorted(set(args.faults) - set(PROCESS_FAULTS)):
        raise ConfigError(f"--faults {','.join(needs_local)} need a cluster jetcheck starts (--server cluster)")
    if args.power_loss_layer:
        raise ConfigError("--power-loss-layer needs a cluster jetcheck starts (--server cluster)")


def wants_power_loss_layer(args: argparse.Namespace) -> bool:
    """Whether the nodes' stores go on the power-loss layer: asked for, or needed by a power-cut-* fault."""
    return args.power_loss_layer or any(kind in POWER_FAULTS for kind in args.faults)


def _provider(args: argparse.Namespace, partitionable: bool) -> ClusterProvider | DescribedClusterProvider:
    if args.server.kind == "cluster-file":
        provider = DescribedClusterProvider(Path(args.server.path))
        if any(kind.startswith("pause") for kind in args.faults) and not provider.can_pause:
            raise ConfigError(f"{provider.path}: the pause-* faults need pause and resume commands for every node")
        return provider
    binary = wheel_binary(args.server_version, Path(args.server_cache) if args.server_cache else None)
    config = SYNC_ALWAYS if args.sync_interval == "always" else ""
    return ClusterProvider(binary, size=args.nodes, config=config, partitionable=partitionable)


def durability_command(args: argparse.Namespace) -> int:
    validate(args)
    if args.profile:
        return run_profile(args, durability_command)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    power = wants_power_loss_layer(args)
    if power and (missing := power_loss_missing()):
        raise ConfigError(f"the power-loss layer (power-cut-* faults, --power-loss-layer): {missing}")
    if set(args.faults) & set(LOSS_FAULTS) and not in_own_namespace():
        if missing := what_is_missing():
            raise ConfigError(f"--faults {','.join(sorted(set(args.faults) & set(LOSS_FAULTS)))}: {missing}")
        return _in_own_namespace(args, seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS_FILE, RUN_FILE):
        (out / stale).unlink(missing_ok=True)
    # routes through relays only when the schedule may cut them: every other run's cluster is routed as before
    provider = _provider(args, partitionable=any(kind in NETWORK_FAULTS for kind in args.faults))
    size = len(provider.nodes)
    sync_interval = args.sync_interval if isinstance(provider, ClusterProvider) else "as configured"
    stores = [node.store_dir for node in provider.nodes]
    layer = PowerLossDisks(stores, remove=provider.workdir) if power else contextlib.nullcontext()
    plan = plan_faults(seed, args.faults, args.duration, size, args.hold)
    workload = WorkloadPlan(duration_s=args.duration)
    where = f"nats-server {args.server_version}" if isinstance(provider, ClusterProvider) else str(provider.path)
    print(f"jetcheck durability: seed {seed}, {size} nodes, {where}")
    print(f"schedule: {describe(plan)}", flush=True)
    started_at, started = utc_now(), time.monotonic()
    with layer as disks:  # mounted before the nodes start, taken down once they are stopped
        try:
            provider.start()
            up = ", ".join(node.url for node in provider.nodes)
            print(f"cluster up: {up}; writing for {args.duration:g} s", flush=True)
            users_cluster = isinstance(provider, DescribedClusterProvider)
            observed = asyncio.run(
                run_session(provider.nodes, plan, workload, seed, provider.links, users_cluster, disks=disks)
            )
        finally:
            provider.stop()  # a local cluster: every node, and its folder; a described one: what was faulted, healed
    findings = check_history(observed.history)
    history_dir = out / HISTORY_DIR
    write_history(history_dir, observed.history.publishes, PublishRecord)
    write_history(history_dir, observed.history.deliveries, DeliveryRecord)
    write_history(history_dir, [m for ms in observed.history.reads.values() for m in ms], StoredMessage)
    write_history(history_dir, observed.faults, FaultRecord)
    on_layer = ", power-loss layer" if power else ""
    schedule = f"seed {seed}, {size} nodes, sync_interval {sync_interval}{on_layer}, schedule {describe(plan)}"
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
            "sync_interval": sync_interval,
            "power_loss_layer": power,
        },
        "client": client,
        "options": {
            "seed": seed,
            "faults": args.faults,
            "duration_s": args.duration,
            "nodes": size,
            "hold_s": args.hold,
        },
        "counts": {
            "publishes": len(observed.history.publishes),
            "deliveries": len(observed.history.deliveries),
            "faults": len(observed.faults),
        },
        "schedule": [vars(fault) for fault in plan],
        "recovery_s": observed.recovery_s,
        "power_cuts": observed.power_cuts,  # per node of each power cut: the unsynced files, bytes, pages dropped
        # how the final read was judged, so that `jetcheck report` re-reads history/ as the checker did
        "final_read": {
            "reference": observed.history.reference,
            "unreadable": observed.history.unreadable,
            "node_states": observed.history.node_states,
        },
        "jetcheck_version": __version__,
        "started_at": started_at,
        "finished_at": utc_now(),
        "collected": len(results),
    }
    (out / RUN_FILE).write_text(json.dumps(run_info, indent=2, default=list), encoding="utf-8")
    verdict = judge(results, run_info)
    for result in results:
        print(f"{result.status.upper():4} {result.id}: {result.message.split('; seed ')[0]}")
    print(f"\nresults: {out / RESULTS_FILE}  ({schedule})")
    print("\n".join(verdict.lines()))
    return verdict.exit_code()


def _in_own_namespace(args: argparse.Namespace, seed: int) -> int:
    """Run this same command, with its seed drawn, inside a network namespace made for it, where packets can be
    dropped without touching the machine's own firewall; the namespace and all in it are gone at the end."""
    low, high = args.hold
    argv = ["durability", "--server", args.server, "--server-version", args.server_version,
            "--duration", f"{args.duration:g}s", "--seed", str(seed), "--nodes", str(args.nodes),
            "--faults", ",".join(args.faults), "--hold", f"{low:g}-{high:g}", "--sync-interval", args.sync_interval,
            "--out", str(Path(args.out).resolve())]  # fmt: skip
    if args.power_loss_layer:
        argv.append("--power-loss-layer")
    if args.server_cache:
        argv += ["--server-cache", str(Path(args.server_cache).resolve())]
    name = f"jetcheck-{secrets.token_hex(4)}"
    print(f"jetcheck durability: packet loss asked for: the run goes into network namespace {name}", flush=True)
    with own_namespace(name) as enter:
        env = {**os.environ, NAMESPACE_ENV: name}
        try:
            return children.run([*enter, sys.executable, "-m", "jetcheck.cli", *argv], env=env)
        except KeyboardInterrupt:  # SIGTERM too: the run inside was passed the signal, cleaned up and said so
            return 130
