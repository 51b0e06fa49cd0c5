"""Held-out validation of jetcheck's oracles (issue 42): for each mined pair (validation/mined_pairs.toml), certify
the last buggy and the first fixed release on the bug's areas (`jetcheck matrix --versions BUGGY,FIXED -- -m AREAS`,
which runs `jetcheck certify --server-version X --out OUT/<pair>/<X> -- -m AREAS` for each), compare the two result
sets check by check, print per pair whether certify told the releases apart, and the rate; write a Markdown table.

    .venv/bin/python scripts/validate_oracles.py [PAIR_ID ...] [--out DIR] [--reuse] [--table FILE]

One certify at a time (the machine is small); --reuse judges result sets an earlier run left in --out again without
running certify."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from jetcheck.conformance.heldout import (
    ORACLE_AREAS,
    ORACLE_HOMES,
    MinedPair,
    PairVerdict,
    compare,
    load_pairs,
    markdown_table,
    rate,
    rate_line,
    verdict_line,
)
from jetcheck.records import RESULTS_FILE, read_results

ROOT = Path(__file__).resolve().parent.parent
PAIRS_FILE = ROOT / "validation" / "mined_pairs.toml"
RELEASE_PAIRS = ROOT / "tests" / "conformance" / "test_release_pairs.py"


def known_bugs(buggy: str, fixed: str) -> dict[str, str]:
    """Check functions that test_release_pairs.py's PAIRS name as proofs of another bug fixed between the same two
    releases, with that bug: read from its ReleasePair(rule, check, buggy, fixed, bug, reason) calls, not imported."""
    found = {}
    for node in ast.walk(ast.parse(RELEASE_PAIRS.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ReleasePair" and len(node.args) >= 5:
            rule, check, old, new, bug = (ast.literal_eval(arg) for arg in node.args[:5])
            if (old, new) == (buggy, fixed):
                found[check.split("::")[1].split("[")[0]] = f"{bug}, {rule}"
    return found


def results_of(folder: Path, version: str) -> Path:
    return folder / version / RESULTS_FILE  # jetcheck matrix keeps OUT/<version>/ for one client


def certify_pair(pair: MinedPair, folder: Path, oracle_areas: tuple[str, ...] = ORACLE_AREAS) -> int:
    """`jetcheck matrix` on the pair's two releases and areas; its exit status."""
    command = [
        sys.executable,
        "-m",
        "jetcheck.cli",
        "matrix",
        "--versions",
        f"{pair.buggy},{pair.fixed}",
        "--out",
        str(folder),
        "--",
        "-m",
        " or ".join((*oracle_areas, *(area for area in pair.areas if area in ORACLE_HOMES))),
        # whether certify tells the releases apart needs no minimal failing example: shrinking one against a live
        # server (a stateful check on a release with the bug) can take the check's whole 10 minutes
        "-p",
        "jetcheck.testing.plugin",
        "--no-shrink",
    ]
    print(f"== {pair.id}: {' '.join(command[2:])}", flush=True)
    log = folder / "matrix.log"
    folder.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ)).returncode


def diff_pair(pair: MinedPair, folder: Path) -> str:
    """`jetcheck diff` of the pair's two releases (200 seeded programs): the first difference it names, or ""."""
    command = [sys.executable, "-m", "jetcheck.cli", "diff", "--server-version", pair.buggy, "--against", pair.fixed,
               "--out", str(folder / "diff")]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    (folder / "diff.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    lines = proc.stdout.splitlines()
    return lines[1].strip() if proc.returncode == 1 and len(lines) > 1 else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="pair ids (default: every pair)")
    parser.add_argument("--pairs", type=Path, default=PAIRS_FILE, help="the mined pairs (TOML)")
    parser.add_argument("--out", type=Path, default=ROOT / "jetcheck-runs" / "validation", help="result sets")
    parser.add_argument("--reuse", action="store_true", help="judge result sets already in --out, run nothing")
    parser.add_argument("--table", type=Path, help="Markdown table to write (default: OUT/held-out.md)")
    parser.add_argument(
        "--oracle-areas",
        default=",".join(ORACLE_AREAS),
        help=f"the oracles' areas to certify (default: {','.join(ORACLE_AREAS)})",
    )
    args = parser.parse_args()

    pairs = load_pairs(args.pairs)
    unknown = set(args.ids) - {p.id for p in pairs}
    if unknown:
        parser.error(f"no such pair: {', '.join(sorted(unknown))}")
    chosen = [p for p in pairs if not args.ids or p.id in args.ids]

    verdicts: list[PairVerdict] = []
    unrun: list[MinedPair] = []
    for pair in chosen:
        folder = args.out / pair.id
        started = time.monotonic()
        if not args.reuse:
            status = certify_pair(pair, folder, tuple(args.oracle_areas.split(",")))
            print(f"   matrix exit {status} after {time.monotonic() - started:.0f} s (log: {folder / 'matrix.log'})")
        found = [results_of(folder, v) for v in (pair.buggy, pair.fixed)]
        if not all(path.exists() for path in found):
            print(f"{pair.id}: no result set for {', '.join(str(p) for p in found if not p.exists())}")
            unrun.append(pair)
            continue
        verdict = compare(pair, *(list(read_results(path)) for path in found), known_bugs(pair.buggy, pair.fixed))
        if not args.reuse:
            verdict = replace(verdict, diff=diff_pair(pair, folder))
            (folder / "diff.first").write_text(verdict.diff, encoding="utf-8")
        elif (folder / "diff.first").exists():
            verdict = replace(verdict, diff=(folder / "diff.first").read_text(encoding="utf-8"))
        verdicts.append(verdict)
        print(verdict_line(verdict), flush=True)

    table = markdown_table(verdicts, unrun)
    target = args.table or args.out / "held-out.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(table, encoding="utf-8")
    print(f"\n{len(verdicts)} pair(s) certified: {rate_line(rate(verdicts))}")
    print(f"table: {target}")
    return 0 if not unrun else 2


if __name__ == "__main__":
    sys.exit(main())
