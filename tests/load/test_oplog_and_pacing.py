"""The op log writes exact rows in the shared schema, rolls files, and the open-loop schedule keeps its pace."""

from __future__ import annotations

import pyarrow.parquet as pq

from jetcheck.load.oplog import OpLog
from jetcheck.load.pacing import Schedule
from jetcheck.records import OP_FIELDS, arrow_schema


def test_rows_round_trip_exactly_in_the_shared_schema(tmp_path):
    """Every column of OP_FIELDS comes back as written, nanoseconds included."""
    log = OpLog(tmp_path, "run-1", "publish-async")
    ctx = log.context(3, "publish", "S", "jc.load.1.3", 128)
    log.extend((ctx, 1_000_000_123, 1_000_000_456, 1_000_789_001, 0, 0, 42, 0, -1))
    log.add(ctx, 5, 6, 7, log.error("Overflow"))
    files = log.close()
    table = pq.read_table(files[0])
    assert table.schema == arrow_schema(OP_FIELDS)
    first, second = table.to_pylist()
    assert first == {
        "run_id": "run-1", "process": log.pid, "user": 3, "scenario": "publish-async", "op": "publish",
        "stream": "S", "subject": "jc.load.1.3", "payload_size": 128, "intended_ns": 1_000_000_123,
        "start_ns": 1_000_000_456, "end_ns": 1_000_789_001, "ok": True, "error_class": "", "error_code": 0,
        "stream_seq": 42, "delivery_count": 0, "e2e_ns": -1,
    }  # fmt: skip
    assert (second["ok"], second["error_class"]) == (False, "Overflow")


def test_files_roll_by_rows_and_are_named_per_process(tmp_path):
    """Past roll_rows a new ops-<pid>-<n>.parquet starts; no hidden part file is left after close."""
    log = OpLog(tmp_path, "run-1", "s", chunk_rows=1000, roll_rows=2500)
    ctx = log.context(0, "publish", "S", "x", 1)
    for i in range(10_000):
        log.add(ctx, i, i, i + 1)
    files = log.close()
    assert [f.name for f in files] == [f"ops-{log.pid}-{n}.parquet" for n in range(4)]
    assert sum(pq.read_metadata(f).num_rows for f in files) == 10_000
    assert not list((tmp_path / "ops").glob(".*"))


def test_a_second_log_in_the_same_directory_continues_the_numbering(tmp_path):
    """A restarted test (web UI) never overwrites the files of the previous one."""
    for _ in range(2):
        log = OpLog(tmp_path, "run-1", "s")
        log.add(log.context(0, "publish", "S", "x", 1), 1, 2, 3)
        log.close()
    assert len(list((tmp_path / "ops").glob("ops-*.parquet"))) == 2


def test_schedule_intends_sends_at_exact_intervals_however_late_it_is_asked():
    """At 1000/s, asking 10.5 ms after start yields operations 0..10 intended 1 ms apart."""
    schedule = Schedule(1000.0, start_ns=0)
    due = schedule.take_due(10_500_000)
    assert list(due) == list(range(11))
    assert [schedule.intended_ns(i) for i in due][-2:] == [9_000_000, 10_000_000]
    assert list(schedule.take_due(10_600_000)) == []
    assert list(schedule.take_due(12_000_000)) == [11, 12]
