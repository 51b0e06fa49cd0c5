"""Load-log aggregation in Spark: throughput, latency percentiles, errors and server samples over time.

Only aggregates leave Spark: per-second counts, percentile rows, per-second sample summaries. All times are
seconds since the run's origin (load.json start_ns, or the first intended send), one axis for every chart.
Rates and whole-run percentiles cover the steady window (jetcheck.load.window, the definition `jetcheck load`
prints too); throughput, latency and errors over time cover the whole run.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from jetcheck.load.window import SteadyWindow, steady_window
from jetcheck.records import OP_FIELDS, SAMPLE_FIELDS, shared_loop_note
from jetcheck.reports import buckets
from jetcheck.reports.inputs import ResultSet

NS = 1_000_000_000
# Latency-over-time charts get about this many intervals, each at least a second long.
TIME_SLOTS = 120
METRICS = {
    "response": "response time: reply - intended send (includes send delay)",
    "service": "service time: reply - actual send",
    "send_delay": "send delay: actual send - intended send (failed operations included)",
    "e2e": "end-to-end: delivery - publish stamp (one machine, one clock)",
}
GROUP = ("scenario", "op")
_SPARK_TYPES = {"string": "string", "int32": "int", "int64": "bigint", "bool": "boolean", "double": "double"}


def spark_schema(fields: tuple[tuple[str, str], ...]) -> str:
    """A Spark DDL schema string derived from a records.py field list."""
    return ", ".join(f"`{name}` {_SPARK_TYPES[kind]}" for name, kind in fields)


@dataclass
class LoadTables:
    """The aggregates one load folder reduces to (all small pandas frames)."""

    label: str
    info: dict[str, Any]
    origin_ns: int
    span_s: float
    slot_s: float
    # scenario, op, ops, ok, errors (whole run); steady_ok: ok sent in the steady window, ok_per_s their rate
    totals: pd.DataFrame
    throughput: pd.DataFrame  # scenario, op, t_s, ops, ok, errors
    latency: pd.DataFrame  # scenario, op, metric, count, invalid, min, p50 .. p99_99, max (ns), steady window
    latency_over_time: pd.DataFrame  # scenario, op, metric, t_s, count, p50 .. max (ns)
    distribution: pd.DataFrame  # scenario, op, metric, quantile, value_ns (steady window)
    errors: pd.DataFrame  # scenario, op, t_s, error_class, error_code, count
    samples: pd.DataFrame  # t_s, cpu, mem, *_rate per second
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)  # what limits how far the figures can be trusted
    # SteadyWindow.describe(): start_ns, end_ns, seconds, warmup_s, users, whole_run, warmup_ops, steady_ops,
    # winddown_ops and `definition`, the sentence to show with the rates and percentiles; empty without op logs
    window: dict[str, Any] = field(default_factory=dict)


def read_ops(spark, result_set: ResultSet):
    return spark.read.schema(spark_schema(OP_FIELDS)).parquet(*[str(p) for p in result_set.op_files()])


def _steady_window(ops) -> tuple[SteadyWindow | None, dict[str, Any]]:
    """The run's steady window from its users' spans, and its description with the operations it leaves out."""
    from pyspark.sql import functions as F

    spans = ops.groupBy("process", "user").agg(F.min("start_ns").alias("first"), F.max("start_ns").alias("last"))
    window = steady_window((row["first"], row["last"]) for row in spans.collect())
    if window is None:
        return None, {}
    sent = F.col("start_ns")
    row = ops.agg(
        F.count(F.when(sent < window.start_ns, 1)).alias("before"),
        F.count(F.when(sent >= window.end_ns, 1)).alias("after"),
        F.count(F.lit(1)).alias("all"),
    ).first()
    return window, window.describe(row["before"], row["all"] - row["before"] - row["after"], row["after"])


def _origin_and_span(ops, info: dict[str, Any]) -> tuple[int, int, int]:
    from pyspark.sql import functions as F

    row = ops.agg(F.min("intended_ns").alias("first"), F.max("end_ns").alias("last"), F.count(F.lit(1)).alias("n"))
    first, last, count = row.first()
    start = info.get("start_ns")
    origin = min(v for v in (first, start if isinstance(start, int) else None) if v is not None) if count else 0
    return int(origin or 0), int(last or 0), int(count)


METRIC_NAMES = tuple(METRICS)
WHOLE_RUN = -1  # the slot of the whole-run bucket rows
PARTIAL_SCHEMA = (
    "scenario string, op string, metric string, slot int, bucket bigint, count bigint, vmin bigint, vmax bigint"
)
_LATENCY_INPUT = ("scenario", "op", "ok", "intended_ns", "start_ns", "end_ns", "e2e_ns")
_SLOT_LIMIT = (1 << 24) - 2
_REDUCE_AT = 2_000_000  # partial rows held before they are merged


def _metric_values(columns: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric: (mask of the rows it applies to, values of those rows). Mirrors METRICS."""
    ok = columns["ok"]
    e2e = columns["e2e_ns"]
    return {
        "response": (ok, (columns["end_ns"] - columns["intended_ns"])[ok]),
        "service": (ok, (columns["end_ns"] - columns["start_ns"])[ok]),
        "send_delay": (np.ones_like(ok), columns["start_ns"] - columns["intended_ns"]),
        # e2e_ns is -1 on operations that are not stamped deliveries: they have no e2e value at all
        "e2e": (ok & (e2e != -1), e2e[ok & (e2e != -1)]),
    }


class PartialHistograms:
    """Bucket counts of one Spark partition, built with numpy from Arrow batches (runs in the executors).

    Two tables in one pass: whole-run buckets at full precision (slot WHOLE_RUN) and per-time-slot buckets at
    coarse precision. Rows are keyed by one packed int64 (group, metric, slot, bucket) and merged by sorting.
    """

    def __init__(self, origin_ns: int, slot_ns: int, window: SteadyWindow | None = None):
        self.origin_ns, self.slot_ns = origin_ns, slot_ns
        self.window = window  # the rows in the whole-run buckets; None: every row
        self.groups: dict[tuple[str, str], int] = {}
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.held = 0

    def _group_codes(self, batch) -> np.ndarray:
        import pyarrow.compute as pc

        scenario = pc.dictionary_encode(batch.column("scenario"))
        op = pc.dictionary_encode(batch.column("op"))
        pairs = {}
        for s_index, s_name in enumerate(scenario.dictionary.to_pylist()):
            for o_index, o_name in enumerate(op.dictionary.to_pylist()):
                pairs[(s_index, o_index)] = self.groups.setdefault((s_name, o_name), len(self.groups))
        width = len(op.dictionary)
        lookup = np.zeros(max(1, len(scenario.dictionary) * width), dtype=np.int64)
        for (s_index, o_index), code in pairs.items():
            lookup[s_index * width + o_index] = code
        s_idx = scenario.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        o_idx = op.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return lookup[s_idx * width + o_idx]

    @staticmethod
    def _key(group: np.ndarray, metric: int, slot: np.ndarray, bucket: np.ndarray) -> np.ndarray:
        return (((group << 2 | metric) << 24 | (slot + 1)) << 18) | (bucket + 1)

    def add(self, batch) -> None:
        columns = {name: batch.column(name).to_numpy(zero_copy_only=False) for name in _LATENCY_INPUT[2:]}
        group = self._group_codes(batch)
        slot = np.clip((columns["end_ns"] - self.origin_ns) // self.slot_ns, 0, _SLOT_LIMIT)
        sent = columns["start_ns"]
        in_window = np.ones(len(sent), dtype=bool) if self.window is None else self.window.contains(sent)
        per_metric = _metric_values(columns)
        for metric, name in enumerate(METRIC_NAMES):
            mask, values = per_metric[name]
            ones = np.ones(len(values), dtype=np.int64)
            coarse = buckets.bucket_of(values, buckets.COARSE_BITS)
            self.parts.append((self._key(group[mask], metric, slot[mask], coarse), ones, values, values))
            steady = in_window[mask]
            steady_values = values[steady]
            fine = buckets.bucket_of(steady_values)
            whole_slot = np.full(len(steady_values), WHOLE_RUN, dtype=np.int64)
            self.parts.append(
                (self._key(group[mask][steady], metric, whole_slot, fine), ones[steady], steady_values, steady_values)
            )
            self.held += len(values) + len(steady_values)
        if self.held > _REDUCE_AT:
            self._reduce()

    def _reduce(self) -> None:
        if self.parts:
            merged = [np.concatenate(column) for column in zip(*self.parts, strict=True)]
            self.parts = [buckets.reduce_by_key(*merged)]
            self.held = len(self.parts[0][0])

    def batch(self):
        """The merged rows as one Arrow batch of PARTIAL_SCHEMA."""
        import pyarrow as pa

        self._reduce()
        keys, counts, vmin, vmax = self.parts[0] if self.parts else [np.zeros(0, dtype=np.int64)] * 4
        bucket = (keys & ((1 << 18) - 1)) - 1
        slot = ((keys >> 18) & ((1 << 24) - 1)) - 1
        metric = (keys >> 42) & 3
        group = keys >> 44
        names = list(self.groups)
        return pa.RecordBatch.from_pydict(
            {
                "scenario": pa.array([names[g][0] for g in range(len(names))], pa.string()).take(group),
                "op": pa.array([names[g][1] for g in range(len(names))], pa.string()).take(group),
                "metric": pa.array(list(METRIC_NAMES), pa.string()).take(metric),
                "slot": pa.array(slot.astype(np.int32)),
                "bucket": pa.array(bucket),
                "count": pa.array(counts),
                "vmin": pa.array(vmin),
                "vmax": pa.array(vmax),
            }
        )


def partial_histograms(batches, origin_ns: int, slot_ns: int, window: SteadyWindow | None = None):
    """mapInArrow function: Arrow batches of _LATENCY_INPUT in, one batch of PARTIAL_SCHEMA out."""
    histograms = PartialHistograms(origin_ns, slot_ns, window)
    for batch in batches:
        if batch.num_rows:
            histograms.add(batch)
    yield histograms.batch()


def _bucket_tables(ops, origin_ns: int, slot_ns: int, window: SteadyWindow):
    """(steady-window buckets, per-slot buckets), merged across partitions in Spark; persisted by the caller."""
    from pyspark.sql import functions as F

    partial = ops.select(*_LATENCY_INPUT).mapInArrow(
        functools.partial(partial_histograms, origin_ns=origin_ns, slot_ns=slot_ns, window=window), PARTIAL_SCHEMA
    )
    return partial.groupBy("scenario", "op", "metric", "slot", "bucket").agg(
        F.sum("count").alias("count"), F.min("vmin").alias("vmin"), F.max("vmax").alias("vmax")
    )


def _to_pandas(frame) -> pd.DataFrame:
    return frame.toPandas()


def _throughput(ops, origin_ns: int) -> pd.DataFrame:
    from pyspark.sql import functions as F

    per_second = ops.groupBy(
        *GROUP,
        F.expr(f"CAST(FLOOR((end_ns - {origin_ns}) / {NS}) AS INT)").alias("t_s"),
        "ok",
        "error_class",
        "error_code",
    ).agg(F.count(F.lit(1)).alias("count"))
    return _to_pandas(per_second)


def _samples(spark, result_set: ResultSet, origin_ns: int) -> pd.DataFrame:
    from pyspark.sql import functions as F

    files = result_set.sample_files()
    if not files:
        return pd.DataFrame(columns=["t_s", "cpu", "mem"])
    samples = spark.read.schema(spark_schema(SAMPLE_FIELDS)).parquet(*[str(p) for p in files])
    counters = [name for name, kind in SAMPLE_FIELDS if kind == "int64" and name not in ("ts_ns", "mem")]
    per_second = samples.groupBy(F.expr(f"CAST(FLOOR((ts_ns - {origin_ns}) / {NS}) AS INT)").alias("t_s")).agg(
        F.avg("cpu").alias("cpu"),
        F.max("mem").alias("mem"),
        F.max("ts_ns").alias("ts_ns"),
        *[F.max(name).alias(name) for name in counters],
    )
    frame = _to_pandas(per_second).sort_values("t_s").reset_index(drop=True)
    elapsed = frame["ts_ns"].diff() / NS
    for name in counters:
        if name != "slow_consumers":
            frame[f"{name}_rate"] = (frame[name].diff() / elapsed).clip(lower=0)
    return frame


def aggregate_load(spark, result_set: ResultSet) -> LoadTables:
    """Reduce one result set's load logs to LoadTables."""
    from pyspark.sql import functions as F

    info = result_set.load_info()
    notes = [
        buckets.accuracy_note(),
        buckets.accuracy_note(buckets.COARSE_BITS, "latency over time"),
        *METRICS.values(),
    ]
    notes.append(
        "throughput over time counts operations by the second they completed; latency excludes failed operations "
        "(they are counted under errors), except send delay"
    )
    ops = read_ops(spark, result_set) if result_set.op_files() else None
    window, window_info = _steady_window(ops) if ops is not None else (None, {})
    if window is None:  # no op-log files, or files without rows
        empty = pd.DataFrame()
        return LoadTables(
            result_set.label,
            info,
            0,
            0.0,
            1.0,
            empty,
            empty,
            empty,
            empty,
            empty,
            empty,
            _samples(spark, result_set, int(info.get("start_ns", 0) or 0)),
            [*notes, "no operation logs were found"],
        )
    origin_ns, last_ns, _ = _origin_and_span(ops, info)
    span_s = max((last_ns - origin_ns) / NS, 1e-9)
    slot_s = float(max(1, math.ceil(span_s / TIME_SLOTS)))
    slot_ns = int(slot_s * NS)

    keys = [*GROUP, "metric"]
    merged = _bucket_tables(ops, origin_ns, slot_ns, window).persist()
    try:
        whole = merged.where(F.col("slot") == WHOLE_RUN).drop("slot")
        latency = _to_pandas(buckets.percentiles(whole, keys)).sort_values(keys).reset_index(drop=True)
        distribution_q = [(f"q{ppm}", ppm) for ppm in buckets.DISTRIBUTION_QUANTILES]
        wide = _to_pandas(buckets.percentiles(whole, keys, distribution_q))
        over_time = _to_pandas(buckets.percentiles(merged.where(F.col("slot") != WHOLE_RUN), [*keys, "slot"]))
    finally:
        merged.unpersist()
    distribution = wide.melt(
        id_vars=keys, value_vars=[label for label, _ in distribution_q], var_name="quantile", value_name="value_ns"
    )
    distribution["quantile"] = distribution["quantile"].str[1:].astype(int) / buckets.PPM
    over_time["t_s"] = over_time.pop("slot") * slot_s
    over_time = over_time.sort_values([*keys, "t_s"]).reset_index(drop=True)

    counts = _throughput(ops, origin_ns)
    throughput = (
        counts.assign(ok_count=counts["count"].where(counts["ok"], 0), errors=counts["count"].where(~counts["ok"], 0))
        .groupby([*GROUP, "t_s"], as_index=False)
        .agg(ops=("count", "sum"), ok=("ok_count", "sum"), errors=("errors", "sum"))
        .sort_values([*GROUP, "t_s"])
        .reset_index(drop=True)
    )
    errors = (
        counts[~counts["ok"]]
        .groupby([*GROUP, "t_s", "error_class", "error_code"], as_index=False)["count"]
        .sum()
        .sort_values([*GROUP, "t_s", "error_class"])
        .reset_index(drop=True)
    )
    totals = throughput.groupby(list(GROUP), as_index=False)[["ops", "ok", "errors"]].sum()
    steady_ok = _to_pandas(
        ops.where(F.col("ok") & window.contains(F.col("start_ns")))
        .groupBy(*GROUP)
        .agg(F.count(F.lit(1)).alias("steady_ok"))
    )
    totals = totals.merge(steady_ok, on=list(GROUP), how="left").fillna({"steady_ok": 0})
    totals["steady_ok"] = totals["steady_ok"].astype("int64")
    totals["ok_per_s"] = totals["steady_ok"] / window.seconds
    caveat = shared_loop_note(info)
    return LoadTables(
        label=result_set.label,
        info=info,
        origin_ns=origin_ns,
        span_s=span_s,
        slot_s=slot_s,
        totals=totals,
        throughput=throughput,
        latency=latency,
        latency_over_time=over_time,
        distribution=distribution,
        errors=errors,
        samples=_samples(spark, result_set, origin_ns),
        notes=notes,
        caveats=[caveat] if caveat else [],
        window=window_info,
    )
