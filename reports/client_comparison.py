"""Load runs of different clients side by side: throughput and latency of each client at its offered rate.

Shown when the report's load runs were made by more than one client (`jetcheck report --in runA --in runB`, each a
`jetcheck load --client X` run): one row per run, its publishing operation (the scenario's first operation when
nothing publishes), the steady window's ok/s and its response-time percentiles (from the intended send: the
coordinated-omission-free figure) in ms.
"""

from __future__ import annotations

from typing import Any

from jetcheck.reports.cells import Cell, Table, milliseconds, number
from jetcheck.reports.load_report import LoadTables

HEADERS = ["run", "client", "scenario", "offered rate", "operation", "ok / s", "p50", "p99", "p99.9"]
PERCENTILES = ("p50", "p99", "p99_9")
PUBLISHING = ("publish", "kv_put")


def client_name(info: dict[str, Any]) -> str:
    """A load run's client with its exact version ("nats.go 1.55.0"); runs from before load.json named the client
    were nats-py runs."""
    client = info.get("client") or {}
    name = client.get("name") or "nats-py"
    version = client.get("version") or (client.get("nats-py", "") if name == "nats-py" else "")
    return f"{name} {version}".strip()


def _operation(load: LoadTables) -> str:
    ops = list(load.totals["op"])
    return next((op for op in PUBLISHING if op in ops), ops[0])


def clients_side_by_side(loads: list[LoadTables]) -> Table | None:
    """The table, or None unless the load runs name more than one client."""
    logged = [load for load in loads if not load.totals.empty]
    if len({client_name(load.info) for load in logged}) < 2:
        return None
    rows = []
    for load in logged:
        op = _operation(load)
        totals = load.totals[load.totals["op"] == op].iloc[0]
        latency = load.latency[(load.latency["op"] == op) & (load.latency["metric"] == "response")]
        count = int(latency["count"].iloc[0]) if not latency.empty else 0
        rate = load.info.get("rate")
        cells = [
            Cell(load.label),
            Cell(client_name(load.info)),
            Cell(str(totals["scenario"])),
            Cell(f"{number(rate)} / s" if rate else "closed loop", "num"),
            Cell(op),
            Cell(number(round(float(totals["ok_per_s"]), 1)), "num"),
        ]
        for column, quantile in zip(PERCENTILES, (0.5, 0.99, 0.999), strict=True):
            shown = count * (1 - quantile) >= 1  # a percentile the sample count can show
            cells.append(Cell(milliseconds(float(latency[column].iloc[0])) if shown else "", "num"))
        rows.append(cells)
    return Table("clients-load", HEADERS, rows)
