"""How long each step of a default `jetcheck run` takes, and its report step against a cold report of the same folder.

    .venv/bin/python benchmarks/run_bench.py [--rounds 3] [--keep DIR]

Each round runs README's main job (`jetcheck run`, the embedded server) into a fresh folder and reads the step
times it prints ("[3/3] report   done in 5.0 s"). The report step of a run starts on the Spark session the run
warmed up while certify and load worked (jetcheck.reports.warm). Straight after it, `jetcheck report --in` that
same folder runs in a new process: the cold report, JVM start included, of the same data on the same machine
at the same moment, which is the baseline the warm step is compared with. The machine's load average goes with
every round: timings on a shared machine only compare with those taken together.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = re.compile(r"^\[\d+/\d+\] (\w+)\s+done.* in ([0-9.]+) s$", re.M)
JETCHECK = [sys.executable, "-m", "jetcheck.cli"]


def one_round(folder: Path) -> dict[str, float]:
    """Step name -> seconds of one `jetcheck run`, and `cold report`: the wall time of a new process's report."""
    load = os.getloadavg()[0]
    run = subprocess.run([*JETCHECK, "run", "--out", str(folder)], capture_output=True, text=True, check=False)
    steps = {name: float(seconds) for name, seconds in STEP.findall(run.stderr)}
    if run.returncode not in (0, 1) or "report" not in steps:
        raise SystemExit(f"jetcheck run exited {run.returncode}:\n{run.stderr[-3000:]}")
    started = time.perf_counter()
    subprocess.run([*JETCHECK, "report", "--in", str(folder), "--out", str(folder / "cold-report")],
                   capture_output=True, check=True)  # fmt: skip
    return {**steps, "cold report": time.perf_counter() - started, "load average": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the run folders here (default: a temp folder, deleted)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="jetcheck-run-bench-"))
    rounds = []
    try:
        for n in range(args.rounds):
            result = one_round(base / f"run-{n}")
            rounds.append(result)
            print(f"round {n + 1}: " + ", ".join(f"{name} {value:.1f}" for name, value in result.items()), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    names = list(rounds[0])
    print(f"median of {len(rounds)} rounds (s): "
          + ", ".join(f"{name} {statistics.median(r[name] for r in rounds):.1f}" for name in names))  # fmt: skip
    ratios = [r["report"] / r["cold report"] for r in rounds]
    print(f"run's report step / cold report of the same folder: median {statistics.median(ratios):.2f} "
          f"({', '.join(f'{ratio:.2f}' for ratio in ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
