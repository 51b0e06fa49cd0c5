"""Latency percentiles with a stated accuracy, merged exactly, computed where the data is (Spark executors).

Every non-negative integer value (nanoseconds) falls into a log-linear bucket, the layout HdrHistogram uses:
values below SUB_BUCKETS keep their own bucket (exact); above that each power of two is split into SUB_BUCKETS
equal-width buckets. A bucket table (keys, bucket, count, vmin, vmax) merges by summing counts and taking the
min/max, so per-interval tables roll up into per-run ones without going back to the raw rows.

A percentile is the nearest-rank value (the smallest value with at least q of the data at or below it). It
falls into the first bucket whose cumulative count reaches its rank; the report gives the midpoint of the
smallest and largest value seen in that bucket, which is off by at most half the bucket's width:
at most relative_error(bits) of the true value, and exact when the bucket held a single distinct value. Max and min
are exact. Negative values (a clock went backwards) get bucket -1 and are counted, not hidden.
"""

from __future__ import annotations

from collections.abc import Sequence

SUB_BUCKET_BITS = 11
SUB_BUCKETS = 1 << SUB_BUCKET_BITS
PPM = 1_000_000

# (label, quantile in parts per million): integer ranks avoid float rounding at p99.99 and beyond.
STANDARD_QUANTILES: tuple[tuple[str, int], ...] = (
    ("p50", 500_000),
    ("p90", 900_000),
    ("p99", 990_000),
    ("p99_9", 999_000),
    ("p99_99", 999_900),
)
# The quantiles of the "latency by percentile" chart, spread evenly on a 1/(1-q) log axis.
DISTRIBUTION_QUANTILES: tuple[int, ...] = tuple(
    sorted({PPM - round(PPM * 10 ** (-k / 4)) for k in range(0, 25)} | {PPM - 1})
)


# Latency over time is drawn, not tabulated to four digits: coarser buckets keep the per-interval tables small.
COARSE_BITS = 7


def relative_error(bits: int = SUB_BUCKET_BITS) -> float:
    return 1 / (2 << bits)


def accuracy_note(bits: int = SUB_BUCKET_BITS, what: str = "latency percentiles") -> str:
    return (
        f"{what}: nearest-rank percentiles from log-linear buckets ({1 << bits} per power of two, merged exactly),"
        f" within {relative_error(bits):.3%} of the exact value, exact below {1 << bits} ns; min and max exact"
    )


def exponent(value: str) -> str:
    """Spark SQL: floor(log2(value)) exactly, for the bigint column named `value` (null for values below 1).

    log2 in doubles can be one off next to a power of two (and above 2**53 a double rounds the value), so the
    estimate is checked against the integer powers of two on either side of it."""
    estimate = f"CAST(FLOOR(LOG2(CAST({value} AS DOUBLE))) AS INT)"
    estimate = f"({estimate} - IF(SHIFTLEFT(1L, {estimate}) > {value}, 1, 0))"
    # 1 << 63 overflows a bigint: values that large (146 years in ns) already have the right exponent
    return f"({estimate} + IF({estimate} < 62 AND SHIFTLEFT(1L, LEAST({estimate} + 1, 62)) <= {value}, 1, 0))"


def bucket(value: str, bits: int = SUB_BUCKET_BITS, value_exponent: str | None = None) -> str:
    """Spark SQL: the bucket index of the bigint column named `value`; -1 for negative values. `value_exponent`
    names a column holding exponent(value) when the caller has one (the two precisions share it)."""
    shift = f"({value_exponent or exponent(value)} - {bits})"
    return (
        f"CASE WHEN {value} < 0 THEN -1L WHEN {value} < {1 << bits} THEN {value} "
        f"ELSE CAST({shift} AS BIGINT) * {1 << bits} + SHIFTRIGHT({value}, {shift}) END"
    )


def percentiles(table, keys: Sequence[str], quantiles: Sequence[tuple[str, int]] = STANDARD_QUANTILES):
    """Per group of `keys`: count, invalid (negative values), min, the quantiles' values, max (Spark DataFrame)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    valid = table.where(F.col("bucket") >= 0)
    running = Window.partitionBy(*keys).orderBy("bucket").rowsBetween(Window.unboundedPreceding, 0)
    whole = Window.partitionBy(*keys)
    ranked = (
        valid.withColumn("cum", F.sum("count").over(running))
        .withColumn("total", F.sum("count").over(whole))
        .withColumn("mid", (F.col("vmin") + F.col("vmax")) / 2.0)
    )
    columns = []
    for label, ppm in quantiles:
        # nearest rank = ceil(q * total), in integers; at least 1
        rank = F.greatest(F.lit(1), F.expr(f"(total * {ppm} + {PPM - 1}) div {PPM}"))
        reached = F.col("cum") >= rank
        columns.append(F.min_by(F.when(reached, F.col("mid")), F.when(reached, F.col("bucket"))).alias(label))
    summary = ranked.groupBy(*keys).agg(
        F.sum("count").alias("count"), F.min("vmin").alias("min"), *columns, F.max("vmax").alias("max")
    )
    invalid = table.where(F.col("bucket") < 0).groupBy(*keys).agg(F.sum("count").alias("invalid"))
    return summary.join(invalid, on=list(keys), how="full").fillna(0, subset=["invalid", "count"])
