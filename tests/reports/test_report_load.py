"""Load aggregation: counts, percentiles and time axes agree with values computed directly from the logs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from jetcheck.load import summary
from jetcheck.records import LOAD_FILE
from jetcheck.reports import buckets
from jetcheck.reports.inputs import resolve
from jetcheck.reports.load_report import aggregate_load
from jetcheck.testing.percentiles import nearest_rank
from jetcheck.testing.synthetic import LoadSpec, write_load_run

NS = 1_000_000_000


@pytest.fixture(scope="module")
def ops(run_folder: Path):
    return ds.dataset(run_folder / "load" / "ops").to_table().to_pandas()


def test_origin_is_the_first_intended_send(load_tables, ops):
    """Every time axis starts at the earliest intended send (or load.json's start, whichever is first)."""
    assert load_tables.origin_ns == min(ops["intended_ns"].min(), load_tables.info["start_ns"])


def test_throughput_counts_ops_per_completion_second(load_tables, ops):
    """ops, ok and errors per (op, second) equal counts over the raw rows by the second their reply came."""
    second = (ops["end_ns"] - load_tables.origin_ns) // 1_000_000_000
    expected = ops.assign(t_s=second).groupby(["op", "t_s"]).agg(ops=("ok", "size"), ok=("ok", "sum"))
    got = load_tables.throughput.set_index(["op", "t_s"])
    assert got["ops"].to_dict() == expected["ops"].to_dict()
    assert got["ok"].to_dict() == expected["ok"].to_dict()
    assert (got["errors"] == got["ops"] - got["ok"]).all()


def in_window(frame, window: dict):
    return frame[(frame["start_ns"] >= window["start_ns"]) & (frame["start_ns"] < window["end_ns"])]


def test_totals_and_rate(load_tables, ops):
    """Totals per op add up to the log; ok/s divides the successful operations sent in the steady window by its
    length."""
    assert_counts_and_steady_rate(load_tables.totals.set_index("op"), ops, "op", load_tables.window)


def assert_counts_and_steady_rate(table, ops, column: str, window: dict) -> None:
    """Each group of `ops` by `column` has its row in `table`: operations, successes, successes sent in the steady
    window and their rate over it."""
    for key, group in ops.groupby(column):
        assert table.at[key, "ops"] == len(group)
        assert table.at[key, "ok"] == group["ok"].sum()
        steady_ok = in_window(group, window)["ok"].sum()
        assert table.at[key, "steady_ok"] == steady_ok
        assert table.at[key, "ok_per_s"] == pytest.approx(steady_ok / window["seconds"])


@pytest.mark.parametrize("metric", ["response", "service", "send_delay", "e2e"])
def test_latency_percentiles_within_stated_accuracy(load_tables, ops, metric):
    """Each op's percentiles (over the steady window) are within the stated relative error of exact nearest-rank
    values; max exact."""
    values_of = {
        "response": lambda f: (f["end_ns"] - f["intended_ns"])[f["ok"]],
        "service": lambda f: (f["end_ns"] - f["start_ns"])[f["ok"]],
        "send_delay": lambda f: f["start_ns"] - f["intended_ns"],
        "e2e": lambda f: f["e2e_ns"][f["ok"] & (f["e2e_ns"] != -1)],
    }
    latency = load_tables.latency.set_index(["op", "metric"])
    checked = 0
    for op, group in in_window(ops, load_tables.window).groupby("op"):
        values = values_of[metric](group).to_numpy()
        if not len(values):
            assert (op, metric) not in latency.index
            continue
        row = latency.loc[(op, metric)]
        assert row["count"] == len(values)
        assert row["max"] == values.max()
        for label, ppm in buckets.STANDARD_QUANTILES:
            exact = nearest_rank(values, ppm)
            assert abs(row[label] - exact) <= exact * buckets.relative_error(), (op, label)
        checked += 1
    assert checked


def test_errors_by_class_over_time(load_tables, ops):
    """Error counts per class and second equal those of the failed rows."""
    failed = ops[~ops["ok"]]
    second = (failed["end_ns"] - load_tables.origin_ns) // 1_000_000_000
    expected = failed.assign(t_s=second).groupby(["op", "t_s", "error_class"]).size()
    got = load_tables.errors.groupby(["op", "t_s", "error_class"])["count"].sum()
    assert got.to_dict() == expected.to_dict()


def test_latency_over_time_covers_the_run(load_tables):
    """Per-interval percentiles exist for every interval with completions, on the same seconds axis."""
    response = load_tables.latency_over_time.query("metric == 'response' and op == 'publish'")
    assert response["t_s"].min() == 0
    assert response["t_s"].max() <= load_tables.span_s
    assert (response["p50"] <= response["p99"]).all() and (response["p99"] <= response["max"]).all()


def test_server_samples_share_the_axis_and_become_rates(load_tables):
    """Samples are placed at seconds since the origin; counters become per-second rates."""
    samples = load_tables.samples
    assert samples["t_s"].iloc[0] == 0
    assert np.allclose(samples["in_msgs_rate"].iloc[1:], samples["in_msgs"].diff().iloc[1:], rtol=1e-9)


def test_a_process_that_ran_both_roles_is_a_caveat(load_tables):
    """The synthetic run's processes published and consumed; the load tables carry the shared-loop caveat."""
    (caveat,) = load_tables.caveats
    assert caveat.startswith("publishers and consumers shared process(es) 1000, 1001:")


def test_the_console_summary_and_the_report_agree_on_the_window_and_the_rates(spark, tmp_path):
    """One op log, two engines: `jetcheck load`'s summary (pyarrow) and the report (Spark) take the same steady
    window and give the same ok/s per op. The log is shaped like a real run's: load.json's start precedes the first
    operation by the setup, which the report's time axis starts from (the default run printed 1,994/s on the
    console and reported 1,906.026/s)."""
    folder = write_load_run(tmp_path / "load", LoadSpec(records=20_000, duration_s=8.0, processes=1, seed=3))
    run = json.loads((folder / LOAD_FILE).read_text())
    run["start_ns"] -= 2 * NS
    (folder / LOAD_FILE).write_text(json.dumps(run))
    tables = aggregate_load(spark, resolve(folder))
    console = summary.summarize(folder)
    totals = tables.totals.set_index("op")
    rates = {op: entry["rate_per_s"] for op, entry in console["ops"].items()}
    assert rates == pytest.approx(totals["ok_per_s"].to_dict(), rel=1e-12)
    assert console["window"] == tables.window
    window = tables.window
    assert not window["whole_run"] and window["warmup_ops"] > 0 and window["winddown_ops"] > 0
    assert window["warmup_ops"] + window["steady_ops"] + window["winddown_ops"] == 20_000
    assert f"{window['seconds']:.1f} s" in window["definition"]
    latency = tables.latency.set_index(["op", "metric"])
    for op, entry in console["ops"].items():
        report_p99_us = latency.at[(op, "response"), "p99"] / 1000
        assert report_p99_us == pytest.approx(entry["response_us"]["p99"], rel=0.01)


def test_each_process_has_its_counts_and_steady_rate(load_tables, ops):
    """The per-process table (a fleet's workers) adds up each process's rows; its ok / s is its ok sent in the
    fleet's steady window over that window."""
    got = load_tables.processes.set_index("process")
    assert sorted(got.index) == sorted(ops["process"].unique())
    assert_counts_and_steady_rate(got, ops, "process", load_tables.window)


def test_offered_counts_operations_by_their_intended_second(load_tables, ops):
    second = (ops["intended_ns"] - load_tables.origin_ns) // NS
    expected = ops.assign(t_s=second).groupby(["op", "t_s"]).size()
    assert load_tables.offered.set_index(["op", "t_s"])["offered"].to_dict() == expected.to_dict()


def test_a_fleets_workers_are_shown_with_their_share_and_clock(load_tables, ops):
    """load.json's workers become the report's workers table (joined to each one's counts by pid), and an
    incomplete worker and the clock bound become caveats."""
    from dataclasses import replace

    from jetcheck.reports.load_report import fleet_caveats
    from jetcheck.reports.load_view import workers_table

    pids = sorted(int(p) for p in ops["process"].unique())
    workers = [
        {"worker": f"w{n}-host{n}", "host": f"host{n}", "pid": pid, "complete": n == 0, "errors": [] if n == 0 else
         ["never reported its log drained (killed or lost mid-run): none of its log arrived"],
         "client": {"name": "nats-py", "version": "2.16.0"},
         "clock": {"start": {"offset_ns": 250_000_000 * n}, "bound_ns": 150_000}}
        for n, pid in enumerate(pids)
    ]  # fmt: skip
    info = {**load_tables.info, "workers": workers, "clock_bound_ns": 150_000}
    table = workers_table(replace(load_tables, info=info), 0)
    rows = {row[0].text: [c.text for c in row] for row in table.rows}
    first = rows["w0-host0"]
    assert first[2] == str(pids[0]) and first[3] == "nats-py 2.16.0"
    assert first[4] == f"{int((ops['process'] == pids[0]).sum()):,}"
    assert first[8:] == ["+0.000", "0.150", "whole"]
    assert rows["w1-host1"][8:] == ["+250.000", "0.150", "incomplete"]
    caveats = fleet_caveats(info)
    assert caveats[0].startswith(f"Incomplete run: 1 of {len(pids)} workers did not deliver their whole log")
    assert "w1-host1 (host host1" in caveats[0]
    assert (
        "to within 0.150 ms" in caveats[1]
        and "corrected by both offsets, is only good to within 0.300 ms" in caveats[1]
    )
    assert workers_table(load_tables, 0) is None  # one host: no workers table
