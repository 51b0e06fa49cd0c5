"""The `jetcheck report` subcommand."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from jetcheck.errors import ConfigError
from jetcheck.reports import inputs
from jetcheck.reports.inputs import ResultSet


def validate(args: argparse.Namespace) -> tuple[list[ResultSet], ResultSet | None]:
    """Read every input (and the baseline) as the report will, before Spark starts: a corrupt or foreign file is
    one line naming it. The result sets and the baseline's, for the report to read no file again."""
    result_sets = inputs.resolve_all(args.inputs)
    for result_set in result_sets:
        inputs.check(result_set)
    base = inputs.resolve(args.baseline) if args.baseline else None
    if base is not None:
        inputs.check(base)
    return result_sets, base


# Spark's error for a file it cannot read, e.g. a Parquet log whose pages are corrupt (its footer, checked by
# validate, was intact)
_SPARK_READ_FAILURE = re.compile(r"FAILED_READ_FILE.*?reading file (?:file:)?(?P<path>\S+?)\.?\s", re.DOTALL)


def spark_read_failure(exc: Exception) -> str | None:
    """One line for Spark failing to read an input file, or None when `exc` is not that."""
    text = str(exc)
    match = _SPARK_READ_FAILURE.search(text)
    if match is None:
        return None
    causes = re.findall(r"Caused by: (?:[\w.$]+: )?(.+)", text)
    path = re.sub(r"^/+", "/", match.group("path"))
    return f"{path}: Spark could not read it ({causes[-1].strip() if causes else 'corrupt file'})"


def run(args: argparse.Namespace) -> int:
    from jetcheck.reports.build import build_report

    resolved = validate(args)
    try:
        outcome = build_report(
            args.inputs,
            out=Path(args.out) if args.out else None,
            baseline=args.baseline,
            master=args.master,
            throughput_drop=args.max_throughput_drop,
            p99_rise=args.max_p99_rise,
            resolved=resolved,
        )
    except Exception as exc:  # only Spark's own read failure is bad input; anything else stays a bug to see
        failure = spark_read_failure(exc)
        if failure is None:
            raise
        raise ConfigError(failure) from None
    print(outcome.index.resolve())
    for line in outcome.verdict_lines:
        print(f"verdict: {line}", file=sys.stderr)
    return 1 if outcome.regressions else 0


# `jetcheck report --help`
DESCRIPTION = (
    "Aggregate one or more run, certify or load folders (PySpark) into a self-contained "
    "index.html, summary.md and tables/*.csv|parquet. Several --in give a compatibility matrix. "
    "Exit 1 when --baseline finds a regression."
)
