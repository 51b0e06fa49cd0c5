"""``jetcheck load --master`` and ``jetcheck load --worker``: one load run over several hosts, on Locust's own
distributed mode.

The master is `jetcheck load` as on one host (it starts or reaches the server, claims the prefix, writes the run
folder), with Locust's ``--master --expect-workers N`` instead of ``--processes``; it prints the command each worker
runs. A worker runs Locust's ``--worker`` against it with a folder of its own and nothing else: Locust hands every
worker the master's options with its spawn message, so the scenario, rate, client, run id and prefix are the
master's, and the open-loop rate is split over the users of all workers (each user's share is the total over the
users of the whole fleet).
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path

from jetcheck.errors import ConfigError
from jetcheck.fixtures.target import Credentials
from jetcheck.options import CREDENTIAL_OPTIONS, CREDENTIAL_VARIABLES, credential_environment

from .fleet import WORKER_DIR_VARIABLE

WORKERS_WAIT_S = 600  # how long a master waits for its workers to connect before it gives up
# A worker stops when its master quits, or by itself once the master's heartbeat has been silent for a minute
# (Locust's MASTER_HEARTBEAT_TIMEOUT); this only bounds a worker whose Locust hangs.
WORKER_DEADLINE_S = 24 * 3600.0
WILDCARD_HOSTS = ("", "*", "0.0.0.0", "::")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
ROLE_OPTIONS = {  # options that belong to one side only: option -> (the side's option, its flag)
    "expect_workers": ("load_master", "--master"),
    "master_bind_host": ("load_master", "--master"),
    "master_bind_port": ("load_master", "--master"),
    "master_host": ("worker", "--worker"),
}


def validate_roles(args) -> None:
    """--master needs --expect-workers, --worker --master-host; neither runs Locust's --processes."""
    if args.load_master and args.expect_workers is None:
        raise ConfigError("--master needs --expect-workers N: the workers to wait for")
    if args.worker and not args.master_host:
        raise ConfigError("--worker needs --master-host: the address the master listens on")
    if (args.load_master or args.worker) and args.processes is not None:
        raise ConfigError("--processes runs workers on this host; with --master or --worker each worker is a host's")
    for name, (role, flag) in ROLE_OPTIONS.items():
        default = {"master_bind_host": "127.0.0.1", "master_bind_port": 5557}.get(name)
        if not getattr(args, role) and getattr(args, name) not in (None, default):
            raise ConfigError(f"--{name.replace('_', '-')} applies to {flag} only")


def master_arguments(args) -> list[str]:
    """Locust's options for the master of `args.expect_workers` workers, bound where the user said."""
    return [
        "--master",
        "--expect-workers",
        str(args.expect_workers),
        "--expect-workers-max-wait",
        str(WORKERS_WAIT_S),
        "--master-bind-host",
        args.master_bind_host,
        "--master-bind-port",
        str(args.master_bind_port),
    ]


def worker_command(args) -> str:
    """The command a worker runs for this master: its address, nothing about the run."""
    host = args.master_bind_host
    if host in WILDCARD_HOSTS:  # listening everywhere: the workers reach it by its name
        host = socket.getfqdn()
    return f"jetcheck load --worker --master-host {host} --master-port {args.master_bind_port}"


def worker_locust_command(locustfile: Path, args) -> list[str]:
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile),
        "--worker",
        "--master-host",
        args.master_host,
        "--master-port",
        str(args.master_port),
    ]


def worker_folder(args) -> Path:
    return Path(args.out or Path("jetcheck-load-worker") / ("worker-" + secrets.token_hex(4)))


def worker_environment(args, folder: Path) -> dict[str, str]:
    """The worker's environment: its own folder, and the credentials given to this command (the server's URL
    comes from the master)."""
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARIABLES}
    env.update(credential_environment(Credentials(**{name: getattr(args, name) for name in CREDENTIAL_OPTIONS})))
    env[WORKER_DIR_VARIABLE] = str(folder.resolve())
    return env
