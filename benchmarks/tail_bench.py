"""Prints how the publish p99 of `jetcheck run`'s load step compares with the p99 of its steady seconds.

    python benchmarks/tail_bench.py [--rounds 3] [--duration 20s]

Each round runs the load step exactly as `jetcheck run` does (scenario, users, consumers, rate from
jetcheck.run) against one embedded server, then prints the p99 `jetcheck load` reported for publish, the
p99 of each second of the run (response time from the intended send, by intended second), and the ratio of the
reported p99 to the median per-second p99 of the steady seconds (all but the first and the last). The goal: within
25% (ratio 0.75-1.25). A wind-down that distorts the tail shows as a last second far above the others.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import tempfile
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds

from jetcheck import cli as jetcheck_cli
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials
from jetcheck.records import OPS_DIR
from jetcheck.run import LOAD_OPTIONS, LOAD_SCENARIO
from jetcheck.specs import DEFAULT_VERSION

NS = 1_000_000_000


def per_second_p99_ms(out: Path) -> list[float]:
    """The p99 publish response time (ms) of each second of the run, by intended send time."""
    table = ds.dataset(out / OPS_DIR, format="parquet").to_table()
    publish = table.filter(pc.and_(pc.equal(table["op"], "publish"), table["ok"])).to_pandas()
    first = int(table["intended_ns"].to_numpy().min())
    second = (publish["intended_ns"] - first) // NS
    response = publish["end_ns"] - publish["intended_ns"]
    return [v / 1e6 for v in response.groupby(second).quantile(0.99, interpolation="nearest")]


def one_round(server_url: str, duration: str, work: Path) -> tuple[float, list[float]]:
    out = work / secrets.token_hex(3)
    argv = ["load", "--scenario", LOAD_SCENARIO, "--duration", duration, *LOAD_OPTIONS]
    argv += ["--server", server_url, "--out", str(out)]
    if jetcheck_cli.main(argv) != 0:
        raise SystemExit(f"jetcheck load failed; see {out}")
    summary = json.loads((out / "summary.json").read_text())
    return summary["ops"]["publish"]["response_us"]["p99"] / 1000, per_second_p99_ms(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="20s")
    args = parser.parse_args()
    provider = provider_for("local", DEFAULT_VERSION, Credentials())
    target = provider.start()
    ratios = []
    try:
        with tempfile.TemporaryDirectory(prefix="tail-bench-") as work:
            for index in range(1, args.rounds + 1):
                reported, seconds = one_round(target.url, args.duration, Path(work))
                median = statistics.median(seconds[1:-1])
                ratios.append(reported / median)
                shown = ", ".join(f"{v:.1f}" for v in seconds)
                print(
                    f"round {index}: reported publish p99 {reported:.1f} ms; median steady-second p99 {median:.1f} ms; "
                    f"ratio {reported / median:.2f}; last second {seconds[-1]:.1f} ms\n  per second: {shown}",
                    flush=True,
                )
    finally:
        provider.stop()
    print(f"median ratio over {len(ratios)} rounds: {statistics.median(ratios):.2f} (goal 0.75-1.25)")


if __name__ == "__main__":
    main()
