"""Writing the report: index.html (self-contained), summary.md and the tables as CSV and Parquet.

Both documents are Jinja2 templates (templates/report.html, templates/summary.md) filled from one view of the
results built here, so they say the same things in the same order: the verdict, what was tested, results by area,
failures, then load. HTML is autoescaped; every value reaches a template as plain text or numbers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import numbers
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from jetcheck.records import STATUSES
from jetcheck.reports import charts
from jetcheck.reports.client_releases import client_release_grids
from jetcheck.reports.compare import Comparison
from jetcheck.reports.conformance_report import FAILED, ConformanceTables, redact_text
from jetcheck.reports.load_report import LoadTables
from jetcheck.verdict import HEADLINES, overall_outcome, worst_status
from jetcheck.versions import version_sort_key

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
STATUS_HEADERS = {"pass": "pass", "fail": "fail", "error": "error", "na": "n/a", "skip": "skipped"}
NS = 1_000_000_000


@dataclass
class ReportContent:
    inputs: list[str]
    conformance: ConformanceTables
    loads: list[LoadTables]
    comparison: Comparison | None = None
    notes: list[str] = field(default_factory=list)
    durability: list = field(default_factory=list)  # jetcheck.reports.durability_report.DurabilityRun, one per run


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = ""  # a status ("pass", "fail", ...) or "num"


@dataclass
class Table:
    """A table as the templates draw it: every cell already formatted as text."""

    id: str
    headers: list[str]
    rows: list[list[Cell]]

    @property
    def numeric(self) -> list[bool]:
        """Per column: whether it holds numbers (right-aligned in HTML and Markdown)."""
        return [
            all("num" in row[i].css.split() or not row[i].text for row in self.rows) for i in range(len(self.headers))
        ]


# --- formatting ---------------------------------------------------------------------------------------------------


def number(value: Any) -> str:
    """A count with thousands separators; other numbers with three significant digits (more when larger)."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1):
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def milliseconds(value_ns: float) -> str:
    """A latency in ms with as many decimals as its size calls for; never scientific notation."""
    value = value_ns / 1e6
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}" if value >= 0.001 or value == 0 else "<0.001"


def when(value: Any) -> str:
    """An instant as an ISO date in UTC: from wall-clock ns, seconds or an ISO string; "" when unknown."""
    try:
        if isinstance(value, str):
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif isinstance(value, numbers.Real) and value > 0:
            moment = dt.datetime.fromtimestamp(value / NS if value > 1e14 else value, dt.UTC)
        else:
            return ""
    except ValueError:
        return str(value)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(value: Any) -> str:
    return f"{number(value)} s"


def _cell(value: Any, css: str = "") -> Cell:
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return Cell(number(value), css or "num")
    return Cell("" if value is None else str(value), css)


def _plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count:,} {word}"
    return (
        f"{count:,} {word[:-1]}ies" if word.endswith("y") else f"{count:,} {word}{'es' if word.endswith('s') else 's'}"
    )


# --- load settings ------------------------------------------------------------------------------------------------

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
}
# file layout, not settings of the run
HIDDEN_SETTINGS = frozenset({"ops_dir", "samples_dir"})


def _per_process(values: dict[str, Any], unit: str = "") -> str:
    """A mapping keyed by process id summarised in one line, never one row per pid."""
    if all(isinstance(v, numbers.Real) for v in values.values()):
        busiest = max(values, key=lambda pid: values[pid])
        total = sum(values.values())
        return (
            f"{number(round(total, 1))}{unit} over {_plural(len(values), 'process')} "
            f"(at most {number(values[busiest])}{unit}, pid {busiest})"
        )
    if all(isinstance(v, list) for v in values.values()):
        roles = Counter(" + ".join(sorted(v)) if v else "idle" for v in values.values())
        return f"{_plural(len(values), 'process')}: " + ", ".join(f"{n} {role}" for role, n in roles.most_common())
    return f"{_plural(len(values), 'process')}"


def _setting_value(key: str, value: Any) -> str:
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
            return _per_process(value, " s" if key.endswith("_s") else "")
        parts = []
        for name, inner in value.items():
            if name == "pid":
                continue
            parts.append(f"{name.replace('_', ' ')} {_setting_value(name, inner)}")
        return ", ".join(parts)
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            rows = sum(int(v.get("rows", 0)) for v in value)
            return number(len(value)) + (f", {number(rows)} operations logged" if rows else "")
        return ", ".join(_setting_value(key, v) for v in value) or "none"
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
            rows += [(f"{name}: {part}", _setting_value(part, inner)) for part, inner in value.items()]
        else:
            rows.append((name, _setting_value(key, value)))
    return rows


# --- conformance --------------------------------------------------------------------------------------------------


def _several(content: ReportContent) -> bool:
    labels = set(content.conformance.results["result_set"]) | {load.label for load in content.loads}
    return len(labels) > 1


def _tested(content: ReportContent) -> list[dict[str, Any]]:
    """What each result set tested, as (fact, value) rows under the result set's name."""
    runs: dict[str, list[tuple[str, str]]] = {}
    results = content.conformance.results
    for label, info in content.conformance.run_info.items():
        server, options = info.get("server", {}), info.get("options", {})
        of_set = results[results["result_set"] == label]
        client = info.get("client") or {}
        client_text = " ".join(v for v in (client.get("name", ""), client.get("version", "")) if v)
        client_text = client_text or ", ".join(sorted(set(of_set["client"]) - {""}))
        target = options.get("server", "")
        if info.get("target") == "managed" or target in ("local", "system", "cluster"):
            where = f"started by jetcheck ({target})" if target else "started by jetcheck"
        else:
            where = redact_text(str(target)) if target else ""
        version = server.get("version") or ", ".join(sorted(set(of_set["server_version"]) - {""}))
        cluster, nodes = server.get("cluster", ""), server.get("nodes")  # a durability run names its node count
        shape = f"cluster {cluster}" if cluster else f"{nodes}-node cluster" if nodes else "single server"
        facts = [
            ("server", " ".join(v for v in (f"nats-server {version}".strip(), where and f"— {where}") if v)),
            ("cluster shape", shape),
        ]
        if server.get("api_level"):
            facts.append(("JetStream API level", str(server["api_level"])))
        if server.get("domain"):
            facts.append(("JetStream domain", server["domain"]))
        facts.append(("client", client_text or "unknown"))
        facts.append(("jetcheck", str(info.get("jetcheck_version", "unknown"))))
        started = info.get("started_at") or info.get("start")
        finished = info.get("finished_at") or info.get("end")
        facts.append(("date", when(started) or "unknown"))
        if started and finished:
            try:
                took = dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)
                facts.append(("duration", seconds(round(took.total_seconds(), 1))))
            except ValueError:
                pass
        facts.append(("checks", f"{len(of_set):,} checks of {of_set['id'].nunique():,} rules"))
        if options.get("profile"):
            facts.append(("profile", str(options["profile"])))
        if info.get("run_id"):
            facts.append(("run id", str(info["run_id"])))
        runs[label] = facts
    for load in content.loads:
        info = load.info
        if not info:
            continue
        facts = runs.setdefault(load.label, [])
        if not facts:
            client = info.get("client", {})
            facts += [
                ("server", f"nats-server {info.get('server_version', 'unknown')}"),
                ("client", _setting_value("client", client) if client else "unknown"),
                ("date", when(info.get("start_ns")) or "unknown"),
            ]
        scenario = info.get("scenario", "")
        title = info.get("scenario_title", "")
        shape = [
            f"{seconds(info['duration_s'])}" if "duration_s" in info else "",
            f"{number(info.get('rate') or info.get('target_rate'))} ops/s"
            if info.get("rate") or info.get("target_rate")
            else "",
            f"{info['mode']} loop" if info.get("mode") else "",
        ]
        text = f"scenario {scenario}" + (f" ({title})" if title else "")
        facts.append(("load", ", ".join([text, *(part for part in shape if part)])))
    return [
        {"label": label, "table": Table(f"tested-{n}", ["", ""], [[Cell(k), Cell(v)] for k, v in facts])}
        for n, (label, facts) in enumerate(runs.items())
    ]


def _count_css(status: str, count: int) -> str:
    """A count's look: failures stand out, zeros recede, the rest are plain numbers."""
    if not count:
        return "num zero"
    return f"num {status}" if status != "pass" else "num"


def _areas(content: ReportContent, several: bool) -> Table:
    """One row per area (and result set, when several): checks by status and the MUST ones that failed."""
    results = content.conformance.results
    keys = ["result_set", "area"] if several else ["area"]
    counts = results.groupby([*keys, "status"]).size().unstack("status", fill_value=0)
    counts = counts.reindex(columns=list(STATUS_HEADERS), fill_value=0)
    must_failed = (
        results[(results["level"] == "MUST") & results["status"].isin(FAILED)].groupby(keys).size()
        if not results.empty
        else pd.Series(dtype=int)
    )
    headers = [*(["result set"] if several else []), "area", "checks", *STATUS_HEADERS.values(), "MUST failed"]
    rows = []
    for index, row in counts.iterrows():
        names = list(index) if isinstance(index, tuple) else [index]
        failed = int(must_failed.get(index, 0))
        cells = [Cell(str(n)) for n in names] + [_cell(int(row.sum()))]
        cells += [_cell(int(row[s]), _count_css(s, int(row[s]))) for s in STATUS_HEADERS]
        cells.append(_cell(failed, _count_css("fail", failed)))
        rows.append(cells)
    totals = counts.sum()
    total_row = [Cell("all areas")] + ([Cell("")] if several else []) + [_cell(int(totals.sum()))]
    total_row += [_cell(int(totals[s])) for s in STATUS_HEADERS] + [_cell(int(must_failed.sum()))]
    rows.append(total_row)
    return Table("areas", headers, rows)


def _failures(content: ReportContent, several: bool) -> list[dict[str, Any]]:
    """Failed and errored checks, MUST first, server rules before client rules."""
    frame = content.conformance.failures
    if frame.empty:
        return []
    order = frame.assign(
        _level=(frame["level"] != "MUST").astype(int), _subject=(frame["subject"] != "server").astype(int)
    ).sort_values(["_level", "_subject", "result_set", "id"])
    failures = []
    for row in order.to_dict("records"):
        failures.append(
            {
                "result_set": row["result_set"] if several else "",
                "id": row["id"],
                "level": row["level"],
                "subject": row["subject"],
                "status": row["status"],
                "title": row["title"],
                "source": row["source"],
                "client": row["client"],
                "message": row["message"],
                "detail": redact_text(row.get("detail") or ""),
                "observed": _observed(row["observed"]),
                "server_log": row["server_log"],
                "check": row["check"],
            }
        )
    return failures


def _clients(content: ReportContent) -> list[dict[str, Any]]:
    """With several clients, one entry per client (name and exact version): its client rules counted by their worst
    status over the server versions, and each failing client rule once, with the server versions it failed on and
    the message of the newest (every result set's own message is in the failures table)."""
    results = content.conformance.results
    names = sorted({c for c in results["client"] if c})
    if len(names) < 2:
        return []
    own = results[results["subject"] == "client"]
    sections = []
    for name in names:
        mine = own[own["client"] == name]
        worst = mine.groupby("id")["status"].agg(worst_status)
        counts = worst.value_counts()
        failing = mine[mine["status"].isin(FAILED)]
        failing = failing.assign(_newest=failing["server_version"].map(version_sort_key)).sort_values(
            ["_newest"], ascending=False
        )
        rules = []
        for rule, group in failing.groupby("id", sort=False):
            newest = group.iloc[0]
            rules.append(
                {
                    "id": rule,
                    "level": newest["level"],
                    "status": worst_status(list(group["status"])),
                    "title": newest["title"],
                    "message": newest["message"],
                    "servers": ", ".join(sorted(set(group["server_version"]), key=version_sort_key)),
                }
            )
        rules.sort(key=lambda r: (r["level"] != "MUST", r["id"]))
        sections.append(
            {
                "name": name,
                "counts": ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts.get(s)) or "none ran",
                "failing": rules,
                "failing_rules": len(rules),
            }
        )
    return sections


def _observed(text: str) -> str:
    """The observed values of a check, indented for reading (they arrive as one line of JSON)."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, sort_keys=True)
    except json.JSONDecodeError:
        return text


def _not_applicable(content: ReportContent, several: bool) -> Table:
    frame = content.conformance.not_applicable
    headers = [*(["result set"] if several else []), "rule", "level", "status", "title", "reason"]
    rows = [
        [
            *([Cell(r["result_set"])] if several else []),
            Cell(r["id"]),
            Cell(r["level"]),
            Cell(STATUS_HEADERS.get(r["status"], r["status"]), r["status"]),
            Cell(r["title"]),
            Cell(r["message"]),
        ]
        for r in frame.to_dict("records")
    ]
    return Table("not-applicable", headers, rows)


def frame_table(table_id: str, frame: pd.DataFrame, headers: dict[str, str] | None = None) -> Table:
    """A DataFrame as a Table: numbers formatted, statuses coloured, columns renamed by `headers`."""
    headers = headers or {}
    rows = []
    for record in frame.to_dict("records"):
        cells = []
        for value in record.values():
            css = value if isinstance(value, str) and value in (*STATUS_HEADERS, "regression", "fixed") else ""
            if isinstance(value, bool):
                css, value = ("regression", "yes") if value else ("", "")
            cells.append(_cell(value, css))
        rows.append(cells)
    return Table(table_id, [headers.get(c, c.replace("_", " ")) for c in frame.columns], rows)


# --- the verdict --------------------------------------------------------------------------------------------------


def verdict(content: ReportContent) -> tuple[str, list[str]]:
    """The report's outcome (jetcheck.verdict's incomplete, fail or pass; a regression fails too) and its lines:
    each result set's verdict, incompleteness first, the server and each client apart."""
    outcome = overall_outcome(content.conformance.verdicts)
    lines = [line for run in content.conformance.verdicts for line in run.lines()] or ["no conformance results"]
    if content.comparison is not None and content.comparison.regressions:
        lines.append(f"{content.comparison.regressions} regression(s) against {content.comparison.baseline}")
        outcome = "fail" if outcome == "pass" else outcome
    return outcome, lines


def _verdict_block(content: ReportContent) -> dict[str, Any]:
    """The verdict as the templates show it: per result set, its completeness and each subject's sentence apart."""
    outcome, lines = verdict(content)
    runs = content.conformance.verdicts
    if not runs and outcome == "pass":
        outcome = "none"  # a load-only report has no conformance verdict to show green
    return {
        "outcome": outcome,
        "headline": HEADLINES.get(outcome, "NO CONFORMANCE VERDICT"),
        "runs": [
            {
                "label": run.label,
                # the run's own words (its name is the heading above them): "INCOMPLETE: ...; this is not a verdict"
                "incomplete": "" if run.complete else dataclasses.replace(run, label="").lines()[0],
                "subjects": [(subject.sentence(), subject.conforms) for subject in run.subjects]
                or [("no checks ran", False)],
                "profile": f"held to {run.profile}" if run.profile else "",
                # what the profile owed and the run did not check, each with its reason
                "not_run": [
                    f"not run: {r.level} {r.subject} rule {r.id} ({r.check}): {r.message.strip() or r.status}"
                    for subject in run.subjects
                    for r in subject.must_not_run_checks
                ],
            }
            for run in runs
        ],
        # what the result sets' own lines do not say: a regression against the baseline, or no results at all
        "extra": lines[sum(len(run.lines()) for run in runs) :],
        "lines": lines,  # every line as the console prints it, each named by its result set when there are several
    }


# --- load ---------------------------------------------------------------------------------------------------------


def _latency_table(load: LoadTables, several_scenarios: bool, index: int) -> Table:
    """Latency percentiles in ms; a percentile beyond what the sample count can show (q > 1 - 1/n) is blank."""
    headers = [*(["scenario"] if several_scenarios else []), "operation", "measure", "samples"]
    headers += [header for _, header, _ in LATENCY_COLUMNS]
    rows = []
    for row in load.latency.to_dict("records"):
        if row["metric"] == "send_delay" and not row["max"]:
            continue  # deliveries are not sent on a schedule: their send delay is zero by construction
        count = int(row["count"])
        cells = [*([Cell(row["scenario"])] if several_scenarios else []), Cell(row["op"])]
        cells += [Cell(METRIC_NAMES.get(row["metric"], row["metric"])), _cell(count)]
        for column, _, quantile in LATENCY_COLUMNS:
            shown = count and (quantile == 0.0 or count * (1 - quantile) >= 1)
            cells.append(Cell(milliseconds(float(row[column])) if shown else "", "num"))
        rows.append(cells)
    return Table(f"latency-{index}", headers, rows)


def steady_window(load: LoadTables) -> dict[str, Any]:
    """The steady window the load figures cover (LoadTables.window: start_ns, end_ns, definition, ...), or {} from
    an aggregation that measures the whole run."""
    return getattr(load, "window", None) or {}


def _load_view(load: LoadTables, index: int, several: bool) -> dict[str, Any]:
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
        latency=_latency_table(load, several_scenarios, index),
        timeline=charts.timeline(load),
        distribution=charts.distribution(load),
        errors=None,
    )
    if not load.errors.empty:
        by_class = load.errors.groupby(["scenario", "op", "error_class", "error_code"], as_index=False)["count"].sum()
        if not several_scenarios:
            by_class = by_class.drop(columns=["scenario"])
        view["errors"] = frame_table(
            f"errors-{index}", by_class, {"op": "operation", "error_class": "error", "error_code": "code"}
        )
    return view


# --- the documents ------------------------------------------------------------------------------------------------


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
    several = _several(content)
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
        "verdict": _verdict_block(content),
        "tested": _tested(content),
        "has_results": has_results,
        "areas": _areas(content, several) if has_results else None,
        "areas_chart": charts.conformance_bars(conformance.summary) if has_results else "",
        "failures": _failures(content, several),
        "not_applicable": _not_applicable(content, several),
        "clients": _clients(content) if has_results else [],
        "client_grids": client_release_grids(conformance.results) if has_results else [],
        "matrix": frame_table("matrix", conformance.matrix, {"id": "rule"})
        if len(conformance.matrix.columns) > 4
        else None,
        "loads": [_load_view(load, n, several) for n, load in enumerate(content.loads)],
        "load_clients": _load_clients(content.loads),
        "comparison": comparison,
        "notes": content.notes,
        "durability": _durability(content),
    }


def _durability(content: ReportContent) -> dict[str, Any] | None:
    from jetcheck.reports.durability_report import durability_view  # it builds on this module's Table

    return durability_view(content.durability)


def _load_clients(loads: list[LoadTables]) -> Table | None:
    from jetcheck.reports.client_comparison import clients_side_by_side  # it builds on this module's Table

    return clients_side_by_side(loads)


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
    for name in ("totals", "throughput", "latency", "latency_over_time", "distribution", "errors", "samples"):
        frames = [
            getattr(load, name).assign(result_set=load.label) for load in content.loads if not getattr(load, name).empty
        ]
        if frames:
            tables[f"load_{name}"] = pd.concat(frames, ignore_index=True)
    if content.durability:
        from jetcheck.reports.durability_report import anomaly_rows

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
