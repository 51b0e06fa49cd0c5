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
import os
import secrets
import sys
from pathlib import Path

from jetcheck.errors import ConfigError
from jetcheck.fault_kinds import LOSS_FAULTS, PROCESS_FAULTS
from jetcheck.fixtures import children
from jetcheck.records import RESULTS_FILE

from .packet_loss import NAMESPACE_ENV, in_own_namespace, own_namespace, what_is_missing
from .profiles import PROFILES, run_profile
from .run import run_once

# `jetcheck durability --help`
DESCRIPTION = (
    "Run paced publishers (with and without message ids) and a durable consumer against a local "
    "cluster while a seeded schedule kills (-9) and pauses (SIGSTOP) nodes (and, when asked, damages their "
    "stores, or cuts, stalls, slows or drops packets of their route links); heal, read the stream from every "
    "node and judge each durability.* rule. Writes results.jsonl, run.json and history/ into --out. Exit 0 when "
    "every rule held, 1 when one did not."
)


def validate(args: argparse.Namespace) -> None:
    """A described cluster is the user's: refused without --allow-faults (before its file is read or anything is
    reached), and only faults its commands can do."""
    if args.profile and args.server.kind == "cluster-file":
        raise ConfigError(f"--profile {args.profile} starts clusters of its own: not for --server {args.server}")
    if args.replicas and args.replicas > args.nodes:
        raise ConfigError(f"--replicas {args.replicas} needs at least as many nodes (--nodes {args.nodes})")
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


def run(args: argparse.Namespace) -> int:
    validate(args)
    if args.profile:
        return run_profile(PROFILES[args.profile], args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    if set(args.faults) & set(LOSS_FAULTS) and not in_own_namespace():
        if missing := what_is_missing():
            raise ConfigError(f"--faults {','.join(sorted(set(args.faults) & set(LOSS_FAULTS)))}: {missing}")
        return _in_own_namespace(args, seed)
    out = Path(args.out)
    outcome = run_once(args, seed, out)
    for result in outcome.results:
        print(f"{result.status.upper():4} {result.id}: {result.message.split('; seed ')[0]}")
    print(f"\nresults: {out / RESULTS_FILE}  ({outcome.schedule})")
    print("\n".join(outcome.verdict.lines()))
    return outcome.verdict.exit_code()


def _in_own_namespace(args: argparse.Namespace, seed: int) -> int:
    """Run this same command, with its seed drawn, inside a network namespace made for it, where packets can be
    dropped without touching the machine's own firewall; the namespace and all in it are gone at the end."""
    low, high = args.hold
    argv = ["durability", "--server", args.server, "--server-version", args.server_version,
            "--duration", f"{args.duration:g}s", "--seed", str(seed), "--nodes", str(args.nodes),
            "--faults", ",".join(args.faults), "--hold", f"{low:g}-{high:g}", "--sync-interval", args.sync_interval,
            "--replicas", str(args.replicas or args.nodes),
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
