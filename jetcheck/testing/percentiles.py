"""Exact percentiles, the reference the report's bucketed ones (jetcheck.reports.buckets) are tested against."""

from __future__ import annotations

import numpy as np

from jetcheck.reports.buckets import PPM


def nearest_rank(values: np.ndarray, ppm: int) -> int:
    """The exact nearest-rank percentile of `values` (`ppm`: the quantile in parts per million)."""
    ordered = np.sort(np.asarray(values, dtype=np.int64))
    rank = max(1, -(-len(ordered) * ppm // PPM))
    return int(ordered[rank - 1])
