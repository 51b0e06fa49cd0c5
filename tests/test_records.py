"""The shared result record and its JSON-lines file."""

from __future__ import annotations

import json

import pytest

from jetcheck.records import (
    OP_FIELDS,
    SAMPLE_FIELDS,
    CheckResult,
    arrow_schema,
    read_results,
    shared_loop_note,
    write_results,
)


def _result(**changes) -> CheckResult:
    base = dict(
        id="purge.keep",
        status="pass",
        area="purge",
        title="t",
        level="MUST",
        source="ADR-10",
        min_version="2.3.0",
        server_version="2.15.1",
        client={"name": "nats-py", "version": "2.16.0"},
        duration_s=0.01,
    )
    return CheckResult(**{**base, **changes})


def test_results_round_trip_through_jsonl(tmp_path):
    """Written results read back equal, one JSON object per line."""
    path = tmp_path / "results.jsonl"
    results = [_result(), _result(status="fail", message="expected 1, got 2", observed={"order": "dedup-first"})]
    write_results(path, results)
    assert list(read_results(path)) == results
    lines = path.read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["pass", "fail"]


def test_results_carry_the_required_fields():
    """Every line has the fields the design names."""
    data = json.loads(_result().to_json())
    for name in (
        "id",
        "status",
        "area",
        "title",
        "level",
        "source",
        "server_version",
        "client",
        "duration_s",
        "message",
    ):
        assert name in data


def test_unknown_status_is_refused():
    """Only pass, fail, error, na and skip are statuses."""
    with pytest.raises(ValueError, match="status 'ok'"):
        _result(status="ok")


def test_log_schemas_build_arrow_schemas():
    """The load log schemas are valid Arrow schemas with unique column names."""
    for fields in (OP_FIELDS, SAMPLE_FIELDS):
        schema = arrow_schema(fields)
        assert schema.names == [name for name, _ in fields]
        assert len(set(schema.names)) == len(schema.names)


def test_a_load_run_caveats_only_processes_that_ran_both_roles():
    """The shared-loop caveat names exactly the processes whose users both published and consumed."""
    separate = {"process_roles": {"11": ["publisher"], "12": ["consumer"]}}
    shared = {"process_roles": {"11": ["consumer", "publisher"], "12": ["publisher"], "13": ["consumer", "publisher"]}}
    assert shared_loop_note(separate) is None
    assert shared_loop_note({}) is None  # load.json written before roles were recorded
    assert shared_loop_note(shared).startswith("publishers and consumers shared process(es) 11, 13:")


def test_results_written_before_a_field_existed_still_read(tmp_path):
    """A results.jsonl line without the newer fields (subject, detail) reads with their defaults."""
    path = tmp_path / "results.jsonl"
    old = json.loads(_result(status="fail", message="expected 1, got 2").to_json())
    del old["detail"], old["subject"]
    path.write_text(json.dumps(old) + "\n")
    (result,) = read_results(path)
    assert (result.message, result.detail, result.subject) == ("expected 1, got 2", "", "server")
