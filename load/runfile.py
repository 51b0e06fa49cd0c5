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


def fleet_clock_note(bound_ns: int) -> str:
    return (
        "intended, sent and acked times of every worker are on the master's clock: each worker's offset was "
        f"measured at the start and the end over Locust's channel and removed, to within {bound_ns / 1e6:.3f} ms "
        "(half the best round trip); e2e_ns from a publisher on one host to a consumer on another is corrected by "
        "both offsets and holds to within twice that"
    )


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def versions() -> dict[str, str]:
    """The releases of what runs the load in this process."""
    return {name: _version(name) for name in ("jetcheck", "nats-py", "locust")}


def client_entry(client: dict[str, str] | None) -> dict[str, str]:
    """The client that ran the load: a driven client's description, else nats-py's."""
    return client or {"name": "nats-py", "version": _version("nats-py")}


def fleet_bound_ns(workers: list[dict[str, Any]]) -> int | None:
    """The largest clock error bound of the workers on hosts of their own; None when there are none (one host)."""
    bounds = [
        w["clock"]["bound_ns"]
        for w in workers
        if w.get("own_folder") and (w.get("clock") or {}).get("bound_ns") is not None
    ]
    return max(bounds) if bounds else None


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
    workers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """load.json's content; `client` names the client that ran the load (name, version, runtime), nats-py's own
    by default; `workers` the master's workers (jetcheck.load.fleet.FleetRecord.describe): a run is complete when
    every worker that took part drained and its whole log arrived intact."""
    spec = settings.spec
    workers = workers or []
    bound = fleet_bound_ns(workers)
    missing = [w["worker"] for w in workers if not w["complete"]]
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
        "clock": fleet_clock_note(bound) if bound is not None else CLOCK_NOTE,
        "clock_bound_ns": bound,
        "workers": workers,
        "complete": not missing,
        "incomplete_workers": missing,
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
            **client_entry(client),
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
