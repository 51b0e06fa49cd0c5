"""Conformance summaries, the compatibility matrix, baseline comparison and input detection."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from jetcheck.errors import ConfigError
from jetcheck.reports import compare
from jetcheck.reports.conformance_report import aggregate_conformance
from jetcheck.reports.inputs import resolve, resolve_all
from jetcheck.reports.load_report import LoadTables
from jetcheck.testing.synthetic import sample_results, write_certify_run, write_load_run


def _certify(folder: Path, **kwargs) -> Path:
    return write_certify_run(folder, sample_results(**kwargs))


class TestSummary:
    def test_counts_by_area_and_level(self, tmp_path):
        """The summary's counts per area, level and status add up to the results."""
        tables = aggregate_conformance([resolve(_certify(tmp_path / "a"))])
        results = tables.results
        assert tables.summary["total"].sum() == len(results)
        for (area, level), group in results.groupby(["area", "level"]):
            summary = tables.summary
            row = summary[(summary["area"] == area) & (summary["level"] == level)].iloc[0]
            assert row["pass"] == (group["status"] == "pass").sum()
            assert row["fail"] == (group["status"] == "fail").sum()

    def test_failures_carry_expected_and_actual(self, tmp_path):
        """A failed rule is listed with its message, observed values and server log."""
        tables = aggregate_conformance([resolve(_certify(tmp_path / "a"))])
        failure = tables.failures.set_index("id").loc["publish.rule-02"]
        assert "expected" in failure["message"] and "actual" in failure["message"]
        assert failure["observed"] == '{"duplicate": false}'
        assert [verdict.must_failures for verdict in tables.verdicts] == [1]

    def test_na_rows_keep_their_reason(self, tmp_path):
        """na and skip results are listed with the reason given by the check."""
        tables = aggregate_conformance([resolve(_certify(tmp_path / "a"))])
        assert not tables.not_applicable.empty
        assert tables.not_applicable["message"].str.len().gt(0).all()

    def test_credentials_in_messages_are_redacted(self, tmp_path):
        """A URL with user:password in a message reaches the report without its credentials."""
        results = sample_results()
        results[0] = dataclasses.replace(results[0], status="error", message="connect nats://bob:s3cret@h:4222 failed")
        tables = aggregate_conformance([resolve(write_certify_run(tmp_path / "a", results))])
        assert "s3cret" not in tables.results.to_csv()


class TestMatrix:
    def test_one_column_per_server_version_and_client(self, tmp_path):
        """Result sets against different servers become columns; a rule failing on one shows fail there only."""
        old = _certify(tmp_path / "old", server_version="2.10.25", failing=("kv.rule-01",))
        new = _certify(tmp_path / "new", server_version="2.15.1", failing=())
        tables = aggregate_conformance(resolve_all([str(new), str(old)]))
        columns = [c for c in tables.matrix.columns if c.startswith("server ")]
        assert columns == ["server 2.10.25 · nats-py 2.16.0", "server 2.15.1 · nats-py 2.16.0"]
        row = tables.matrix.set_index("id").loc["kv.rule-01"]
        assert (row[columns[0]], row[columns[1]]) == ("fail", "pass")

    def test_columns_follow_release_order_with_a_release_candidate_before_its_release(self, tmp_path):
        """Server versions are ordered as releases: 2.9.10 before 2.12.0-RC.1 before 2.12.0."""
        folders = [_certify(tmp_path / v, server_version=v) for v in ("2.12.0", "2.12.0-RC.1", "2.9.10")]
        tables = aggregate_conformance(resolve_all([str(folder) for folder in folders]))
        columns = [c.split(" · ")[0] for c in tables.matrix.columns if c.startswith("server ")]
        assert columns == ["server 2.9.10", "server 2.12.0-RC.1", "server 2.12.0"]

    def test_same_server_and_client_twice_are_told_apart(self, tmp_path):
        """Two result sets with the same server and client get the result set's name in the column."""
        a, b = _certify(tmp_path / "a"), _certify(tmp_path / "b")
        tables = aggregate_conformance(resolve_all([str(a), str(b)]))
        assert len([c for c in tables.matrix.columns if c.startswith("server ")]) == 2


class TestCompare:
    def test_conformance_regression_and_fix(self, tmp_path):
        """pass -> fail is a regression, fail -> pass a fix."""
        before = aggregate_conformance([resolve(_certify(tmp_path / "b", failing=("kv.rule-01",)))])
        after = aggregate_conformance([resolve(_certify(tmp_path / "a", failing=("stream.rule-00",)))])
        changes = compare.compare_conformance(after, before).set_index("id")["change"].to_dict()
        assert changes == {"kv.rule-01": "fixed", "stream.rule-00": "regression"}

    @staticmethod
    def _load(ok_per_s: float, p99: float) -> LoadTables:
        totals = pd.DataFrame({"scenario": ["mixed"], "op": ["publish"], "ok_per_s": [ok_per_s]})
        latency = pd.DataFrame({"scenario": ["mixed"], "op": ["publish"], "metric": ["response"], "p99": [p99]})
        empty = pd.DataFrame()
        return LoadTables("x", {}, 0, 1.0, 1.0, totals, empty, latency, empty, empty, empty, empty)

    def test_throughput_drop_and_p99_rise_beyond_threshold_are_flagged(self):
        """A 20 % throughput drop and a 50 % p99 rise are regressions at the default thresholds."""
        result = compare.compare_load(self._load(800, 1.5e6), self._load(1000, 1e6))
        assert result.set_index("measure")["regression"].to_dict() == {"throughput ok/s": True, "response p99 ns": True}

    def test_changes_within_threshold_are_not_flagged(self):
        """A 5 % throughput drop and a 10 % p99 rise are not regressions."""
        result = compare.compare_load(self._load(950, 1.1e6), self._load(1000, 1e6))
        assert not result["regression"].any()


class TestInputs:
    def test_detects_run_certify_and_load_folders(self, tmp_path):
        """A folder is a run, a certify or a load folder by the files it holds."""
        _certify(tmp_path / "run" / "certify")
        from jetcheck.testing.synthetic import LoadSpec

        write_load_run(tmp_path / "run" / "load", LoadSpec(records=100, duration_s=1))
        assert resolve(tmp_path / "run").kind == "run"
        assert resolve(tmp_path / "run" / "certify").kind == "certify"
        assert resolve(tmp_path / "run" / "load").kind == "load"
        assert resolve(tmp_path / "run" / "load").label == "run"

    def test_empty_folder_is_a_config_error(self, tmp_path):
        """A folder without results is refused with one clear line."""
        with pytest.raises(ConfigError, match="no jetcheck results here"):
            resolve(tmp_path)


def test_jetcheck_report_reads_each_result_file_once(tmp_path, monkeypatch):
    """`jetcheck report` reads a result set's results.jsonl and run.json once: its check before anything starts
    reads them, and the tables and the verdict use what it read."""
    import collections

    from jetcheck.cli import main
    from jetcheck.reports import inputs

    folder = _certify(tmp_path / "run")
    reads: collections.Counter[str] = collections.Counter()
    read_results, read_json = inputs.read_results, inputs._json
    monkeypatch.setattr(inputs, "read_results", lambda path: reads.update([path.name]) or read_results(path))
    monkeypatch.setattr(inputs, "_json", lambda path, types: reads.update([path.name]) or read_json(path, types))
    assert main(["report", "--in", str(folder), "--out", str(tmp_path / "report")]) == 0
    assert reads == {"results.jsonl": 1, "run.json": 1}
