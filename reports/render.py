"""Writing the report: index.html (self-contained), summary.md and the tables as CSV and Parquet."""

from __future__ import annotations

import datetime as dt
import html
import json
import numbers
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import numpy as np
import pandas as pd

from jetcheck.reports import charts
from jetcheck.reports.compare import Comparison
from jetcheck.reports.conformance_report import ConformanceTables, redact_text
from jetcheck.reports.load_report import LoadTables

LATENCY_COLUMNS = ("min", "p50", "p90", "p99", "p99_9", "p99_99", "max")
STATUS_CLASSES = ("pass", "fail", "error", "na", "skip", "regression", "fixed")


@dataclass
class ReportContent:
    inputs: list[str]
    conformance: ConformanceTables
    loads: list[LoadTables]
    comparison: Comparison | None = None
    notes: list[str] = field(default_factory=list)


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _cell(value: Any, column: str) -> str:
    if isinstance(value, float) and pd.isna(value):
        return "<td></td>"
    if isinstance(value, bool | np.bool_):
        return f'<td class="{"regression" if value else ""}">{"yes" if value else ""}</td>'
    if isinstance(value, numbers.Number):
        text = f"{value:,.3f}" if isinstance(value, float) and not float(value).is_integer() else f"{value:,.0f}"
        return f'<td class="num">{text}</td>'
    text = str(value)
    css = text if text in STATUS_CLASSES else ""
    if column in ("server_log", "observed") and text:
        return f"<td><details><summary>show</summary><pre>{_esc(text)}</pre></details></td>"
    return f'<td class="{css}">{_esc(text)}</td>' if css else f"<td>{_esc(text)}</td>"


def html_table(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    if frame is None or frame.empty:
        return "<p><em>none</em></p>"
    columns = columns or list(frame.columns)
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    rows = []
    for record in frame[columns].itertuples(index=False):
        rows.append("<tr>" + "".join(_cell(v, c) for v, c in zip(record, columns, strict=True)) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _in_ms(frame: pd.DataFrame) -> pd.DataFrame:
    shown = frame.copy()
    for column in LATENCY_COLUMNS:
        if column in shown:
            shown[column] = shown[column].astype(float) / 1e6
    return shown


def _chart(uri: str, alt: str) -> str:
    return f'<img class="chart" alt="{_esc(alt)}" src="{uri}">'


def _conformance_html(tables: ConformanceTables) -> str:
    if tables.results.empty:
        return "<p><em>No conformance results in the inputs.</em></p>"
    parts = []
    for label, info in tables.run_info.items():
        server, client = info.get("server", {}), info.get("client", {})
        parts.append(
            f"<p class='meta'><b>{_esc(label)}</b>: server {_esc(server.get('version', '?'))}, client "
            f"{_esc(client.get('name', '?'))} {_esc(client.get('version', ''))}, jetcheck "
            f"{_esc(info.get('jetcheck_version', '?'))}, {_esc(info.get('started_at', ''))} – "
            f"{_esc(info.get('finished_at', ''))}</p>"
        )
    parts.append(_chart(charts.conformance_bars(tables.summary), "conformance by area"))
    parts.append("<h3>Summary by area and level</h3>" + html_table(tables.summary))
    parts.append("<h3>Failures (expected / actual)</h3>")
    parts.append(
        html_table(
            tables.failures,
            [
                "result_set",
                "id",
                "level",
                "subject",
                "client",
                "status",
                "title",
                "message",
                "observed",
                "server_log",
                "source",
            ],
        )
    )
    parts.append("<h3>Not applicable and skipped, with reasons</h3>")
    parts.append(html_table(tables.not_applicable, ["result_set", "id", "level", "status", "title", "message"]))
    parts.append("<h3>Compatibility matrix (rule × server version × client)</h3>")
    if len(tables.matrix.columns) > 4:  # id, title, level and more than one result column
        parts.append(html_table(tables.matrix))
    else:
        parts.append(
            "<p><em>One server and client: give several --in folders for a matrix "
            "(tables/conformance_matrix.csv has this one's column).</em></p>"
        )
    return "\n".join(parts)


def _load_html(load: LoadTables) -> str:
    parts = [f"<h3>{_esc(load.label)}</h3>"]
    info = {k: v for k, v in load.info.items() if not isinstance(v, dict)}
    for key, value in load.info.items():
        if isinstance(value, dict):
            info.update({f"{key}.{k}": v for k, v in value.items()})
    if info:
        values = [redact_text(v if isinstance(v, str) else json.dumps(v)) for v in info.values()]
        parts.append(html_table(pd.DataFrame({"setting": list(info), "value": values})))
    if load.totals.empty:
        parts.append("<p><em>No operations were logged.</em></p>")
        return "\n".join(parts)
    parts.extend(f"<p class='caveat'><strong>Caveat:</strong> {_esc(caveat)}</p>" for caveat in load.caveats)
    parts.append(
        f"<p>Duration {load.span_s:.1f} s. {_esc(load.window.get('definition', ''))}</p>" + html_table(load.totals)
    )
    parts.append("<h4>Latency (ms)</h4>" + html_table(_in_ms(load.latency)))
    parts.append("<ul class='notes'>" + "".join(f"<li>{_esc(n)}</li>" for n in load.notes) + "</ul>")
    parts.append(_chart(charts.timeline(load), f"{load.label} timeline"))
    parts.append(_chart(charts.distribution(load), f"{load.label} latency by percentile"))
    if not load.errors.empty:
        by_class = load.errors.groupby(["scenario", "op", "error_class", "error_code"], as_index=False)["count"].sum()
        parts.append("<h4>Errors by class</h4>" + html_table(by_class))
    return "\n".join(parts)


def _comparison_html(comparison: Comparison) -> str:
    load = comparison.load.copy()
    if not load.empty:
        load["change"] = (load["change"] * 100).round(1).astype(str) + " %"
    return (
        f"<p>Baseline: <b>{_esc(comparison.baseline)}</b>; {comparison.regressions} regression(s).</p>"
        "<h3>Load</h3>" + html_table(load) + "<h3>Conformance changes</h3>" + html_table(comparison.conformance)
    )


def verdict(content: ReportContent) -> tuple[bool, str]:
    problems = []
    if content.conformance.must_failures:
        by_subject = ", ".join(
            f"{count} of {subject} rules"
            for subject, count in sorted(content.conformance.must_failures_by_subject.items())
        )
        problems.append(f"{content.conformance.must_failures} MUST check(s) failed ({by_subject})")
    if content.comparison is not None and content.comparison.regressions:
        problems.append(f"{content.comparison.regressions} regression(s) against {content.comparison.baseline}")
    if problems:
        return False, "; ".join(problems)
    checked = len(content.conformance.results)
    return True, f"no MUST failures among {checked} result(s)" if checked else "no conformance results"


def render_html(content: ReportContent) -> str:
    ok, text = verdict(content)
    sections = [
        f'<div class="verdict {"ok" if ok else "bad"}">{_esc(text)}</div>',
        "<p class='meta'>inputs: " + ", ".join(_esc(i) for i in content.inputs) + "</p>",
        "<nav><a href='#conformance'>Conformance</a><a href='#load'>Load</a>"
        + ("<a href='#comparison'>Comparison</a>" if content.comparison else "")
        + "</nav>",
        "<h2 id='conformance'>Conformance</h2>",
        _conformance_html(content.conformance),
        "<h2 id='load'>Load</h2>",
    ]
    sections += [_load_html(load) for load in content.loads] or ["<p><em>No load results in the inputs.</em></p>"]
    if content.comparison is not None:
        sections += ["<h2 id='comparison'>Comparison with the baseline</h2>", _comparison_html(content.comparison)]
    template = Template(resources.files("jetcheck.reports").joinpath("templates/report.html").read_text("utf-8"))
    generated = dt.datetime.now(dt.UTC).strftime("generated %Y-%m-%d %H:%M:%S UTC by jetcheck report")
    return template.substitute(title="jetcheck report", generated=_esc(generated), body="\n".join(sections))


def _md_table(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    if frame is None or frame.empty:
        return "_none_\n"
    columns = columns or list(frame.columns)

    def fmt(value: Any) -> str:
        if isinstance(value, float):
            return "" if pd.isna(value) else f"{value:,.3f}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame[columns].itertuples(index=False)]
    return "\n".join(lines) + "\n"


def render_markdown(content: ReportContent) -> str:
    ok, text = verdict(content)
    out = [
        "# jetcheck report",
        "",
        f"**{'OK' if ok else 'FAILED'}**: {text}",
        "",
        "Inputs: " + ", ".join(content.inputs),
        "",
        "## Conformance",
        "",
    ]
    conformance = content.conformance
    if conformance.results.empty:
        out.append("_no conformance results_\n")
    else:
        totals = conformance.summary.groupby("result_set", as_index=False).sum(numeric_only=True)
        out += [
            _md_table(totals),
            "### Failures",
            "",
            _md_table(conformance.failures, ["result_set", "id", "level", "status", "message"]),
        ]
    out += ["## Load", ""]
    for load in content.loads:
        out += [f"### {load.label}", ""]
        if load.totals.empty:
            out.append("_no operations logged_\n")
            continue
        out += [f"**Caveat:** {caveat}\n" for caveat in load.caveats]
        out += [
            f"Duration {load.span_s:.1f} s. {load.window.get('definition', '')}",
            "",
            _md_table(load.totals),
            "Latency, ms:",
            "",
            _md_table(
                _in_ms(load.latency), ["scenario", "op", "metric", "count", "p50", "p99", "p99_9", "p99_99", "max"]
            ),
            f"_{load.notes[0]}_",
            "",
        ]
    if content.comparison is not None:
        out += [
            "## Comparison with " + content.comparison.baseline,
            "",
            _md_table(content.comparison.load),
            _md_table(content.comparison.conformance),
        ]
    return "\n".join(out) + "\n"


def report_tables(content: ReportContent) -> dict[str, pd.DataFrame]:
    conformance = content.conformance
    tables = {
        "conformance_results": conformance.results,
        "conformance_summary": conformance.summary,
        "conformance_matrix": conformance.matrix,
    }
    for name in ("totals", "throughput", "latency", "latency_over_time", "distribution", "errors", "samples"):
        frames = [
            getattr(load, name).assign(result_set=load.label) for load in content.loads if not getattr(load, name).empty
        ]
        if frames:
            tables[f"load_{name}"] = pd.concat(frames, ignore_index=True)
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
    (out / "summary.md").write_text(render_markdown(content), encoding="utf-8")
    index = out / "index.html"
    index.write_text(render_html(content), encoding="utf-8")
    return index
