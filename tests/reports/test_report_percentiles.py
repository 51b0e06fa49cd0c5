"""Bucketed percentiles agree with exact nearest-rank percentiles within the stated accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jetcheck.reports import buckets
from jetcheck.reports.load_report import PartialHistograms


def _reference_bucket(value: int, bits: int) -> int:
    if value < 0:
        return -1
    if value < 1 << bits:
        return value
    shift = value.bit_length() - 1 - bits
    return shift * (1 << bits) + (value >> shift)


def _bucket_frame(spark, values: np.ndarray, group: str = "g"):
    keys, counts, vmin, vmax = buckets.reduce_by_key(
        buckets.bucket_of(values), np.ones(len(values), dtype=np.int64), values, values
    )
    frame = pd.DataFrame({"g": group, "bucket": keys, "count": counts, "vmin": vmin, "vmax": vmax})
    return spark.createDataFrame(frame)


class TestBucketOf:
    @pytest.mark.parametrize("bits", [buckets.SUB_BUCKET_BITS, buckets.COARSE_BITS])
    def test_matches_integer_reference_at_edges(self, bits):
        """Bucket indexes equal an integer-only reference at powers of two, their neighbours and the extremes."""
        edges = {0, 1, -1, -(2**40), 2**63 - 1, 2**53 + 1, 2**62 + 12345}
        for exponent in range(1, 63):
            edges |= {2**exponent - 1, 2**exponent, 2**exponent + 1}
        values = np.array(sorted(edges), dtype=np.int64)
        assert buckets.bucket_of(values, bits).tolist() == [_reference_bucket(int(v), bits) for v in values]

    def test_is_monotonic(self):
        """Larger values never fall into a lower bucket."""
        values = np.sort(np.random.default_rng(1).integers(0, 2**45, 100_000))
        assert np.all(np.diff(buckets.bucket_of(values)) >= 0)


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
            exact = buckets.nearest_rank(values, ppm)
            assert abs(row[label] - exact) <= exact * buckets.relative_error(), label
        if values.max() < 1 << buckets.SUB_BUCKET_BITS:
            assert [row[label] for label, _ in buckets.STANDARD_QUANTILES] == [
                buckets.nearest_rank(values, ppm) for _, ppm in buckets.STANDARD_QUANTILES
            ]

    def test_negative_values_are_counted_as_invalid(self, spark):
        """Negative durations are reported in `invalid`, not mixed into the percentiles."""
        values = np.array([-3, -1, 10, 20, 30], dtype=np.int64)
        row = buckets.percentiles(_bucket_frame(spark, values), ["g"]).toPandas().iloc[0]
        assert (row["invalid"], row["count"], row["min"], row["p50"]) == (2, 3, 10, 20)

    def test_nearest_rank_uses_integer_ranks(self):
        """p99.99 of 10,000 values is the 9,999th value (a float rank would round up to the maximum)."""
        values = np.arange(1, 10_001)
        assert buckets.nearest_rank(values, 999_900) == 9_999


class TestPartialHistograms:
    def test_merging_partitions_equals_one_pass(self):
        """Bucket rows built per partition and merged equal those built from all rows at once."""
        import pyarrow as pa

        rng = np.random.default_rng(5)
        n = 30_000
        intended = 10**18 + np.arange(n, dtype=np.int64) * 1_000_000
        start = intended + rng.integers(0, 50_000, n)
        end = start + rng.lognormal(12, 1, n).astype(np.int64)
        batch = pa.RecordBatch.from_pydict(
            {
                "scenario": ["s"] * n,
                "op": rng.choice(["publish", "consume"], n).tolist(),
                "ok": rng.random(n) > 0.05,
                "intended_ns": intended,
                "start_ns": start,
                "end_ns": end,
                "e2e_ns": np.where(rng.random(n) > 0.5, end - intended, -1),
            }
        )
        whole = PartialHistograms(10**18, 10**9)
        whole.add(batch)
        parts = [PartialHistograms(10**18, 10**9) for _ in range(3)]
        for index, part in enumerate(parts):
            part.add(batch.slice(index * 10_000, 10_000))
        merged = pa.Table.from_batches([part.batch() for part in parts]).to_pandas()
        keys = ["scenario", "op", "metric", "slot", "bucket"]
        merged = merged.groupby(keys, as_index=False).agg(
            count=("count", "sum"), vmin=("vmin", "min"), vmax=("vmax", "max")
        )
        expected = pa.Table.from_batches([whole.batch()]).to_pandas().sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(merged.sort_values(keys).reset_index(drop=True), expected, check_dtype=False)
