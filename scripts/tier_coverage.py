"""What the fast tier reaches: run `pytest -m "not slow"` under coverage (following the child processes certify,
load and durability start, pyproject's [tool.coverage.run]) and list jetcheck's modules it runs no line of.

    .venv/bin/python scripts/tier_coverage.py [--report coverage.json] [-- pytest args]

Prints one line per module the tier leaves untouched and a count; exits 1 when there is one, so the tier's promise
("touches every module") is a measurement, not a hope."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def untouched(report: dict) -> list[str]:
    """The measured files of which no statement ran (an empty __init__ has none to run, so it does not count)."""
    return sorted(
        name
        for name, data in report["files"].items()
        if data["summary"]["covered_lines"] == 0 and data["summary"]["num_statements"] > 0
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, help="where the JSON report goes (default: a temporary file)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jetcheck-tier-cov-") as scratch:
        report = args.report or Path(scratch) / "coverage.json"
        env = {**os.environ, "COVERAGE_FILE": str(Path(scratch) / ".coverage")}
        command = [sys.executable, "-m", "pytest", "-m", "not slow", "--cov", "--cov-report", f"json:{report}"]
        tests = subprocess.run([*command, *args.pytest_args], cwd=ROOT, env=env, check=False)
        data = json.loads(report.read_text())
    missed = untouched(data)
    for name in missed:
        print(f"untouched by the fast tier: {name}")
    measured = len(data["files"])
    print(f"{measured - len(missed)} of {measured} modules touched; tests exited {tests.returncode}")
    return 1 if missed or tests.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
