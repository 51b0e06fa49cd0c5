"""Comparing a run with a baseline: throughput down, p99 up beyond a threshold, conformance status changes."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from jetcheck.option_table import P99_RISE, THROUGHPUT_DROP  # the report's option defaults
from jetcheck.reports.conformance_report import FAILED, ConformanceTables
from jetcheck.reports.load_report import GROUP, LoadTables

P99_METRICS = ("response", "service", "e2e")


@dataclass
class Comparison:
    baseline: str
    load: pd.DataFrame  # scenario, op, measure, baseline, current, change, regression
    conformance: pd.DataFrame  # id, title, level, baseline, current, change

    @property
    def regressions(self) -> int:
        load = int(self.load["regression"].sum()) if not self.load.empty else 0
        conformance = int((self.conformance["change"] == "regression").sum()) if not self.conformance.empty else 0
        return load + conformance


def compare_load(
    current: LoadTables | None,
    baseline: LoadTables | None,
    throughput_drop: float = THROUGHPUT_DROP,
    p99_rise: float = P99_RISE,
) -> pd.DataFrame:
    columns = [*GROUP, "measure", "baseline", "current", "change", "regression"]
    if current is None or baseline is None or current.totals.empty or baseline.totals.empty:
        return pd.DataFrame(columns=columns)
    keys = list(GROUP)
    rate = baseline.totals[[*keys, "ok_per_s"]].merge(
        current.totals[[*keys, "ok_per_s"]], on=keys, suffixes=("_b", "_c")
    )
    rows = []
    for row in rate.itertuples(index=False):
        change = (row.ok_per_s_c - row.ok_per_s_b) / row.ok_per_s_b if row.ok_per_s_b else 0.0
        rows.append(
            (row.scenario, row.op, "throughput ok/s", row.ok_per_s_b, row.ok_per_s_c, change, change < -throughput_drop)
        )
    lat_keys = [*keys, "metric"]
    lat = baseline.latency[[*lat_keys, "p99"]].merge(
        current.latency[[*lat_keys, "p99"]], on=lat_keys, suffixes=("_b", "_c")
    )
    for row in lat[lat["metric"].isin(P99_METRICS)].itertuples(index=False):
        change = (row.p99_c - row.p99_b) / row.p99_b if row.p99_b else 0.0
        rows.append((row.scenario, row.op, f"{row.metric} p99 ns", row.p99_b, row.p99_c, change, change > p99_rise))
    return pd.DataFrame(rows, columns=columns)


def _worst_status(results: pd.DataFrame) -> pd.DataFrame:
    rank = results["status"].map({"fail": 0, "error": 1, "disagree": 2, "pass": 3, "na": 4, "skip": 5})
    return results.assign(rank=rank).sort_values("rank").drop_duplicates("id").set_index("id")


def compare_conformance(current: ConformanceTables, baseline: ConformanceTables) -> pd.DataFrame:
    columns = ["id", "title", "level", "baseline", "current", "change"]
    if current.results.empty and baseline.results.empty:
        return pd.DataFrame(columns=columns)
    before = _worst_status(baseline.results) if not baseline.results.empty else None
    after = _worst_status(current.results) if not current.results.empty else None
    ids = sorted(set(before.index if before is not None else []) | set(after.index if after is not None else []))
    rows = []
    for rule in ids:
        old = before["status"].get(rule, "") if before is not None else ""
        new = after["status"].get(rule, "") if after is not None else ""
        if old == new:
            continue
        source = after if after is not None and rule in after.index else before
        if new in FAILED and old not in FAILED:
            change = "regression"
        elif old in FAILED and new not in FAILED:
            change = "fixed"
        elif not old:
            change = "new rule"
        elif not new:
            change = "rule missing"
        else:
            change = "changed"
        rows.append((rule, source.at[rule, "title"], source.at[rule, "level"], old, new, change))
    return pd.DataFrame(rows, columns=columns)
