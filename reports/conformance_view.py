"""The report's view of conformance: the verdict, what each result set tested, results by area, failures, each
client's own rules and the checks that did not apply."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pandas as pd

from jetcheck.records import STATUSES
from jetcheck.reports.cells import STATUS_HEADERS, Cell, Table, cell, number, seconds, when
from jetcheck.reports.conformance_report import FAILED, redact_text
from jetcheck.reports.content import ReportContent
from jetcheck.reports.load_settings import setting_value
from jetcheck.verdict import HEADLINES, overall_outcome, worst_status
from jetcheck.versions import version_sort_key


def several(content: ReportContent) -> bool:
    labels = set(content.conformance.results["result_set"]) | {load.label for load in content.loads}
    return len(labels) > 1


def tested(content: ReportContent) -> list[dict[str, Any]]:
    """What each result set tested, as (fact, value) rows under the result set's name."""
    runs: dict[str, list[tuple[str, str]]] = {}
    results = content.conformance.results
    for label, info in content.conformance.run_info.items():
        server, options = info.get("server") or {}, info.get("options") or {}  # null is absent (inputs.RUN_FIELDS)
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
            client = info.get("client") or {}
            facts += [
                ("server", f"nats-server {info.get('server_version', 'unknown')}"),
                ("client", setting_value("client", client) if client else "unknown"),
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


def count_css(status: str, count: int) -> str:
    """A count's look: failures stand out, zeros recede, the rest are plain numbers."""
    if not count:
        return "num zero"
    return f"num {status}" if status != "pass" else "num"


def areas(content: ReportContent, several: bool) -> Table:
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
        cells = [Cell(str(n)) for n in names] + [cell(int(row.sum()))]
        cells += [cell(int(row[s]), count_css(s, int(row[s]))) for s in STATUS_HEADERS]
        cells.append(cell(failed, count_css("fail", failed)))
        rows.append(cells)
    totals = counts.sum()
    total_row = [Cell("all areas")] + ([Cell("")] if several else []) + [cell(int(totals.sum()))]
    total_row += [cell(int(totals[s])) for s in STATUS_HEADERS] + [cell(int(must_failed.sum()))]
    rows.append(total_row)
    return Table("areas", headers, rows)


def failures(content: ReportContent, several: bool) -> list[dict[str, Any]]:
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
                "observed": observed(row["observed"]),
                "server_log": row["server_log"],
                "check": row["check"],
            }
        )
    return failures


def clients(content: ReportContent) -> list[dict[str, Any]]:
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


def observed(text: str) -> str:
    """The observed values of a check, indented for reading (they arrive as one line of JSON)."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, sort_keys=True)
    except json.JSONDecodeError:
        return text


def disagreements(content: ReportContent, several: bool) -> Table:
    """The checks whose documents disagree (not failures): each rule, and its message naming both documents, their
    words and what the target did."""
    results = content.conformance.results
    frame = results[results["status"] == "disagree"]
    headers = [
        *(["result set"] if several else []),
        "rule",
        "level",
        "title",
        "what the documents say, what the target did",
    ]
    rows = [
        [
            *([Cell(r["result_set"])] if several else []),
            Cell(r["id"]),
            Cell(r["level"]),
            Cell(r["title"]),
            Cell(r["message"]),
        ]
        for r in frame.to_dict("records")
    ]
    return Table("disagreements", headers, rows)


def not_applicable(content: ReportContent, several: bool) -> Table:
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


def verdict_block(content: ReportContent) -> dict[str, Any]:
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
