"""Report wall time and peak memory (driver + JVM + Python workers) on synthetic load logs of 1M and 10M ops.

    /work/venv/bin/python benchmarks/report_bench.py [--sizes 1000000 10000000] [--data DIR]

Each size runs `jetcheck report` work in a fresh child process (so the JVM start is counted and memory does not
carry over); the parent samples the RSS of the child's whole process tree. Generated logs are kept in --data and
reused. The synthetic run has a constant rate (RATE ops/s), so 10x the records is 10x the run length.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from jetcheck.testing.synthetic import LoadSpec, write_load_run

RATE = 16_667  # ops/s of the synthetic runs


def ensure_data(data: Path, records: int) -> Path:
    folder = data / f"ops-{records}"
    done = folder / ".complete"
    if not done.exists():
        started = time.perf_counter()
        write_load_run(folder, LoadSpec(records=records, duration_s=records / RATE))
        done.write_text("")
        print(f"generated {records:,} records in {time.perf_counter() - started:.1f} s -> {folder}", flush=True)
    return folder


def child(folder: str, out: str) -> None:
    """Build the report for `folder` and print timings as JSON."""
    started = time.perf_counter()
    from jetcheck.reports.spark import build_session

    session = build_session()
    session_s = time.perf_counter() - started
    from jetcheck.reports.build import build_report

    build_report([folder], out=Path(out), spark=session)
    total_s = time.perf_counter() - started
    session.stop()
    print(json.dumps({"session_s": session_s, "total_s": total_s}), flush=True)


def measure(folder: Path, out: Path) -> dict:
    argv = [sys.executable, __file__, "--child", str(folder), str(out)]
    started = time.perf_counter()
    process = psutil.Popen(argv, stdout=subprocess.PIPE, text=True)
    peak = 0
    cpu: dict[int, float] = {}  # last CPU seconds seen per process of the tree
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.1):
            rss = 0
            for member in [process, *process.children(recursive=True)]:
                try:
                    with member.oneshot():
                        rss += member.memory_info().rss
                        times = member.cpu_times()
                        cpu[member.pid] = times.user + times.system
                except psutil.Error:
                    pass
            peak = max(peak, rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    stop.set()
    sampler.join()
    wall_s = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"report child failed with exit {process.returncode}")
    timings = json.loads(output.strip().splitlines()[-1])
    return {"wall_s": wall_s, "peak_mib": peak / 2**20, "cpu_s": sum(cpu.values()), **timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--data", type=Path, default=Path("/tmp/jetcheck-report-bench"))
    parser.add_argument("--child", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    rows = []
    for records in args.sizes:
        folder = ensure_data(args.data, records)
        result = measure(folder, args.data / f"report-{records}")
        rows.append((records, result))
        print(
            f"{records:>11,} ops: wall {result['wall_s']:6.1f} s (Spark start {result['session_s']:4.1f} s, "
            f"aggregate+render {result['total_s'] - result['session_s']:6.1f} s), "
            f"CPU {result['cpu_s']:6.1f} s, peak RSS {result['peak_mib']:,.0f} MiB (python + JVM + workers), "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    for (small, a), (large, b) in itertools.pairwise(rows):
        work_a, work_b = a["total_s"] - a["session_s"], b["total_s"] - b["session_s"]
        verdict = "no worse than linear" if work_b / work_a <= large / small else "WORSE than linear"
        print(
            f"{large / small:.0f}x records: wall x{b['wall_s'] / a['wall_s']:.2f}, CPU x{b['cpu_s'] / a['cpu_s']:.2f}, "
            f"aggregate+render x{work_b / work_a:.2f} ({verdict})"
        )


if __name__ == "__main__":
    main()
