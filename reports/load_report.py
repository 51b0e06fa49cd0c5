"""Load-log aggregation in Spark: throughput, latency percentiles, errors and server samples over time.

Only aggregates leave Spark: per-second counts, percentile rows, per-second sample summaries. All times are
seconds since the run's origin (load.json start_ns, or the first intended send), one axis for every chart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from jetcheck.reports import buckets
from jetcheck.reports.inputs import ResultSet

from jetcheck.records import OP_FIELDS, SAMPLE_FIELDS

NS = 1_000_000_000
# Latency-over-time charts get about this many intervals, each at least a second long.
TIME_SLOTS = 120
METRICS = {
    # name: (Spark SQL expression, applies to failed operations too, what it means)
    "response": ("end_ns - intended_ns", False, "response time: reply - intended send (includes send delay)"),
    "service": ("end_ns - start_ns", False, "service time: reply - actual send"),
    "send_delay": ("start_ns - intended_ns", True, "send delay: actual send - intended send"),
    "e2e": ("e2e_ns", False, "end-to-end: delivery - publish stamp (one machine, one clock)"),
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
    totals: pd.DataFrame  # scenario, op, ops, ok, errors, ok_per_s
    throughput: pd.DataFrame  # scenario, op, t_s, ops, ok, errors
    latency: pd.DataFrame  # scenario, op, metric, count, invalid, min, p50 .. p99_99, max (ns)
    latency_over_time: pd.DataFrame  # scenario, op, metric, t_s, count, p50 .. max (ns)
    distribution: pd.DataFrame  # scenario, op, metric, quantile, value_ns
    errors: pd.DataFrame  # scenario, op, t_s, error_class, error_code, count
    samples: pd.DataFrame  # t_s, cpu, mem, *_rate per second
    notes: list[str] = field(default_factory=list)


def read_ops(spark, result_set: ResultSet):
    return spark.read.schema(spark_schema(OP_FIELDS)).parquet(*[str(p) for p in result_set.op_files()])


def _origin_and_span(ops, info: dict[str, Any]) -> tuple[int, int, int]:
    from pyspark.sql import functions as F

    row = ops.agg(F.min("intended_ns").alias("first"), F.max("end_ns").alias("last"), F.count(F.lit(1)).alias("n"))
    first, last, count = row.first()
    start = info.get("start_ns")
    origin = min(v for v in (first, start if isinstance(start, int) else None) if v is not None) if count else 0
    return int(origin or 0), int(last or 0), int(count)


def _latency_long(ops, origin_ns: int, slot_ns: int):
    """One row per (operation, metric) with its value and time slot: the input of the bucket tables."""
    from pyspark.sql import functions as F

    pairs = ", ".join(f"'{name}', CAST({expr} AS BIGINT)" for name, (expr, _, _) in METRICS.items())
    failed_too = [name for name, (_, all_ops, _) in METRICS.items() if all_ops]
    long = ops.select(
        *GROUP,
        "ok",
        "e2e_ns",
        F.expr(f"CAST(FLOOR((end_ns - {origin_ns}) / {slot_ns}) AS INT)").alias("slot"),
        F.expr(f"stack({len(METRICS)}, {pairs}) AS (metric, value)"),
    )
    # e2e_ns is -1 for operations that are not stamped deliveries: those have no e2e value at all.
    return long.where(
        (F.col("ok") | F.col("metric").isin(failed_too)) & ~((F.col("metric") == "e2e") & (F.col("e2e_ns") == -1))
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
    info = result_set.load_info()
    notes = [
        buckets.accuracy_note(),
        buckets.accuracy_note(buckets.COARSE_BITS, "latency over time"),
        *(f"{name}: {meaning}" for name, (_, _, meaning) in METRICS.items()),
    ]
    notes.append(
        "throughput counts operations by the second they completed; latency excludes failed operations "
        "(they are counted under errors), except send delay"
    )
    if not result_set.op_files():
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
    ops = read_ops(spark, result_set)
    origin_ns, last_ns, _ = _origin_and_span(ops, info)
    span_s = max((last_ns - origin_ns) / NS, 1e-9)
    slot_s = float(max(1, math.ceil(span_s / TIME_SLOTS)))
    slot_ns = int(slot_s * NS)

    keys = [*GROUP, "metric"]
    long = _latency_long(ops, origin_ns, slot_ns)
    whole = buckets.bucket_table(long, keys).persist()
    try:
        latency = _to_pandas(buckets.percentiles(whole, keys)).sort_values(keys).reset_index(drop=True)
        distribution_q = [(f"q{ppm}", ppm) for ppm in buckets.DISTRIBUTION_QUANTILES]
        wide = _to_pandas(buckets.percentiles(whole, keys, distribution_q))
    finally:
        whole.unpersist()
    per_slot = buckets.bucket_table(long, [*keys, "slot"], bits=buckets.COARSE_BITS)
    over_time = _to_pandas(buckets.percentiles(per_slot, [*keys, "slot"]))
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
    totals["ok_per_s"] = totals["ok"] / span_s
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
    )
