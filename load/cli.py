"""``jetcheck load``: run one scenario headless with Locust against the embedded server (or a nats:// URL).

The command starts the server when --server is local/system, runs Locust as a subprocess bounded in time
(``-t`` plus a hard deadline), then prints an exact summary from the op log and checks it against what the server
stored. With --master it runs Locust's master for workers on other hosts, and --worker runs one of them
(jetcheck.load.fleet_cli). The same locustfile runs under Locust's web UI: ``locust -f $(python -c 'import
jetcheck.load.locustfile as m; print(m.__file__)') --jetcheck-scenario publish-async --jetcheck-server
nats://127.0.0.1:4222``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from jetcheck.errors import ConfigError
from jetcheck.fixtures import children
from jetcheck.fixtures.cleanup import claim_prefix
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import free_port
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials, Target, probe
from jetcheck.options import (
    CREDENTIAL_OPTIONS,
    CREDENTIAL_VARIABLES,
    MAX_DEFAULT_PROCESSES,
    credential_environment,
    is_managed,
)
from jetcheck.records import LOAD_FILE
from jetcheck.redact import redact_url

from . import fleet_cli, runfile, summary
from .driven_users import check_driven_scenario, is_driven, prepare_driver
from .monitor import default_monitor_url, reachable
from .scenarios import LoadSettings, scenario, setup, teardown
from .settings import load_settings, locust_handover

LOCUSTFILE = Path(__file__).with_name("locustfile.py")  # a path, not an import: Locust monkey-patches on import
GRACE_S = 120.0  # setup (prefill), drain and teardown on top of the run time
LOCUST_STOP_S = 30.0  # past the deadline, for Locust to write what it has


DESCRIPTION = __doc__  # laid out by hand (jetcheck.cli COMMANDS: laid_out)


def validate(args) -> float:
    """Check the options together and fill in the defaults that depend on others (users, processes, server
    version); nothing is started. The run time in seconds (0 for a worker: its master decides). Calling it again
    changes nothing."""
    fleet_cli.validate_roles(args)
    if args.worker:
        return 0.0
    if args.scenario is None:
        raise ConfigError("--scenario is required (only a --worker takes it from its master)")
    spec = scenario(args.scenario)
    args.scenario = spec.name  # an alias (publish) runs as the scenario it names
    if is_driven(args.client):
        check_driven_scenario(args.client, spec.name)
    elif (release := args.client.release) and release != metadata.version("nats-py"):
        raise ConfigError(
            f"load runs nats-py {metadata.version('nats-py')}, the release installed with jetcheck, not {release} "
            f"(`jetcheck certify --client nats-py@{release}` certifies that one)"
        )
    if args.rate and args.max:  # on the command line argparse says so; here a variable gave one of them
        raise ConfigError("--rate and --max exclude each other: give one (open or closed loop)")
    if args.rate and not spec.paced:
        raise ConfigError(
            f"{spec.name} consumes a prefilled stream as fast as it can; --rate applies to scenarios "
            "that publish (e.g. mixed, end-to-end)"
        )
    both_roles = bool(spec.publisher and spec.consumer)
    if args.users is None:
        # enough users for every consumer plus a publisher, and for every process or worker asked for
        args.users = max(args.consumers + 1 if both_roles else 1, args.processes or 1, args.expect_workers or 1)
    if args.load_master and args.users < args.expect_workers:
        raise ConfigError("--users cannot be fewer than --expect-workers (each worker runs whole users)")
    if args.load_master:
        args.processes = 1  # this host runs only the master; --processes was refused with --master
    if args.processes is None:
        args.processes = default_processes(spec, args.users)
    if args.processes > args.users:
        raise ConfigError("--processes cannot exceed --users (each process runs whole users)")
    if both_roles and args.consumers >= args.users:
        raise ConfigError(f"{spec.name} needs publishers too: --users must exceed --consumers")
    if args.monitor and is_managed(args.server):
        raise ConfigError(f"--monitor applies to a URL --server; jetcheck monitors the {args.server} server itself")
    return args.duration


def default_processes(spec, users: int) -> int:
    """One process, or one per user when the scenario both publishes and consumes.

    Users of one process share its asyncio loop, and nats-py's fetch takes loop turns per message: next to a
    publisher a consumer gets a fraction of the turns it needs, and its rate and end-to-end latency would then
    measure our loop, not the server. Locust hands users to processes in turn, so only one user per process keeps
    every publisher and consumer apart."""
    if spec.publisher and spec.consumer:
        return max(1, min(users, MAX_DEFAULT_PROCESSES))
    return 1


def locust_command(args, duration_s: float, out: Path, handed: list[str]) -> list[str]:
    """Locust's command: its own options, then the locustfile's `handed` arguments (`locust_handover`)."""
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--only-summary",
        "-u",
        str(args.users),
        "-r",
        str(args.users),
        "-t",
        f"{duration_s:g}s",
        "--stop-timeout",
        "30",
        "--csv",
        str(out / "locust"),
        "--html",
        str(out / "locust.html"),
        *handed,
    ]
    if args.load_master:
        cmd += fleet_cli.master_arguments(args)
    elif args.processes > 1:
        # the master and its workers talk over loopback on a free port: not Locust's 5557 on every interface,
        # which another load on the machine may hold
        port = str(free_port())
        cmd += ["--processes", str(args.processes), "--master-bind-host", "127.0.0.1", "--master-bind-port", port]
        cmd += ["--master-host", "127.0.0.1", "--master-port", port]
    return cmd


def run_values(args, server_url: str, run_id: str, out: Path, monitor: str) -> dict[str, Any]:
    """The resolved options and what this run decided, by option name: what the run's settings are built from
    (`load_settings`) and the locustfile's options are handed (`locust_handover`, with the server's version)."""
    return {
        **vars(args),
        "server": server_url,
        "run_id": run_id,
        "out": str(out),
        "monitor": monitor,
        "users_total": args.users,
        "prefix_claimed": True,  # by _prepare, before Locust starts
    }


async def _prepare(target: Target, settings: LoadSettings, clean_previous: bool) -> str:
    """Probe the server, claim the run prefix (refused when the target already uses it) and create (and prefill)
    what the scenario needs before Locust's run time starts; the locustfile's own setup at test start then finds
    everything in place (it is idempotent)."""
    nc = await target.connect()
    try:
        version = (await probe(nc)).version
        if deleted := await claim_prefix(nc, settings.prefix, clean_previous):
            print(
                f"jetcheck load: deleted what an earlier run with prefix {settings.prefix} left: {', '.join(deleted)}"
            )
        try:
            await setup(settings, nc)
        except BaseException:
            with contextlib.suppress(Exception):  # the setup's own error is the one to report
                await teardown(settings, nc)
            raise
        return version
    finally:
        await nc.close()


async def _teardown(target: Target, settings: LoadSettings) -> None:
    nc = await target.connect()
    try:
        await teardown(settings, nc)
    finally:
        await nc.close()


def run(args) -> int:
    duration_s = validate(args)
    if args.worker:
        return run_worker(args)
    if args.monitor and not reachable(args.monitor):
        raise TargetError(f"--monitor {args.monitor} does not answer /varz: no server samples could be recorded")
    credentials = Credentials(**{name: getattr(args, name) for name in CREDENTIAL_OPTIONS})
    run_id = "load-" + secrets.token_hex(4)
    out = Path(args.out or Path("jetcheck-load") / run_id)
    if is_driven(args.client):
        prepare_driver(args.client)  # built before anything starts: a missing tool is one line, exit 2
    provider = provider_for(args.server, args.server_version, credentials)
    try:
        target = provider.start()  # inside the try: interrupted while it starts, the server is stopped too
        monitor = target.process.monitor_url if target.process else (args.monitor or default_monitor_url(target.url))
        values = run_values(args, target.url, run_id, out, monitor)
        settings = load_settings(values)
        version = asyncio.run(_prepare(target, settings, args.clean_previous))
        out.mkdir(parents=True, exist_ok=True)  # only once the target has answered
        if not target.process and not args.monitor and not reachable(monitor):
            print(f"jetcheck load: nothing answers at {monitor}: no server samples (give --monitor URL)", flush=True)
        handed, handed_environment = locust_handover({**values, "server_version": version})
        cmd = locust_command(args, duration_s, out, handed)
        # the server's URL (which may carry credentials) and the credentials travel in the environment, not on the
        # command line; a server the suite started itself takes none
        env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARIABLES}
        env.update(handed_environment)
        if not target.managed:
            env.update(credential_environment(credentials))
        print(
            f"jetcheck load: {args.scenario} through {args.client} against {redact_url(target.url)} "
            f"(nats-server {version}) for {duration_s:g}s -> {out}",
            flush=True,
        )
        deadline_s = duration_s + GRACE_S
        if args.load_master:
            print(
                f"jetcheck load: waiting for {args.expect_workers} worker(s); on each worker host run:\n"
                f"  {fleet_cli.worker_command(args)}",
                flush=True,
            )
            deadline_s += fleet_cli.WORKERS_WAIT_S
            if target.managed and args.master_bind_host not in fleet_cli.LOOPBACK_HOSTS:
                print(
                    f"jetcheck load: the {args.server} server listens on this host's loopback only: workers on other "
                    "hosts cannot reach it (give --server nats://HOST:PORT)",
                    flush=True,
                )
        try:
            rc = _run_bounded(cmd, env, out / "locust.log", deadline_s)
        finally:
            if not (out / LOAD_FILE).exists() and not target.managed:
                # Locust died (or was interrupted) before its own teardown: delete what the run created
                asyncio.run(_teardown(target, settings))
    finally:
        provider.stop()
    if not (out / LOAD_FILE).exists():
        raise TargetError(f"Locust exited with {rc} without writing {out / LOAD_FILE}; see {out / 'locust.log'}")
    run_info = runfile.read(out)
    result = summary.summarize(out)
    (out / "summary.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(summary.format_summary(run_info, result), flush=True)
    return 0 if all(item["pass"] for item in result["checks"]) else 1


def run_worker(args) -> int:
    """A Locust worker for the master at --master-host, in a folder of its own; its log goes to the master."""
    folder = fleet_cli.worker_folder(args)
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"jetcheck load: worker for the master at {args.master_host}:{args.master_port} (every setting comes from "
        f"the master) -> {folder}",
        flush=True,
    )
    cmd = fleet_cli.worker_locust_command(LOCUSTFILE, args)
    env = fleet_cli.worker_environment(args, folder)
    rc = _run_bounded(cmd, env, folder / "locust.log", fleet_cli.WORKER_DEADLINE_S)
    print(f"jetcheck load: worker done (Locust exited with {rc}); its log went to the master", flush=True)
    return rc


def _run_bounded(cmd: list[str], env: dict[str, str], log_path: Path, deadline_s: float) -> int:
    """Run Locust in its own session; past the deadline, or when the command is interrupted, it is stopped."""
    started = time.monotonic()
    with (
        open(log_path, "wb") as log,
        # interrupted, Locust is asked with SIGTERM: its graceful stop (teardown, load.json) without first
        # rendering the HTML report as it does on SIGINT, which takes seconds
        children.running(
            cmd, ask=signal.SIGTERM, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        ) as proc,
    ):
        try:
            return proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            if not children.stop(proc, LOCUST_STOP_S):  # Locust quits (and writes what it has) on SIGINT
                raise TargetError(f"Locust did not stop within {time.monotonic() - started:.0f}s") from None
            return proc.returncode
