"""The report's view of each load run: its settings, throughput, latency percentiles, charts and errors."""

from __future__ import annotations

from typing import Any

from jetcheck.reports import charts
from jetcheck.reports.cells import Cell, Table, cell, frame_table, milliseconds, number
from jetcheck.reports.load_report import LoadTables
from jetcheck.reports.load_settings import load_settings

# (column of LoadTables.latency, header, quantile: a percentile needs at least 1/(1-q) samples to mean anything)
LATENCY_COLUMNS = (
    ("min", "min", 0.0),
    ("p50", "p50", 0.5),
    ("p90", "p90", 0.9),
    ("p99", "p99", 0.99),
    ("p99_9", "p99.9", 0.999),
    ("p99_99", "p99.99", 0.9999),
    ("max", "max", 0.0),
)
METRIC_NAMES = {"response": "response time", "service": "service time", "send_delay": "send delay", "e2e": "end-to-end"}


def latency_table(load: LoadTables, several_scenarios: bool, index: int) -> Table:
    """Latency percentiles in ms; a percentile beyond what the sample count can show (q > 1 - 1/n) is blank."""
    headers = [*(["scenario"] if several_scenarios else []), "operation", "measure", "samples"]
    headers += [header for _, header, _ in LATENCY_COLUMNS]
    rows = []
    for row in load.latency.to_dict("records"):
        if row["metric"] == "send_delay" and not row["max"]:
            continue  # deliveries are not sent on a schedule: their send delay is zero by construction
        count = int(row["count"])
        cells = [*([Cell(row["scenario"])] if several_scenarios else []), Cell(row["op"])]
        cells += [Cell(METRIC_NAMES.get(row["metric"], row["metric"])), cell(count)]
        for column, _, quantile in LATENCY_COLUMNS:
            shown = count and (quantile == 0.0 or count * (1 - quantile) >= 1)
            cells.append(Cell(milliseconds(float(row[column])) if shown else "", "num"))
        rows.append(cells)
    return Table(f"latency-{index}", headers, rows)


def steady_window(load: LoadTables) -> dict[str, Any]:
    """The steady window the load figures cover (LoadTables.window: start_ns, end_ns, definition, ...), or {} from
    an aggregation that measures the whole run."""
    return getattr(load, "window", None) or {}


def workers_table(load: LoadTables, index: int) -> Table | None:
    """A fleet's workers (load.json's `workers`) with what each did: None for a run on one host."""
    workers = [w for w in load.info.get("workers") or [] if isinstance(w, dict)]
    if not workers:
        return None
    by_process = {int(row["process"]): row for row in load.processes.to_dict("records")}
    headers = ["worker", "host", "pid", "client", "operations", "ok", "ok in steady window", "ok / s"]
    headers += ["clock offset, ms", "± ms", "log"]
    rows = []
    for worker in workers:
        did = by_process.get(worker.get("pid"), {})
        clock = worker.get("clock") or {}
        start = clock.get("start") or {}
        client = worker.get("client") or {}
        bound = clock.get("bound_ns")
        rows.append(
            [
                Cell(str(worker.get("worker", ""))),
                Cell(str(worker.get("host", ""))),
                Cell(str(worker.get("pid", "")), "num"),
                Cell(" ".join(str(client.get(key, "")) for key in ("name", "version")).strip()),
                cell(int(did.get("ops", 0))),
                cell(int(did.get("ok", 0))),
                cell(int(did.get("steady_ok", 0))),
                cell(float(did.get("ok_per_s", 0.0))),
                Cell(f"{start['offset_ns'] / 1e6:+.3f}" if "offset_ns" in start else "", "num"),
                Cell(f"{bound / 1e6:.3f}" if isinstance(bound, int) else "", "num"),
                Cell("whole", "pass") if worker.get("complete") else Cell("incomplete", "fail"),
            ]
        )
    return Table(f"workers-{index}", headers, rows)


def load_view(load: LoadTables, index: int, several: bool) -> dict[str, Any]:
    settings = Table(f"settings-{index}" if index else "settings", ["setting", "value"], [])
    settings.rows = [[Cell(name), Cell(value)] for name, value in load_settings(load.info)]
    view: dict[str, Any] = {
        "label": load.label if several else "",
        "settings": settings,
        "caveats": load.caveats,
        "notes": load.notes,
        "logged": not load.totals.empty,
    }
    if load.totals.empty:
        return view
    several_scenarios = load.totals["scenario"].nunique() > 1
    totals = load.totals.drop(columns=[] if several_scenarios else ["scenario"])
    window = steady_window(load)
    view.update(
        span_s=load.span_s,
        steady=bool(window) and not window.get("whole_run"),
        measured=window.get("definition")
        or f"ok / s: successful operations divided by the run's {number(round(load.span_s, 1))} s, from the first "
        "intended send to the last reply.",
        totals=frame_table(
            f"totals-{index}",
            totals,
            {"op": "operation", "ops": "operations", "steady_ok": "ok in steady window", "ok_per_s": "ok / s"},
        ),
        latency=latency_table(load, several_scenarios, index),
        timeline=charts.timeline(load),
        distribution=charts.distribution(load),
        errors=None,
        workers=workers_table(load, index),
        offered=charts.offered_vs_achieved(load) if not load.offered.empty else "",
    )
    if not load.errors.empty:
        by_class = load.errors.groupby(["scenario", "op", "error_class", "error_code"], as_index=False)["count"].sum()
        if not several_scenarios:
            by_class = by_class.drop(columns=["scenario"])
        view["errors"] = frame_table(
            f"errors-{index}", by_class, {"op": "operation", "error_class": "error", "error_code": "code"}
        )
    return view
