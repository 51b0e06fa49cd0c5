"""load.json's settings as the report's readable (setting, value) rows: dates, seconds and summaries instead of raw
numbers and JSON."""

from __future__ import annotations

import numbers
from collections import Counter
from typing import Any

from jetcheck.reports.cells import number, plural, seconds, when
from jetcheck.reports.conformance_report import redact_text

# load.json keys shown under a plainer name, in this order; keys not listed follow, named by their own words.
SETTING_NAMES = {
    "scenario": "scenario",
    "scenario_title": "scenario is",
    "mode": "load model",
    "rate": "target rate",
    "target_rate": "target rate",
    "rate_per_publisher": "rate per publisher",
    "users": "users",
    "publishers": "publishers",
    "consumers": "consumers",
    "processes": "processes",
    "process_roles": "process roles",
    "payload_size": "payload",
    "max_inflight": "most operations in flight",
    "duration_s": "duration",
    "start_ns": "started",
    "end_ns": "ended",
    "server_url": "server",
    "server_version": "server version",
    "replicas": "stream replicas",
    "stream": "stream",
    "client": "client",
    "load_cpu_s": "load CPU",
    "monitor": "server monitoring",
    "server": "server state at the end",
    "workers_drained": "workers drained",
    "prefix": "run prefix",
    "run_id": "run id",
    "deleted": "deleted at the end",
    "overflow": "overflow",
    "clock": "clock",
    "clock_bound_ns": "clock error bound",
    "workers": "Locust workers",
    "complete": "every worker's log arrived",
    "incomplete_workers": "workers whose log is incomplete",
}
# file layout, not settings of the run
HIDDEN_SETTINGS = frozenset({"ops_dir", "samples_dir"})


def per_process(values: dict[str, Any], unit: str = "") -> str:
    """A mapping keyed by process id summarised in one line, never one row per pid."""
    if all(isinstance(v, numbers.Real) for v in values.values()):
        busiest = max(values, key=lambda pid: values[pid])
        total = sum(values.values())
        return (
            f"{number(round(total, 1))}{unit} over {plural(len(values), 'process')} "
            f"(at most {number(values[busiest])}{unit}, pid {busiest})"
        )
    if all(isinstance(v, list) for v in values.values()):
        roles = Counter(" + ".join(sorted(v)) if v else "idle" for v in values.values())
        return f"{plural(len(values), 'process')}: " + ", ".join(f"{n} {role}" for role, n in roles.most_common())
    return f"{plural(len(values), 'process')}"


def setting_value(key: str, value: Any) -> str:
    if isinstance(value, str):
        return redact_text(value) if "://" in value else value
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: ""}[value]
    if isinstance(value, numbers.Real):
        if key.endswith("_ns"):
            return when(value) if value > 1e14 else f"{number(value / 1e6)} ms"
        if key.endswith("_s"):
            return seconds(value)
        if "rate" in key:
            return f"{number(value)} ops/s"
        if key.endswith("_size"):
            return f"{number(value)} bytes"
        return number(value)
    if isinstance(value, dict):
        if value and all(str(k).isdigit() for k in value):
            return per_process(value, " s" if key.endswith("_s") else "")
        parts = []
        for name, inner in value.items():
            if name == "pid":
                continue
            parts.append(f"{name.replace('_', ' ')} {setting_value(name, inner)}")
        return ", ".join(parts)
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            rows = sum(int(v.get("rows", 0)) for v in value)
            return number(len(value)) + (f", {number(rows)} operations logged" if rows else "")
        return ", ".join(setting_value(key, v) for v in value) or "none"
    return str(value)


def load_settings(info: dict[str, Any]) -> list[tuple[str, str]]:
    """load.json as (setting, readable value) rows: dates, seconds and summaries instead of raw numbers and JSON."""
    ordered = [k for k in SETTING_NAMES if k in info] + [k for k in info if k not in SETTING_NAMES]
    rows = []
    for key in ordered:
        if key in HIDDEN_SETTINGS:
            continue
        value = info[key]
        name = SETTING_NAMES.get(key, key.replace("_", " "))
        if key == "mode" and value in ("open", "closed"):
            rows.append((name, f"{value} loop" + (" (sent on schedule)" if value == "open" else " (sent on reply)")))
        elif key == "duration_s":
            rows.append((name, seconds(value)))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            # e.g. the server's stream and consumer state: one row each, not one nested dump
            rows += [(f"{name}: {part}", setting_value(part, inner)) for part, inner in value.items()]
        else:
            rows.append((name, setting_value(key, value)))
    return rows
