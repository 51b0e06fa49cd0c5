"""Report wall time and peak memory (driver + JVM + Python workers) on synthetic load logs of 1M and 10M ops.

    .venv/bin/python benchmarks/report_bench.py [--sizes 1000000 10000000] [--in RUN_DIR ...] [--data DIR]
        [--before DIR] [--rounds N]

Each input runs `jetcheck report` work in a fresh child process (so the JVM start is counted and memory does not
carry over); the parent samples the proportional set size (PSS) of the child's whole process tree. Generated logs
are kept in --data and reused. The synthetic run has a constant rate (RATE ops/s), so 10x the records is 10x the
run length. --in adds real run or load folders (e.g. what `jetcheck run` left).

--before DIR names a folder holding another version of the reports/ package (e.g. `git archive <commit> reports |
tar -x -C DIR`): each input is then reported by that code and by this one back to back, in alternating order
over --rounds, and the two reports' outputs (summary.md, index.html, every table as CSV and Parquet) are compared
file by file. The machine's load average goes with every figure: timings on a shared machine are only comparable
when they were taken together.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from jetcheck.testing.synthetic import LoadSpec, write_load_run

RATE = 16_667  # ops/s of the synthetic runs
GENERATED = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def ensure_data(data: Path, records: int) -> Path:
    folder = data / f"ops-{records}"
    done = folder / ".complete"
    if not done.exists():
        started = time.perf_counter()
        write_load_run(folder, LoadSpec(records=records, duration_s=records / RATE))
        done.write_text("")
        print(f"generated {records:,} records in {time.perf_counter() - started:.1f} s -> {folder}", flush=True)
    return folder


# Loaded first by every Python process of a measured child (the report's and Spark's Python workers, which
# unpickle functions of the reports package by name) when REPORTS_FROM names another version of the package.
REPORTS_HOOK = """
import os

if os.environ.get("REPORTS_FROM"):
    import importlib.util
    import sys

    import jetcheck

    package = os.path.join(os.environ["REPORTS_FROM"], "reports")
    spec = importlib.util.spec_from_file_location(
        "jetcheck.reports", os.path.join(package, "__init__.py"), submodule_search_locations=[package]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["jetcheck.reports"] = module
    jetcheck.reports = module
    spec.loader.exec_module(module)
"""


def _environment(code: Path | None, data: Path) -> dict[str, str]:
    """The environment of a measured child: with `code`, every Python process in it uses that reports/ package."""
    if code is None:
        return dict(os.environ)
    hook = data / "reports-hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(REPORTS_HOOK)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "REPORTS_FROM": str(code.resolve())}


def child(folder: str, out: str) -> None:
    """Build the report for `folder` as `jetcheck report` does and print timings as JSON: Spark session ready,
    aggregation (Spark jobs) and rendering (charts, HTML, Markdown, tables)."""
    started = time.perf_counter()
    from jetcheck.reports import build, spark

    timings = {}

    def timed(name: str, function):
        def run(*args, **kwargs):
            begun = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                timings[name] = time.perf_counter() - begun

        return run

    spark.build_session = timed("session_s", spark.build_session)
    build.write_report = timed("render_s", build.write_report)
    build.build_report([folder], out=Path(out))
    timings["total_s"] = time.perf_counter() - started
    print(json.dumps(timings), flush=True)


def _proportional_set_size(process: psutil.Process) -> int:
    """A process's share of the physical memory it maps (PSS): a page shared with a forked child (the JVM runs
    short-lived helpers) counts once across the two, where adding up their RSS would count it twice."""
    try:
        return process.memory_full_info().pss
    except psutil.AccessDenied:
        return process.memory_info().rss


def measure(folder: Path, out: Path, code: Path | None = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, __file__, "--child", str(folder), str(out)]
    started = time.perf_counter()
    process = psutil.Popen(argv, stdout=subprocess.PIPE, text=True, env=_environment(code, out.parent))
    peak = 0
    cpu: dict[int, float] = {}  # last CPU seconds seen per process of the tree
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.1):
            rss = 0
            try:
                members = [process, *process.children(recursive=True)]
            except psutil.Error:  # a member of the tree ended while it was walked: sample again
                continue
            for member in members:
                try:
                    with member.oneshot():
                        rss += _proportional_set_size(member)
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
    load = os.getloadavg()[0]
    return {"wall_s": wall_s, "peak_mib": peak / 2**20, "cpu_s": sum(cpu.values()), "load": load, **timings}


def _undated(path: Path) -> str:
    """A document without its "Generated <when>" stamp, the one part that differs between two reports of a run."""
    return GENERATED.sub("Generated", path.read_text(encoding="utf-8"))


def differences(expected: Path, actual: Path) -> list[str]:
    """The report files that differ between two report folders (Parquet compared as tables, the rest as bytes)."""
    import pyarrow.parquet as pq

    names = {p.relative_to(expected) for p in expected.rglob("*") if p.is_file()}
    names |= {p.relative_to(actual) for p in actual.rglob("*") if p.is_file()}
    found = []
    for name in sorted(names):
        a, b = expected / name, actual / name
        if not (a.is_file() and b.is_file()):
            found.append(f"{name}: only in {'the first' if a.is_file() else 'the second'}")
        elif name.suffix == ".parquet":
            if not pq.read_table(a).equals(pq.read_table(b), check_metadata=True):
                found.append(f"{name}: tables differ")
        elif name.suffix in (".md", ".html"):
            if _undated(a) != _undated(b):
                found.append(f"{name}: contents differ")
        elif not filecmp.cmp(a, b, shallow=False):
            found.append(f"{name}: contents differ")
    return found


def line(label: str, result: dict) -> str:
    work = result["total_s"] - result["session_s"]
    render = result.get("render_s", 0.0)
    return (
        f"{label}: wall {result['wall_s']:6.1f} s (Spark ready {result['session_s']:4.1f} s, aggregate "
        f"{work - render:5.1f} s, render {render:4.1f} s), CPU {result['cpu_s']:6.1f} s, "
        f"peak memory {result['peak_mib']:,.0f} MiB (PSS of python + JVM + workers), load average {result['load']:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--in", dest="inputs", type=Path, nargs="*", default=[], help="real run or load folders")
    parser.add_argument("--data", type=Path, default=Path("/tmp/jetcheck-report-bench"))
    parser.add_argument("--before", type=Path, help="a folder holding the reports/ package to compare with")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    inputs = [(f"{records:,} ops", ensure_data(args.data, records)) for records in args.sizes]
    inputs += [(folder.name, folder) for folder in args.inputs]
    versions = [("before", args.before), ("after", None)] if args.before else [("now", None)]
    for label, folder in inputs:
        results: dict[str, list[dict]] = {name: [] for name, _ in versions}
        for round_ in range(args.rounds):
            # alternate which version goes first: a load change hits both alike over the rounds
            for name, code in versions if round_ % 2 == 0 else versions[::-1]:
                out = args.data / f"report-{label.replace(',', '').replace(' ', '-')}-{name}"
                result = measure(folder, out, code)
                results[name].append(result)
                print(line(f"{label:>14} {name:>6}", result), flush=True)
        if args.before:
            before, after = (min(results[name], key=lambda r: r["wall_s"]) for name, _ in versions)
            print(
                f"{label:>14}: after/before, best of {args.rounds}: wall x{after['wall_s'] / before['wall_s']:.2f}, "
                f"CPU x{after['cpu_s'] / before['cpu_s']:.2f}, memory x{after['peak_mib'] / before['peak_mib']:.2f}"
                f"; median wall {statistics.median(r['wall_s'] for r in results['before']):.1f} s -> "
                f"{statistics.median(r['wall_s'] for r in results['after']):.1f} s",
                flush=True,
            )
            stem = args.data / f"report-{label.replace(',', '').replace(' ', '-')}"
            found = differences(Path(f"{stem}-before"), Path(f"{stem}-after"))
            print(f"{label:>14}: outputs {'IDENTICAL' if not found else 'DIFFER: ' + '; '.join(found)}", flush=True)


if __name__ == "__main__":
    main()
