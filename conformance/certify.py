"""`jetcheck certify`: run the conformance suite against one target and summarise it by area."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

from jetcheck.config import OPTIONS, Config, add_option_arguments, cli_flag, resolve
from jetcheck.fixtures import children
from jetcheck.fixtures.binaries import system_binary, wheel_binary
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.target import Target, probe
from jetcheck.records import JUNIT_FILE, RESULTS_FILE, STATUSES, SUBJECTS, CheckResult, read_results

CHECKS_PACKAGE = "jetcheck.conformance.checks"
CERTIFY_INI = Path(__file__).with_name("certify.ini")
CLI_OPTIONS = [o for o in OPTIONS if o.name != "out"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "certify",
        help="run the conformance suite against a server",
        description="Run the conformance suite; write results.jsonl, run.json and junit.xml into --out. "
        "Exit 0 only if every MUST check passed or was na. Arguments after -- go to pytest.",
    )
    add_option_arguments(parser, [option.name for option in CLI_OPTIONS])
    parser.add_argument("--out", default="jetcheck-results", help="result directory (default: %(default)s)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then extra pytest arguments")
    parser.set_defaults(func=certify_command)


def resolve_from_args(args: argparse.Namespace) -> Config:
    return resolve(cli={o.name: getattr(args, o.name, None) for o in OPTIONS}, env=os.environ, flag=cli_flag)


def preflight(cfg: Config) -> None:
    """Fail with one clear line before pytest starts: unknown version, missing binary, unreachable target."""
    if cfg.server in ("local", "cluster"):
        wheel_binary(cfg.server_version, Path(cfg.server_cache) if cfg.server_cache else None)
    elif cfg.server == "system":
        system_binary()
    else:
        asyncio.run(_probe_url(cfg))


async def _probe_url(cfg: Config) -> None:
    nc = await Target(cfg.server, cfg.credentials()).connect()
    try:
        await probe(nc)
    finally:
        await nc.close()


def pytest_environment(cfg: Config) -> dict[str, str]:
    """The resolved options as JETCHECK_* variables: secrets travel in the environment, not on a command line."""
    env = dict(os.environ)
    for option in OPTIONS:
        env[option.env] = str(getattr(cfg, option.name))
    return env


def run_checks(cfg: Config, pytest_args: list[str]) -> int:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS_FILE, JUNIT_FILE):
        (out / stale).unlink(missing_ok=True)
    extra = pytest_args[1:] if pytest_args[:1] == ["--"] else pytest_args
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(CERTIFY_INI),
        "--rootdir",
        str(CERTIFY_INI.parent),
        "--pyargs",
        CHECKS_PACKAGE,
        "--junitxml",
        str(out / JUNIT_FILE),
        "-q",
        *extra,
    ]
    # pytest stops on an interrupt forwarded to it, deleting the run's streams and stopping its server first
    return children.run(command, env=pytest_environment(cfg))


def summarise(results: list[CheckResult]) -> str:
    by_area: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        by_area[result.area][result.status] += 1
    width = max([len("area"), *(len(a) for a in by_area)])
    lines = [f"{'area':<{width}}  " + "  ".join(f"{s:>5}" for s in STATUSES)]
    for area in sorted(by_area):
        lines.append(f"{area:<{width}}  " + "  ".join(f"{by_area[area][s]:>5}" for s in STATUSES))
    total = Counter(r.status for r in results)
    lines.append(f"{'total':<{width}}  " + "  ".join(f"{total[s]:>5}" for s in STATUSES))
    for result in results:
        if result.status in ("fail", "error"):
            first = result.message.strip().splitlines()[0] if result.message.strip() else ""
            lines.append(f"{result.status.upper():5} {result.level:6} {result.subject:6} {result.id}: {first}")
    lines.append("")
    for subject in SUBJECTS:
        of_subject = [r for r in results if r.subject == subject]
        if of_subject:
            whose = (
                "the server alone"
                if subject == "server"
                else f"with client {of_subject[0].client['name']} {of_subject[0].client['version']}"
            )
            lines.append(
                f"{subject} rules ({whose}): {len(of_subject)} checks, "
                f"{len(must_failures(of_subject))} MUST checks neither pass nor na"
            )
    return "\n".join(lines)


def must_failures(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.level == "MUST" and r.status not in ("pass", "na")]


def certify_command(args: argparse.Namespace) -> int:
    cfg = resolve_from_args(args)
    preflight(cfg)
    pytest_status = run_checks(cfg, args.pytest_args)
    results_path = Path(cfg.out) / RESULTS_FILE
    if not results_path.exists():
        raise TargetError(f"no checks ran (pytest exit status {pytest_status}); see the output above")
    results = list(read_results(results_path))
    print()
    print(summarise(results))
    failing = must_failures(results)
    print(f"\nresults: {results_path}  ({len(results)} checks; {len(failing)} MUST checks neither pass nor na)")
    return 1 if failing else 0
