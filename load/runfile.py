"""``<out>/load.json``: what a load run was (scenario, mode, rate, users, processes, server, times, counts)."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from jetcheck.records import LOAD_FILE, OPS_DIR, SAMPLES_DIR

from .scenarios import LoadSettings

CLOCK_NOTE = (
    "all times are wall-clock ns (time.time_ns) taken on one machine, so publisher and consumer "
    "processes share a clock; runs across machines need synchronised clocks for e2e_ns and "
    "cross-process ordering"
)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def describe(
    settings: LoadSettings,
    *,
    processes: int,
    duration_s: float | None,
    server_url: str,
    server_version: str,
    tls: bool,
    start_ns: int,
    end_ns: int,
    server: dict[str, Any],
    deleted: list[str],
    monitor: dict[str, Any],
    workers_drained: list[dict],
    expected_workers: int,
    load_cpu_s: dict[str, float],
    process_roles: dict[str, list[str]],
    client: dict[str, str] | None = None,
) -> dict[str, Any]:
    """load.json's content; `client` names the client that ran the load (name, version, runtime), nats-py's own
    by default."""
    spec = settings.spec
    return {
        "run_id": settings.run_id,
        "scenario": settings.scenario,
        "scenario_title": spec.title,
        "mode": settings.mode,
        "rate": settings.rate or None,  # total target ops/s over all publishing users; null in closed mode
        "rate_per_publisher": settings.rate_per_publisher or None,
        "users": settings.users,
        "publishers": settings.publishers,
        "consumers": settings.users - settings.publishers if spec.consumer else 0,
        "processes": processes,
        "duration_s": duration_s,
        "payload_size": settings.payload_size,
        "max_inflight": settings.max_inflight,
        "server_url": server_url,
        "server_version": server_version,
        "tls": tls,  # the transport the run's connections used (every one follows the same TLS rule)
        "start_ns": start_ns,
        "end_ns": end_ns,
        "clock": CLOCK_NOTE,
        "prefix": settings.prefix,
        "stream": settings.stream,
        "replicas": settings.replicas,
        "server": server,
        "deleted": deleted,
        "monitor": monitor,
        "workers_drained": workers_drained,
        "expected_workers": expected_workers,
        "load_cpu_s": load_cpu_s,  # CPU seconds each load process spent from test start to drained, by pid
        "process_roles": process_roles,  # the roles (publisher, consumer) each load process's users played, by pid
        "ops_dir": OPS_DIR,
        "samples_dir": SAMPLES_DIR,
        "overflow": "open-loop ops not sent because max_inflight were outstanding: ok=false, error_class=Overflow",
        "client": {
            **(client or {"name": "nats-py", "version": _version("nats-py")}),
            "nats-py": _version("nats-py"),
            "locust": _version("locust"),
            "pid": os.getpid(),
        },
    }


def write(out_dir: Path, run: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOAD_FILE
    tmp = path.with_name("." + LOAD_FILE + ".part")
    tmp.write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def read(out_dir: Path) -> dict[str, Any]:
    return json.loads((Path(out_dir) / LOAD_FILE).read_text())
