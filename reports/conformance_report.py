"""Conformance results as tables: summary by area and level, failures, na with reasons, compatibility matrix.

results.jsonl files are small (one line per rule and run), so they are read with records.read_results on the
driver; Spark is kept for the load logs, whose size calls for it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from jetcheck.records import LEVELS, STATUSES, CheckResult
from jetcheck.redact import redact_url
from jetcheck.reports.inputs import ResultSet
from jetcheck.verdict import FAILING as FAILED
from jetcheck.verdict import RunVerdict, worst_status
from jetcheck.versions import version_sort_key

_URL = re.compile(r"\b(?:nats|tls|wss?|https?)://\S+")


def redact_text(text: str) -> str:
    """Hide credentials in any URL inside free text (messages and server logs reach the report)."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text or "")


@dataclass
class ConformanceTables:
    results: pd.DataFrame
    summary: pd.DataFrame  # result_set, area, level, one column per status, total
    failures: pd.DataFrame
    not_applicable: pd.DataFrame
    matrix: pd.DataFrame  # id, title, level, then one column per (server version, client[, result set])
    run_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdicts: list[RunVerdict] = field(default_factory=list)  # one per result set with conformance results


def results_frame(label: str, results: list[CheckResult]) -> pd.DataFrame:
    names = list(CheckResult.__dataclass_fields__)
    rows = []
    for result in results:
        row = asdict(result)
        row["client"] = " ".join(v for v in (result.client.get("name", ""), result.client.get("version", "")) if v)
        row["observed"] = json.dumps(result.observed, sort_keys=True) if result.observed else ""
        row["message"] = redact_text(result.message)
        row["server_log"] = redact_text(result.server_log)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=names)
    frame.insert(0, "result_set", label)
    return frame


def _summary(results: pd.DataFrame) -> pd.DataFrame:
    keys = ["result_set", "area", "level"]
    if results.empty:
        return pd.DataFrame(columns=[*keys, *STATUSES, "total"])
    counts = results.groupby([*keys, "status"]).size().unstack("status", fill_value=0)
    counts = counts.reindex(columns=list(STATUSES), fill_value=0)
    counts["total"] = counts.sum(axis=1)
    summary = counts.reset_index()
    summary["level"] = pd.Categorical(
        summary["level"], categories=[*LEVELS, *sorted(set(summary["level"]) - set(LEVELS))]
    )
    return summary.sort_values(keys).reset_index(drop=True).astype({"level": str})


def _matrix(results: pd.DataFrame) -> pd.DataFrame:
    if results.empty:
        return pd.DataFrame(columns=["id", "title", "level"])
    frame = results.copy()
    frame["column"] = "server " + frame["server_version"] + " · " + frame["client"]
    shared = frame.groupby("column")["result_set"].nunique()
    repeated = frame["column"].isin(shared[shared > 1].index)
    frame.loc[repeated, "column"] = frame.loc[repeated, "column"] + " (" + frame.loc[repeated, "result_set"] + ")"
    # a cell holding several results for a rule shows their worst, as `jetcheck matrix` does
    cells = frame.groupby(["id", "column"], as_index=False)["status"].agg(worst_status)
    wide = cells.pivot(index="id", columns="column", values="status").fillna("")
    order = (
        frame.drop_duplicates("column")
        .assign(key=lambda f: f["server_version"].map(version_sort_key))
        .sort_values(["key", "client", "column"])["column"]
    )
    wide = wide[list(order)]
    rules = frame.drop_duplicates("id").set_index("id")[["title", "level"]]
    return rules.join(wide).reset_index().sort_values("id").reset_index(drop=True)


def aggregate_conformance(result_sets: list[ResultSet]) -> ConformanceTables:
    with_results = [rs for rs in result_sets if rs.certify is not None]
    frames = [results_frame(rs.label, rs.results()) for rs in with_results]
    results = pd.concat(frames, ignore_index=True) if frames else results_frame("", [])
    failures = results[results["status"].isin(FAILED)].reset_index(drop=True)
    not_applicable = results[results["status"].isin(("na", "skip"))].reset_index(drop=True)
    info = {rs.label: rs.run_info() for rs in with_results}
    verdicts = [rs.verdict(labelled=len(with_results) > 1) for rs in with_results]
    return ConformanceTables(results, _summary(results), failures, not_applicable, _matrix(results), info, verdicts)
