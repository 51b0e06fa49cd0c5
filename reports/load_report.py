"""Load-log aggregation in Spark: throughput, latency percentiles, errors and server samples over time.

Only aggregates leave Spark: per-second counts, percentile rows, per-second sample summaries. All times are
seconds since the run's origin (load.json start_ns, or the first intended send), one axis for every chart.
Rates and whole-run percentiles cover the steady window (jetcheck.load.window, the definition `jetcheck load`
prints too); throughput, latency and errors over time cover the whole run.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from jetcheck.load.window import SteadyWindow, steady_window
from jetcheck.records import OP_FIELDS, SAMPLE_FIELDS, shared_loop_note
from jetcheck.reports import buckets
from jetcheck.reports.inputs import ResultSet

NS = 1_000_000_000
# Latency-over-time charts get about this many intervals, each at least a second long.
TIME_SLOTS = 120
# About this much op log per shuffle partition (shuffle_partitions_for).
SHUFFLE_BYTES = 64 << 20
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
    # per load process (a fleet's worker, or a --processes process): process, ops, ok, steady_ok, ok_per_s
    processes: pd.DataFrame = field(default_factory=pd.DataFrame)
    # scenario, op, t_s, offered (operations intended in that second, whatever became of them)
    offered: pd.DataFrame = field(default_factory=pd.DataFrame)


def read_ops(spark, result_set: ResultSet):
    return spark.read.schema(spark_schema(OP_FIELDS)).parquet(*[str(p) for p in result_set.op_files()])


_EARLIEST, _LATEST = ("first", "first_intended"), ("last", "last_end")


def _user_spans(ops) -> tuple[list[dict], list[tuple]]:
    """One pass over the log: per (process, user) the first and last actual send, the first intended send, the
    last reply and the row count; the steady window, the time origin and the run's span all derive from these.
    Also the log's distinct (scenario, op) pairs, which the same pass groups by."""
    from pyspark.sql import functions as F

    rows = (
        ops.groupBy("process", "user", *GROUP)
        .agg(
            F.min("start_ns").alias("first"),
            F.max("start_ns").alias("last"),
            F.min("intended_ns").alias("first_intended"),
            F.max("end_ns").alias("last_end"),
            F.count(F.lit(1)).alias("rows"),
        )
        .collect()
    )
    spans: dict[tuple, dict] = {}
    for row in rows:
        span = spans.setdefault((row["process"], row["user"]), {"rows": 0})
        span["rows"] += row["rows"]
        for name in _EARLIEST:
            span[name] = _either(span.get(name), row[name], min)
        for name in _LATEST:
            span[name] = _either(span.get(name), row[name], max)
    groups = sorted({(row["scenario"], row["op"]) for row in rows}, key=repr)
    return list(spans.values()), groups


def _either(a, b, pick):
    """pick(a, b) of two values that may be null (a null is no value, as in SQL's min and max)."""
    return b if a is None else a if b is None else pick(a, b)


def _origin_and_last(spans: list, info: dict[str, Any]) -> tuple[int, int]:
    """The time origin (the first intended send, or load.json's start when earlier) and the last reply."""
    firsts = [row["first_intended"] for row in spans if row["first_intended"] is not None]
    start = info.get("start_ns")
    origin = min([*firsts, *([start] if isinstance(start, int) else [])], default=0)
    last = max((row["last_end"] for row in spans if row["last_end"] is not None), default=0)
    return int(origin or 0), int(last or 0)


METRIC_NAMES = tuple(METRICS)
WHOLE_RUN = -1  # the slot of the whole-run bucket rows
_SLOT_LIMIT = (1 << 24) - 2


def _metric_values() -> list:
    """Per metric (in METRIC_NAMES order), the Spark column of its value: null on rows it does not apply to."""
    from pyspark.sql import functions as F

    ok = F.col("ok")
    e2e = F.col("e2e_ns")
    return [
        F.when(ok, F.col("end_ns") - F.col("intended_ns")),  # response
        F.when(ok, F.col("end_ns") - F.col("start_ns")),  # service
        F.col("start_ns") - F.col("intended_ns"),  # send_delay (failed operations included)
        # e2e_ns is -1 on operations that are not stamped deliveries: they have no e2e value at all
        F.when(ok & (e2e != -1), e2e),
    ]


# A bucket row's keys packed into one bigint, so that the aggregation of eight rows per operation hashes one number
# rather than two strings and three numbers (halved the bucket table's time on 10M operations): from the top, the
# (scenario, op) group's index, the metric, the slot + 1 and the bucket + 1.
_BUCKET_BITS, _SLOT_BITS, _METRIC_BITS = 17, 24, 3
_GROUP_LIMIT = 1 << (63 - _BUCKET_BITS - _SLOT_BITS - _METRIC_BITS)


def bucket_table(ops, origin_ns: int, slot_ns: int, window: SteadyWindow, groups: list[tuple] | None = None):
    """The bucket table of the whole run and of every time slot, in one pass of JVM expressions (Spark SQL).

    Each operation gives up to eight rows, two per metric: one in its completion time slot at coarse precision
    (latency over time) and, when sent in the steady window, one in the WHOLE_RUN slot at full precision; rows
    of equal (scenario, op, metric, slot, bucket) merge into count, vmin and vmax. `groups`: the log's distinct
    (scenario, op) pairs when the caller knows them (else a query finds them)."""
    from pyspark.sql import functions as F

    if groups is None:
        groups = [tuple(row) for row in ops.select(*GROUP).distinct().collect()]
    if len(groups) >= _GROUP_LIMIT:
        raise ValueError(f"{len(groups)} (scenario, op) groups: the bucket table packs at most {_GROUP_LIMIT - 1}")
    values = [f"v{index}" for index in range(len(METRIC_NAMES))]
    group = F.lit(None)
    for index, (scenario, op) in enumerate(groups):
        matches = F.col("scenario").eqNullSafe(scenario) & F.col("op").eqNullSafe(op)
        group = F.when(matches, F.lit(index)) if index == 0 else group.when(matches, F.lit(index))
    # integer division, as exact as the nanoseconds (a double quotient can round up to the next slot)
    slot = F.expr(f"LEAST(GREATEST((end_ns - {origin_ns}) DIV {slot_ns}, 0), {_SLOT_LIMIT})")
    staged = ops.select(
        group.cast("bigint").alias("group"),
        slot.cast("bigint").alias("slot"),
        window.contains(F.col("start_ns")).alias("steady"),
        *[value.alias(name) for value, name in zip(_metric_values(), values, strict=True)],
    )
    # the exponent each value's two buckets share, computed once per value
    staged = staged.select("*", *[F.expr(buckets.exponent(name)).alias(f"e{name}") for name in values])
    rows = []
    for metric, name in enumerate(values):
        for row_slot, bits, value in (
            (F.col("slot"), buckets.COARSE_BITS, F.col(name)),
            (F.lit(WHOLE_RUN), buckets.SUB_BUCKET_BITS, F.when(F.col("steady"), F.col(name))),
        ):
            bucket = F.expr(buckets.bucket(name, bits, f"e{name}"))
            key = F.col("group") * (1 << _METRIC_BITS) + metric
            key = (key * (1 << _SLOT_BITS) + (row_slot + 1)) * (1 << _BUCKET_BITS) + (bucket + 1)
            rows.append(F.struct(key.alias("key"), value.alias("value")))
    exploded = staged.select(F.inline(F.array(*rows))).where(F.col("value").isNotNull())
    merged = exploded.groupBy("key").agg(
        F.count(F.lit(1)).alias("count"), F.min("value").alias("vmin"), F.max("value").alias("vmax")
    )
    key = F.col("key")
    index = F.shiftright(key, _BUCKET_BITS + _SLOT_BITS + _METRIC_BITS).cast("int") + 1
    names = F.array(*[F.lit(name) for name in METRIC_NAMES])
    metric = F.shiftright(key, _BUCKET_BITS + _SLOT_BITS).bitwiseAND((1 << _METRIC_BITS) - 1).cast("int") + 1
    return merged.select(
        F.element_at(F.array(*[F.lit(scenario) for scenario, _op in groups]), index).alias("scenario"),
        F.element_at(F.array(*[F.lit(op) for _scenario, op in groups]), index).alias("op"),
        F.element_at(names, metric).alias("metric"),
        (F.shiftright(key, _BUCKET_BITS).bitwiseAND((1 << _SLOT_BITS) - 1) - 1).cast("int").alias("slot"),
        (key.bitwiseAND((1 << _BUCKET_BITS) - 1) - 1).alias("bucket"),
        "count",
        "vmin",
        "vmax",
    )


def _to_pandas(frame) -> pd.DataFrame:
    return frame.toPandas()


def _tally(ops, origin_ns: int, window: SteadyWindow) -> pd.DataFrame:
    """Operations counted per (scenario, op, process, completion second, outcome, error) and by when they were sent:
    -1 before the steady window, 0 in it, 1 after it. Throughput, errors, totals, the per-process table and the
    window's counts add these up."""
    from pyspark.sql import functions as F

    sent = F.col("start_ns")
    phase = F.when(sent < window.start_ns, -1).when(sent >= window.end_ns, 1).when(sent.isNotNull(), 0)
    counts = ops.groupBy(
        *GROUP,
        "process",
        F.expr(f"CAST(FLOOR((end_ns - {origin_ns}) / {NS}) AS INT)").alias("t_s"),
        "ok",
        "error_class",
        "error_code",
        phase.alias("phase"),
    ).agg(F.count(F.lit(1)).alias("count"))
    return _to_pandas(counts)


@contextlib.contextmanager
def shuffle_partitions_for(spark, files: list) -> Iterator[None]:
    """Shuffle partitions sized to the input: about one per SHUFFLE_BYTES of log, at most two per core Spark has
    (not Spark's default 200, whose tasks cost more than a small report's work); restored afterwards."""
    size = sum(path.stat().st_size for path in files)
    cores = spark.sparkContext.defaultParallelism
    partitions = max(1, min(2 * cores, math.ceil(size / SHUFFLE_BYTES)))
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    spark.conf.set(key, str(partitions))
    try:
        yield
    finally:
        spark.conf.set(key, before)


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
    """Reduce one result set's load logs to LoadTables: three Spark jobs over the log (user spans, the tally of
    counts, the bucket table with its percentiles), each a single pass of JVM expressions."""
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
    files = result_set.op_files()
    with shuffle_partitions_for(spark, files):
        ops = read_ops(spark, result_set) if files else None
        spans, groups = _user_spans(ops) if ops is not None else ([], [])
        window = steady_window((row["first"], row["last"]) for row in spans)
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
        origin_ns, last_ns = _origin_and_last(spans, info)
        span_s = max((last_ns - origin_ns) / NS, 1e-9)
        slot_s = float(max(1, math.ceil(span_s / TIME_SLOTS)))
        slot_ns = int(slot_s * NS)
        keys = [*GROUP, "metric"]
        distribution_q = [(f"q{ppm}", ppm) for ppm in buckets.DISTRIBUTION_QUANTILES]
        standard = [label for label, _ in buckets.STANDARD_QUANTILES]
        # the bucket table is computed once; the whole run's percentiles are also taken at the distribution's
        # quantiles, every slot's only at the standard ones (what the latency-over-time chart draws)
        table = bucket_table(ops, origin_ns, slot_ns, window, groups).persist()
        try:
            whole = _to_pandas(
                buckets.percentiles(
                    table.where(table["slot"] == WHOLE_RUN).drop("slot"),
                    keys,
                    [*buckets.STANDARD_QUANTILES, *distribution_q],
                )
            )
            per_slot = buckets.percentiles(table.where(table["slot"] != WHOLE_RUN), [*keys, "slot"])
            over_time = _to_pandas(per_slot.select(*keys, "slot", "count", "min", *standard, "max", "invalid"))
        finally:
            table.unpersist()
        counts = _tally(ops, origin_ns, window)
        offered = _offered(ops, origin_ns)
        samples = _samples(spark, result_set, origin_ns)
    latency = whole[[*keys, "count", "min", *standard, "max", "invalid"]].sort_values(keys).reset_index(drop=True)
    wide = whole.sort_values(keys).reset_index(drop=True)
    distribution = wide.melt(
        id_vars=keys, value_vars=[label for label, _ in distribution_q], var_name="quantile", value_name="value_ns"
    )
    distribution["quantile"] = distribution["quantile"].str[1:].astype(int) / buckets.PPM
    over_time["t_s"] = over_time.pop("slot") * slot_s
    over_time = over_time.sort_values([*keys, "t_s"]).reset_index(drop=True)

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
    steady_ok = (
        counts[counts["ok"] & (counts["phase"] == 0)]
        .groupby(list(GROUP), as_index=False)["count"]
        .sum()
        .rename(columns={"count": "steady_ok"})
    )
    totals = totals.merge(steady_ok, on=list(GROUP), how="left").fillna({"steady_ok": 0})
    totals["steady_ok"] = totals["steady_ok"].astype("int64")
    totals["ok_per_s"] = totals["steady_ok"] / window.seconds
    before = int(counts.loc[counts["phase"] == -1, "count"].sum())
    after = int(counts.loc[counts["phase"] == 1, "count"].sum())
    window_info = window.describe(before, sum(row["rows"] for row in spans) - before - after, after)
    processes = _per_process(counts, window)
    caveats = [note for note in (shared_loop_note(info), *fleet_caveats(info)) if note]
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
        samples=samples,
        notes=notes,
        caveats=caveats,
        window=window_info,
        processes=processes,
        offered=offered,
    )


def _offered(ops, origin_ns: int) -> pd.DataFrame:
    """Operations per (scenario, op) and second of their intended send: the rate the schedule offered."""
    from pyspark.sql import functions as F

    per_second = ops.groupBy(
        *GROUP, F.expr(f"CAST(FLOOR((intended_ns - {origin_ns}) / {NS}) AS INT)").alias("t_s")
    ).agg(F.count(F.lit(1)).alias("offered"))
    return _to_pandas(per_second).sort_values([*GROUP, "t_s"]).reset_index(drop=True)


def _per_process(counts: pd.DataFrame, window: SteadyWindow) -> pd.DataFrame:
    """Per load process: its operations, successes, successes sent in the steady window and their rate."""
    ok = counts["count"].where(counts["ok"], 0)
    frame = counts.assign(ok_count=ok, steady=ok.where(counts["phase"] == 0, 0))
    table = frame.groupby("process", as_index=False).agg(
        ops=("count", "sum"), ok=("ok_count", "sum"), steady_ok=("steady", "sum")
    )
    table["ok_per_s"] = table["steady_ok"] / window.seconds
    return table.sort_values("process").reset_index(drop=True)


def fleet_caveats(info: dict[str, Any]) -> list[str]:
    """What a fleet run's load.json says limits its figures: workers whose log is missing, and the clocks."""
    caveats = []
    workers = info.get("workers") or []
    if missing := [w for w in workers if not w.get("complete")]:
        named = "; ".join(
            f"{w.get('worker')} (host {w.get('host')}, pid {w.get('pid')}): "
            + ", ".join(map(str, w.get("errors") or []))
            for w in missing
        )
        caveats.append(
            f"Incomplete run: {len(missing)} of {len(workers)} workers did not deliver their whole log, so these "
            f"figures cover less than the load the server took. {named}"
        )
    bound = info.get("clock_bound_ns")
    if isinstance(bound, int):
        caveats.append(
            f"The workers ran on hosts of their own: their times were put on the master's clock by offsets measured "
            f"at the start and end, to within {bound / 1e6:.3f} ms. Latencies measured on one host are exact; an "
            f"end-to-end latency from a publisher on one host to a consumer on another, corrected by both offsets, "
            f"is only good to within {2 * bound / 1e6:.3f} ms."
        )
    return caveats
