"""Synthetic load logs shaped by jetcheck.records: what a report's warm-up aggregates (reports.warm), and what the
reports' tests and benchmark read (jetcheck.testing.synthetic hands it on).

They mimic an open-loop run: operations scheduled at a fixed rate, a small send delay, log-normal service times
with a slow tail, a share of failures, deliveries that carry an end-to-end latency, and one server sample a second.
Everything derives from a seed, so a test can regenerate or read back exactly what was written.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jetcheck.records import LOAD_FILE, OP_FIELDS, OPS_DIR, SAMPLE_FIELDS, SAMPLES_DIR, arrow_schema

ERROR_CLASSES = ("TimeoutError", "NoRespondersError", "APIError")
START_NS = 1_760_000_000_000_000_000  # a fixed wall-clock origin keeps generated files reproducible


@dataclass(frozen=True)
class LoadSpec:
    records: int
    duration_s: float = 60.0
    scenario: str = "mixed"
    ops: tuple[str, ...] = ("publish", "consume")
    processes: int = 2
    rows_per_file: int = 1_000_000
    error_rate: float = 0.01
    seed: int = 1
    run_id: str = "synthetic"
    start_ns: int = START_NS


def _strings(values: list[str], indices: np.ndarray):
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(values)).cast(pa.string())


def _ops_table(spec: LoadSpec, rng: np.random.Generator, first: int, count: int, pid: int):
    import pyarrow as pa

    index = np.arange(first, first + count, dtype=np.int64)
    interval_ns = spec.duration_s * 1e9 / spec.records
    intended = spec.start_ns + (index * interval_ns).astype(np.int64)
    # Send delay: mostly tens of microseconds, one in a thousand stalls for milliseconds (a GC, a full buffer).
    delay = rng.exponential(20_000, count).astype(np.int64)
    stalls = rng.random(count) < 0.001
    delay[stalls] += rng.integers(1_000_000, 20_000_000, int(stalls.sum()))
    service = rng.lognormal(np.log(400_000), 0.6, count).astype(np.int64) + 1
    start = intended + delay
    end = start + service
    op_index = rng.integers(0, len(spec.ops), count)
    ok = rng.random(count) >= spec.error_rate
    error_index = rng.integers(0, len(ERROR_CLASSES), count)
    error_class = np.where(ok, 0, error_index + 1)
    is_delivery = np.array([name == "consume" for name in spec.ops])[op_index]
    e2e = np.where(is_delivery & ok, service + rng.integers(50_000, 500_000, count), -1)
    columns = {
        "run_id": _strings([spec.run_id], np.zeros(count)),
        "process": pa.array(np.full(count, pid, dtype=np.int32)),
        "user": pa.array((index % 10).astype(np.int32)),
        "scenario": _strings([spec.scenario], np.zeros(count)),
        "op": _strings(list(spec.ops), op_index),
        "stream": _strings(["JC_LOAD"], np.zeros(count)),
        "subject": _strings([f"jc.load.{name}" for name in spec.ops], op_index),
        "payload_size": pa.array(np.full(count, 128, dtype=np.int32)),
        "intended_ns": pa.array(intended),
        "start_ns": pa.array(start),
        "end_ns": pa.array(end),
        "ok": pa.array(ok),
        "error_class": _strings(["", *ERROR_CLASSES], error_class),
        "error_code": pa.array(np.where(ok, 0, 408).astype(np.int32)),
        "stream_seq": pa.array(np.where(ok, index + 1, 0)),
        "delivery_count": pa.array(is_delivery.astype(np.int32)),
        "e2e_ns": pa.array(e2e.astype(np.int64)),
    }
    schema = arrow_schema(OP_FIELDS)
    return pa.table([columns[name] for name in schema.names], schema=schema)


def _samples_table(spec: LoadSpec, rng: np.random.Generator):
    import pyarrow as pa

    seconds = int(spec.duration_s) + 1
    ts = spec.start_ns + np.arange(seconds, dtype=np.int64) * 1_000_000_000
    per_second = spec.records / spec.duration_s
    msgs = (np.arange(seconds) * per_second).astype(np.int64)
    columns = {
        "run_id": pa.array([spec.run_id] * seconds),
        "ts_ns": pa.array(ts),
        "cpu": pa.array(rng.uniform(20, 80, seconds)),
        "mem": pa.array((50_000_000 + np.arange(seconds) * 100_000).astype(np.int64)),
        "in_msgs": pa.array(msgs),
        "out_msgs": pa.array(msgs // 2),
        "in_bytes": pa.array(msgs * 128),
        "out_bytes": pa.array(msgs * 64),
        "js_messages": pa.array(msgs // 2),
        "js_bytes": pa.array(msgs * 64),
        "slow_consumers": pa.array(np.zeros(seconds, dtype=np.int64)),
    }
    schema = arrow_schema(SAMPLE_FIELDS)
    return pa.table([columns[name] for name in schema.names], schema=schema)


def write_load_run(folder: Path, spec: LoadSpec) -> Path:
    """Write ops/, samples/ and load.json for `spec` under `folder`; return `folder`."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(spec.seed)
    (folder / OPS_DIR).mkdir(parents=True, exist_ok=True)
    (folder / SAMPLES_DIR).mkdir(parents=True, exist_ok=True)
    files = max(spec.processes, -(-spec.records // spec.rows_per_file))
    bounds = np.linspace(0, spec.records, files + 1).astype(np.int64)
    for n, (first, last) in enumerate(itertools.pairwise(bounds)):
        pid = 1000 + n % spec.processes
        table = _ops_table(spec, rng, int(first), int(last - first), pid)
        pq.write_table(table, folder / OPS_DIR / f"ops-{pid}-{n // spec.processes}.parquet")
    pq.write_table(_samples_table(spec, rng), folder / SAMPLES_DIR / "samples-0.parquet")
    meta = {
        "run_id": spec.run_id,
        "scenario": spec.scenario,
        "mode": "open",
        "target_rate": spec.records / spec.duration_s,
        "users": 10,
        "processes": spec.processes,
        "duration_s": spec.duration_s,
        "server": {"version": "2.15.1", "url": "nats://127.0.0.1:4222"},
        "start_ns": spec.start_ns,
        "end_ns": spec.start_ns + int(spec.duration_s * 1e9),
        # every process's rows mix all of spec.ops, so with publishes and consumes each process played both roles
        "process_roles": {
            str(1000 + n): sorted({"publisher" if op == "publish" else "consumer" for op in spec.ops})
            for n in range(spec.processes)
        },
    }
    (folder / LOAD_FILE).write_text(json.dumps(meta, indent=2))
    return folder
