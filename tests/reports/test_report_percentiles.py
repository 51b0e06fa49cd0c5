"""Bucketed percentiles agree with exact nearest-rank percentiles within the stated accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from jetcheck.load.window import SteadyWindow
from jetcheck.reports import buckets
from jetcheck.reports.load_report import WHOLE_RUN, bucket_table
from jetcheck.testing.percentiles import nearest_rank


def _reference_bucket(value: int, bits: int) -> int:
    if value < 0:
        return -1
    if value < 1 << bits:
        return value
    shift = value.bit_length() - 1 - bits
    return shift * (1 << bits) + (value >> shift)


def _buckets_of(spark, values: np.ndarray, bits: int = buckets.SUB_BUCKET_BITS) -> list[int]:
    """Spark's bucket index of each value, in the order given."""
    frame = spark.createDataFrame(pd.DataFrame({"i": np.arange(len(values)), "v": np.asarray(values, dtype=np.int64)}))
    rows = frame.select("i", F.expr(buckets.bucket("v", bits)).alias("b")).orderBy("i").toPandas()
    return rows["b"].tolist()


def _bucket_frame(spark, values: np.ndarray, group: str = "g"):
    """A bucket table (g, bucket, count, vmin, vmax) of `values`, built by Spark as the report builds it."""
    frame = spark.createDataFrame(pd.DataFrame({"v": np.asarray(values, dtype=np.int64)}))
    return (
        frame.select(F.lit(group).alias("g"), F.expr(buckets.bucket("v")).alias("bucket"), "v")
        .groupBy("g", "bucket")
        .agg(F.count(F.lit(1)).alias("count"), F.min("v").alias("vmin"), F.max("v").alias("vmax"))
    )


class TestBucket:
    @pytest.mark.parametrize("bits", [buckets.SUB_BUCKET_BITS, buckets.COARSE_BITS])
    def test_matches_integer_reference_at_edges(self, spark, bits):
        """Spark's bucket indexes equal an integer-only reference at powers of two, their neighbours and the
        extremes (where log2 in doubles is off by one)."""
        edges = {0, 1, -1, -(2**40), 2**63 - 1, 2**53 + 1, 2**62 + 12345}
        for exponent in range(1, 63):
            edges |= {2**exponent - 1, 2**exponent, 2**exponent + 1}
        values = np.array(sorted(edges), dtype=np.int64)
        assert _buckets_of(spark, values, bits) == [_reference_bucket(int(v), bits) for v in values]

    def test_is_monotonic(self, spark):
        """Larger values never fall into a lower bucket."""
        values = np.sort(np.random.default_rng(1).integers(0, 2**45, 100_000))
        assert np.all(np.diff(_buckets_of(spark, values)) >= 0)


class TestPercentiles:
    @pytest.mark.parametrize(
        "values",
        [
            np.random.default_rng(2).lognormal(np.log(400_000), 1.2, 50_000).astype(np.int64),
            np.random.default_rng(3).integers(0, 2_000, 10_001),  # all below 2048: exact
            np.concatenate([np.full(9_990, 1_000_000), np.arange(10) * 10**9 + 5]),  # a tail of ten outliers
        ],
        ids=["lognormal", "small-exact", "outliers"],
    )
    def test_within_stated_accuracy_of_exact_nearest_rank(self, spark, values):
        """p50..p99.99 are within relative_error() of the exact nearest-rank value; count, min and max are exact."""
        row = buckets.percentiles(_bucket_frame(spark, values), ["g"]).toPandas().iloc[0]
        assert row["count"] == len(values)
        assert row["min"] == values.min()
        assert row["max"] == values.max()
        for label, ppm in buckets.STANDARD_QUANTILES:
            exact = nearest_rank(values, ppm)
            assert abs(row[label] - exact) <= exact * buckets.relative_error(), label
        if values.max() < 1 << buckets.SUB_BUCKET_BITS:
            assert [row[label] for label, _ in buckets.STANDARD_QUANTILES] == [
                nearest_rank(values, ppm) for _, ppm in buckets.STANDARD_QUANTILES
            ]

    def test_negative_values_are_counted_as_invalid(self, spark):
        """Negative durations are reported in `invalid`, not mixed into the percentiles."""
        values = np.array([-3, -1, 10, 20, 30], dtype=np.int64)
        row = buckets.percentiles(_bucket_frame(spark, values), ["g"]).toPandas().iloc[0]
        assert (row["invalid"], row["count"], row["min"], row["p50"]) == (2, 3, 10, 20)

    def test_nearest_rank_uses_integer_ranks(self):
        """p99.99 of 10,000 values is the 9,999th value (a float rank would round up to the maximum)."""
        values = np.arange(1, 10_001)
        assert nearest_rank(values, 999_900) == 9_999


def _expected_bucket_rows(ops: pd.DataFrame, origin_ns: int, slot_ns: int, window) -> pd.DataFrame:
    """The bucket table computed row by row in Python from the metric definitions (METRICS)."""
    ok = ops["ok"]
    e2e = ops["e2e_ns"]
    metrics = {
        "response": (ok, ops["end_ns"] - ops["intended_ns"]),
        "service": (ok, ops["end_ns"] - ops["start_ns"]),
        "send_delay": (pd.Series(True, index=ops.index), ops["start_ns"] - ops["intended_ns"]),
        "e2e": (ok & (e2e != -1), e2e),
    }
    slot = ((ops["end_ns"] - origin_ns) // slot_ns).clip(lower=0)
    steady = window.contains(ops["start_ns"])
    rows = []
    for metric, (applies, values) in metrics.items():
        for index in ops.index[applies]:
            value = int(values[index])
            base = (ops.at[index, "scenario"], ops.at[index, "op"], metric)
            rows.append((*base, int(slot[index]), _reference_bucket(value, buckets.COARSE_BITS), value))
            if steady[index]:
                rows.append((*base, WHOLE_RUN, _reference_bucket(value, buckets.SUB_BUCKET_BITS), value))
    frame = pd.DataFrame(rows, columns=["scenario", "op", "metric", "slot", "bucket", "value"])
    keys = ["scenario", "op", "metric", "slot", "bucket"]
    return frame.groupby(keys, as_index=False).agg(
        count=("value", "size"), vmin=("value", "min"), vmax=("value", "max")
    )


def test_bucket_table_equals_the_rows_bucketed_one_by_one_in_any_partitioning(spark):
    """The report's bucket table (JVM expressions, merged across partitions) equals each row's buckets computed
    in Python and merged, however the rows are split into partitions; negative values land in bucket -1."""
    rng = np.random.default_rng(5)
    n = 6_000
    intended = 10**18 + np.arange(n, dtype=np.int64) * 1_000_000
    start = intended + rng.integers(-2_000, 50_000, n)  # a few sends before their intended time: negative delays
    end = start + rng.lognormal(12, 1, n).astype(np.int64)
    ok = rng.random(n) > 0.05
    ops = pd.DataFrame(
        {
            "scenario": rng.choice(["mixed", "kv"], n),  # every (scenario, op) pair is a group of its own
            "op": rng.choice(["publish", "consume"], n),
            "ok": ok,
            "intended_ns": intended,
            "start_ns": start,
            "end_ns": end,
            "e2e_ns": np.where(rng.random(n) > 0.5, end - intended, -1),
        }
    )
    window = SteadyWindow(int(start[n // 4]), int(start[3 * n // 4]), 1.0, 2, whole_run=False)
    expected = _expected_bucket_rows(ops, 10**18, 10**9, window)
    assert (expected["bucket"] == -1).any() and (expected["slot"] == WHOLE_RUN).any()
    keys = ["scenario", "op", "metric", "slot", "bucket"]
    frame = spark.createDataFrame(ops)
    for parts in (frame.coalesce(1), frame.repartition(3)):
        table = bucket_table(parts, 10**18, 10**9, window).toPandas().sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(table, expected, check_dtype=False)
