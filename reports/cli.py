"""The `jetcheck report` subcommand."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from jetcheck.errors import ConfigError
from jetcheck.reports import compare, inputs


def _share(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number < 10:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a share such as 0.1 (10 %), not {value!r}")
    return number


def _master(value: str) -> str:
    # local, local[4], local[*], local[4,2] (retries), or a cluster manager's URL
    if not (re.fullmatch(r"local(\[(\d+|\*)(,\d+)?\])?", value) or urlsplit(value).scheme in ("spark", "k8s")):
        raise argparse.ArgumentTypeError(
            f"expected a Spark master such as local[*] or spark://host:7077, not {value!r}"
        )
    return value


def _refuse_file(value: str | None, flag: str) -> None:
    if value and Path(value).exists() and not Path(value).is_dir():
        raise ConfigError(f"{flag}: {value} exists and is not a directory")


def validate_report(args: argparse.Namespace) -> None:
    """Read every input (and the baseline) as the report will, before Spark starts: a corrupt or foreign file is
    one line naming it."""
    for result_set in inputs.resolve_all(args.inputs):
        inputs.check(result_set)
    if args.baseline:
        inputs.check(inputs.resolve(args.baseline))
    _refuse_file(args.out, "--out")


# Spark's error for a file it cannot read, e.g. a Parquet log whose pages are corrupt (its footer, checked by
# validate_report, was intact)
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


def report_command(args: argparse.Namespace) -> int:
    from jetcheck.reports.build import build_report

    validate_report(args)
    try:
        outcome = build_report(
            args.inputs,
            out=Path(args.out) if args.out else None,
            baseline=args.baseline,
            master=args.master,
            throughput_drop=args.max_throughput_drop,
            p99_rise=args.max_p99_rise,
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


def register(subparsers) -> None:
    report = subparsers.add_parser(
        "report",
        help="turn certify and load results into index.html, summary.md and tables",
        description="Aggregate one or more run, certify or load folders (PySpark) into a self-contained "
        "index.html, summary.md and tables/*.csv|parquet. Several --in give a compatibility matrix. "
        "Exit 1 when --baseline finds a regression.",
    )
    report.add_argument(
        "--in",
        dest="inputs",
        action="append",
        required=True,
        metavar="DIR",
        help="a run folder, a certify folder or a load folder (repeatable)",
    )
    report.add_argument("--baseline", metavar="DIR", help="compare with this earlier run and flag regressions")
    report.add_argument("--out", metavar="DIR", help="where to write (default: RUN/report, else ./jetcheck-report)")
    report.add_argument("--master", type=_master, metavar="URL", help="Spark master (default: local[*] on 127.0.0.1)")
    report.add_argument(
        "--max-throughput-drop",
        type=_share,
        default=compare.THROUGHPUT_DROP,
        metavar="SHARE",
        help=f"flag throughput below baseline by more than this (default {compare.THROUGHPUT_DROP})",
    )
    report.add_argument(
        "--max-p99-rise",
        type=_share,
        default=compare.P99_RISE,
        metavar="SHARE",
        help=f"flag p99 above baseline by more than this (default {compare.P99_RISE})",
    )
    report.set_defaults(func=report_command, validate=validate_report)
