"""The fleet's pieces without Locust: clock readings, the master's axis, chunked logs with checksums, the options."""

from __future__ import annotations

import argparse
from array import array

import numpy as np
import pyarrow.parquet as pq
import pytest

from jetcheck.errors import ConfigError
from jetcheck.load import fleet, fleet_cli
from jetcheck.load.clock import ClockReading, MasterAxis, best_reading
from jetcheck.load.oplog import NO_E2E, rows_to_table

MS = 1_000_000


def test_a_reading_is_the_offset_at_the_midpoint_bounded_by_half_the_round_trip():
    """A worker 250 ms ahead, read 1 ms into a 4 ms round trip: offset 249 ms, which is within the 2 ms bound."""
    reading = ClockReading(sent_ns=1_000 * MS, worker_ns=1_001 * MS + 250 * MS, received_ns=1_004 * MS)
    assert reading.offset_ns == 249 * MS
    assert reading.bound_ns == 2 * MS
    assert abs(reading.offset_ns - 250 * MS) <= reading.bound_ns


def test_the_best_reading_is_the_shortest_round_trip():
    readings = [ClockReading(0, 5, 10), ClockReading(100, 101, 102), ClockReading(200, 230, 260)]
    assert best_reading(readings) == readings[1]


def test_the_axis_interpolates_between_the_start_and_end_offsets():
    """Start offset 100 ms, end offset 110 ms (a drifting clock): halfway through the worker's span, 105 ms."""
    start = ClockReading(0, 100 * MS + 1, 2)
    end = ClockReading(1_000 * MS, 1_110 * MS + 1, 1_000 * MS + 2)
    axis = MasterAxis(start, end)
    worker_times = np.array([start.worker_ns, (start.worker_ns + end.worker_ns) // 2, end.worker_ns + 5 * MS])
    shifted = axis.shift(worker_times)
    assert list(worker_times - shifted) == [100 * MS, 105 * MS, 110 * MS]
    assert MasterAxis(start).shift(start.worker_ns) == start.worker_ns - 100 * MS


def _op_file(path, intended):
    """An op-log file whose rows were intended, sent and acked at the times `intended`."""
    rows = array("q")
    for at in intended:
        rows.extend((0, at, at, at, 0, 0, 1, 0, NO_E2E))
    pq.write_table(rows_to_table(rows, ((0, "publish", "S", "s.1", 8),), ("",), "run", "publish-async", 7), path)


def test_a_file_sent_in_chunks_arrives_whole_and_on_the_masters_clock(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet, "CHUNK_BYTES", 1000)
    worker_run = tmp_path / "worker"
    (worker_run / "ops").mkdir(parents=True)
    _op_file(worker_run / "ops" / "ops-7-0.parquet", [10 * MS + i for i in range(500)])
    sent: list[tuple[str, dict]] = []
    shipper = fleet.LogShipper(worker_run, lambda kind, data: sent.append((kind, data)))
    shipper.ship_new()
    shipper.ship_new()  # a file goes once
    manifest = shipper.manifest()
    assert len(sent) > 2 and {kind for kind, _ in sent} == {fleet.LOG_CHUNK}
    size = (worker_run / "ops" / "ops-7-0.parquet").stat().st_size
    assert manifest == [{"file": "ops/ops-7-0.parquet", "bytes": size}]
    receiver = fleet.LogReceiver(tmp_path / "master")
    done = [receiver.chunk("w1-hostb", data) for _, data in sent]
    assert done[-1] == "ops/ops-7-0.parquet" and not any(done[:-1])
    arrived = receiver.incoming_dir("w1-hostb") / "ops/ops-7-0.parquet"
    assert arrived.read_bytes() == (worker_run / "ops" / "ops-7-0.parquet").read_bytes()
    axis = MasterAxis(ClockReading(0, 3 * MS + 1, 2))  # the worker is 3 ms ahead
    target = tmp_path / "master" / "ops" / "ops-w1-7-0.parquet"
    assert fleet.place_on_master_axis(arrived, target, axis) == 500
    placed = pq.read_table(target)
    assert placed["intended_ns"].to_pylist()[0] == 7 * MS
    assert placed["end_ns"].to_pylist()[-1] == 7 * MS + 499


def test_a_bad_chunk_is_an_error_that_names_the_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet, "CHUNK_BYTES", 100)
    source = tmp_path / "f.parquet"
    source.write_bytes(bytes(range(256)) * 2)
    chunks = list(fleet.file_chunks(source, "ops/f.parquet"))
    receiver = fleet.LogReceiver(tmp_path / "master")
    receiver.chunk("w2-hostc", chunks[0])
    damaged = {**chunks[1], "data": b"\x00" + chunks[1]["data"][1:]}
    with pytest.raises(fleet.ChunkError, match=r"worker w2-hostc: chunk 2 of 6 of ops/f\.parquet does not match"):
        receiver.chunk("w2-hostc", damaged)
    with pytest.raises(fleet.ChunkError, match=r"w2-hostc: chunk 3 of ops/f\.parquet arrived after chunk 1"):
        receiver.chunk("w2-hostc", chunks[2])


def test_a_file_whose_chunks_stopped_coming_is_kept_apart_as_partial(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet, "CHUNK_BYTES", 100)
    source = tmp_path / "f.parquet"
    source.write_bytes(b"y" * 450)
    chunks = list(fleet.file_chunks(source, "ops/f.parquet"))
    receiver = fleet.LogReceiver(tmp_path / "master")
    for chunk in chunks[:2]:
        receiver.chunk("w3-hostd", chunk)
    assert receiver.unfinished("w3-hostd") == [{"file": "partial/w3-hostd/ops/f.parquet", "chunks": 2, "of": 5}]
    assert (tmp_path / "master" / "partial/w3-hostd/ops/f.parquet").read_bytes() == b"y" * 200


def test_a_chunk_cannot_name_a_file_outside_the_run_folder(tmp_path):
    receiver = fleet.LogReceiver(tmp_path)
    chunk = {"file": "../../etc/x", "index": 0, "count": 1, "sha256": "", "file_sha256": "", "file_bytes": 0}
    with pytest.raises(fleet.ChunkError, match="outside its run folder"):
        receiver.chunk("w0-a", {**chunk, "data": b""})


def test_a_worker_missing_its_drain_makes_an_incomplete_record():
    record = fleet.FleetRecord("client-1", 2, host="b", pid=9)
    record.clock["start"] = [ClockReading(0, 5, 10)]
    assert not record.complete
    record.drained = {"rows": 3}
    assert record.complete and record.describe()["clock"]["bound_ns"] == 5


def _args(**given):
    values = {
        "load_master": False,
        "worker": False,
        "expect_workers": None,
        "master_bind_host": "127.0.0.1",
        "master_bind_port": 5557,
        "master_host": None,
        "master_port": 5557,
        "processes": None,
    }
    return argparse.Namespace(**{**values, **given})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"load_master": True}, "--master needs --expect-workers"),
        ({"worker": True}, "--worker needs --master-host"),
        ({"load_master": True, "expect_workers": 2, "processes": 2}, "--processes runs workers on this host"),
        ({"expect_workers": 2}, "--expect-workers applies to --master only"),
        ({"master_host": "h"}, "--master-host applies to --worker only"),
    ],
)
def test_the_fleet_options_are_checked_together(given, message):
    with pytest.raises(ConfigError, match=message):
        fleet_cli.validate_roles(_args(**given))


def test_the_master_prints_the_command_a_worker_runs():
    args = _args(load_master=True, expect_workers=3, master_bind_host="10.1.2.3", master_bind_port=6000)
    assert fleet_cli.worker_command(args) == "jetcheck load --worker --master-host 10.1.2.3 --master-port 6000"
    everywhere = fleet_cli.worker_command(_args(load_master=True, expect_workers=3, master_bind_host="0.0.0.0"))
    assert "--master-host 0.0.0.0" not in everywhere


def test_an_end_to_end_latency_between_two_hosts_is_corrected_by_both_clocks(tmp_path):
    """The publisher (pid 41) runs 100 ms behind the master, the consumer 250 ms ahead; a message delivered 1 ms
    after it was stamped measures 351 ms on the raw clocks and 1 ms once both offsets are removed. A subject whose
    publisher is unknown keeps its latency as measured."""
    true_stamp = 5_000 * MS
    delivered_local = true_stamp + 1 * MS + 250 * MS
    stamp_local = true_stamp - 100 * MS
    rows = array("q")
    for ctx in (0, 1):
        rows.extend((ctx, delivered_local, delivered_local, delivered_local, 0, 0, 1, 1, delivered_local - stamp_local))
    contexts = ((0, "consume", "S", "jc1.load.41.0", 8), (0, "consume", "S", "jc1.load.99.0", 8))
    source = tmp_path / "ops-7-0.parquet"
    pq.write_table(rows_to_table(rows, contexts, ("",), "run", "end-to-end", 7), source)
    consumer = MasterAxis(ClockReading(0, 250 * MS + 1, 2))
    publisher = MasterAxis(ClockReading(0, -100 * MS + 1, 2))
    fleet.place_on_master_axis(source, tmp_path / "placed.parquet", consumer, {41: publisher, 7: consumer})
    placed = pq.read_table(tmp_path / "placed.parquet")
    assert placed["e2e_ns"].to_pylist() == [1 * MS, 351 * MS]
    assert placed["end_ns"].to_pylist() == [true_stamp + 1 * MS] * 2
