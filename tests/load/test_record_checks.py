"""The record checks of the counter and batch-publish scenarios: they pass only when the op log and the server agree."""

from __future__ import annotations

import pyarrow as pa
import pytest

from jetcheck.load.summary import record_checks


def publish_log(ok: int, failed: int = 0) -> pa.Table:
    schema = pa.schema([("op", pa.string()), ("ok", pa.bool_())])
    return pa.table({"op": ["publish"] * (ok + failed), "ok": [True] * ok + [False] * failed}, schema=schema)


def verdicts(scenario: str, table: pa.Table, server: dict) -> dict[str, bool]:
    return {item["check"]: item["pass"] for item in record_checks({"scenario": scenario, "server": server}, table)}


@pytest.mark.parametrize(("total", "passes"), [(7, True), (8, False), (6, False)])
def test_the_counter_check_compares_acked_increments_with_the_counters_values(total, passes):
    """counter: the acked increments (ok publish rows) must equal the sum of the run's counter values."""
    server = {"stream": {"messages": 7, "last_seq": 7}, "counter": {"subjects": 2, "total": total}}
    assert verdicts("counter", publish_log(7, failed=1), server)["publish rows == sum of counter values"] is passes


def test_the_counter_check_fails_without_the_counters_values():
    """counter: a run whose counter values were not read does not pass the check."""
    assert not verdicts("counter", publish_log(3), {"stream": {"messages": 3}})["publish rows == sum of counter values"]


@pytest.mark.parametrize(("messages", "passes"), [(50, True), (49, False), (51, False)])
def test_the_batch_check_compares_committed_batches_with_stored_messages(messages, passes):
    """batch-publish: ok rows (committed batches) x 10 must equal the stream's messages."""
    server = {"stream": {"messages": messages, "last_seq": messages}}
    assert verdicts("batch-publish", publish_log(5, failed=2), server)["publish rows x 10 == stream messages"] is passes


@pytest.mark.parametrize("scenario", ["counter", "batch-publish", "publish-async"])
def test_a_run_that_logged_no_operation_fails(scenario):
    """A run whose users never ran (e.g. a client driver that exited at start) logged nothing: 0 rows equal 0
    stored messages, but the run does not pass."""
    server = {"stream": {"messages": 0, "last_seq": 0}, "counter": {"subjects": 0, "total": 0}}
    assert verdicts(scenario, publish_log(0), server)["operations logged"] is False
