"""Writing the report: index.html (self-contained), summary.md and the tables as CSV and Parquet.

Both documents are Jinja2 templates (templates/report.html, templates/summary.md) filled from one view of the
results built here, so they say the same things in the same order: the verdict, what was tested, results by area,
failures, then load. HTML is autoescaped; every value reaches a template as plain text or numbers.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from jetcheck.reports import charts, conformance_view
from jetcheck.reports.cells import frame_table, number
from jetcheck.reports.client_comparison import clients_side_by_side
from jetcheck.reports.client_releases import client_release_grids
from jetcheck.reports.content import ReportContent
from jetcheck.reports.durability_report import anomaly_rows, durability_view
from jetcheck.reports.load_view import load_view


@functools.cache
def _templates() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("jetcheck.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["number"] = number
    environment.filters["md"] = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    return environment


def document(content: ReportContent) -> dict[str, Any]:
    """Everything the report says, formatted, in the order it says it: the input of both templates."""
    several = conformance_view.several(content)
    conformance = content.conformance
    has_results = not conformance.results.empty
    servers = sorted({f"nats-server {v}" for v in conformance.results["server_version"] if v})
    subjects = servers + sorted({c for c in conformance.results["client"] if c})
    comparison = None
    if content.comparison is not None:
        load = content.comparison.load.copy()
        if not load.empty:
            load["change"] = (load["change"] * 100).round(1).astype(str) + " %"
        comparison = {
            "baseline": content.comparison.baseline,
            "regressions": content.comparison.regressions,
            "load": frame_table("comparison-load", load, {"op": "operation"}),
            "conformance": frame_table("comparison-conformance", content.comparison.conformance, {"id": "rule"}),
        }
    return {
        "title": "JetStream "
        + " and ".join(
            part for part, present in (("conformance", has_results), ("load", bool(content.loads))) if present
        )
        + " report"
        if has_results or content.loads
        else "jetcheck report",
        "subtitle": " · ".join(subjects),
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "inputs": content.inputs,
        "several": several,
        "verdict": conformance_view.verdict_block(content),
        "tested": conformance_view.tested(content),
        "has_results": has_results,
        "areas": conformance_view.areas(content, several) if has_results else None,
        "areas_chart": charts.conformance_bars(conformance.summary) if has_results else "",
        "failures": conformance_view.failures(content, several),
        "disagreements": conformance_view.disagreements(content, several),
        "not_applicable": conformance_view.not_applicable(content, several),
        "clients": conformance_view.clients(content) if has_results else [],
        "client_grids": client_release_grids(conformance.results) if has_results else [],
        "matrix": frame_table("matrix", conformance.matrix, {"id": "rule"})
        if len(conformance.matrix.columns) > 4
        else None,
        "loads": [load_view(load, n, several) for n, load in enumerate(content.loads)],
        "load_clients": clients_side_by_side(content.loads),
        "comparison": comparison,
        "notes": content.notes,
        "durability": durability_view(content.durability),
    }


def render_html(content: ReportContent, built: dict[str, Any] | None = None) -> str:
    """index.html's text; `built` is `document(content)` when the caller made it already (the charts are costly)."""
    return _templates().get_template("report.html").render(built or document(content))


def render_markdown(content: ReportContent, built: dict[str, Any] | None = None) -> str:
    return _templates().get_template("summary.md").render(built or document(content))


def report_tables(content: ReportContent) -> dict[str, pd.DataFrame]:
    conformance = content.conformance
    tables = {
        "conformance_results": conformance.results,
        "conformance_summary": conformance.summary,
        "conformance_matrix": conformance.matrix,
    }
    names = ("totals", "throughput", "latency", "latency_over_time", "distribution", "errors", "samples")
    for name in (*names, "processes", "offered"):
        frames = [
            getattr(load, name).assign(result_set=load.label) for load in content.loads if not getattr(load, name).empty
        ]
        if frames:
            tables[f"load_{name}"] = pd.concat(frames, ignore_index=True)
    if content.durability:
        tables["durability_anomalies"] = pd.DataFrame(anomaly_rows(content.durability))
    if content.comparison is not None:
        tables["comparison_load"] = content.comparison.load
        tables["comparison_conformance"] = content.comparison.conformance
    return tables


def _write_table(frame: pd.DataFrame, folder: Path, name: str) -> None:
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = frame[column].map(lambda v: v if isinstance(v, str) else json.dumps(v, default=str))
    frame.to_csv(folder / f"{name}.csv", index=False)
    frame.to_parquet(folder / f"{name}.parquet", index=False)


def write_report(content: ReportContent, out: Path) -> Path:
    """Write index.html, summary.md and tables/ under `out`; return the path of index.html."""
    tables_dir = out / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in report_tables(content).items():
        _write_table(frame, tables_dir, name)
    built = document(content)  # one document for both: rendering its charts is most of this step's time
    (out / "summary.md").write_text(render_markdown(content, built), encoding="utf-8")
    index = out / "index.html"
    index.write_text(render_html(content, built), encoding="utf-8")
    return index
