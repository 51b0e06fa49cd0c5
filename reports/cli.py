"""The `jetcheck report` and `jetcheck run` subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jetcheck.config import CREDENTIAL_OPTIONS, add_option_arguments, cli_flag, resolve_credentials, resolve_some
from jetcheck.reports import compare


def _share(value: str) -> float:
    number = float(value)
    if not 0 < number < 10:
        raise argparse.ArgumentTypeError(f"expected a share such as 0.1 (10 %), not {value!r}")
    return number


def report_command(args: argparse.Namespace) -> int:
    from jetcheck.reports.build import build_report

    outcome = build_report(
        args.inputs,
        out=Path(args.out) if args.out else None,
        baseline=args.baseline,
        master=args.master,
        throughput_drop=args.max_throughput_drop,
        p99_rise=args.max_p99_rise,
    )
    print(outcome.index.resolve())
    for line in outcome.verdict_lines:
        print(f"verdict: {line}", file=sys.stderr)
    return 1 if outcome.regressions else 0


def run_command(args: argparse.Namespace) -> int:
    from jetcheck.reports.runjob import main_job

    server = resolve_some(["server"], vars(args), os.environ, flag=cli_flag)["server"]
    return main_job(
        Path(args.out) if args.out else None,
        args.server_version,
        args.master,
        strict=args.strict,
        server=server,
        credentials=resolve_credentials(vars(args), os.environ, flag=cli_flag),
    )


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
    report.add_argument("--master", metavar="URL", help="Spark master (default: local[*] on 127.0.0.1)")
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
    report.set_defaults(func=report_command)

    run = subparsers.add_parser(
        "run",
        help="certify the embedded server (or --server), run a short load, write the report",
        description="Certify against the embedded nats-server (or --server with its credentials), run a ~20 s "
        "publish+consume load, and write the report into one run folder; prints the path of its index.html and "
        "the verdict. Exit 0 once the report is written, 3 when a step (or certify's results) did not complete; "
        "with --strict, 1 when a MUST check failed.",
    )
    add_option_arguments(run, ["server", *CREDENTIAL_OPTIONS])
    run.add_argument("--out", metavar="DIR", help="run folder to create (default: ./jetcheck-run-<time>)")
    run.add_argument("--server-version", metavar="V", help="nats-server release to certify and load")
    run.add_argument("--master", metavar="URL", help="Spark master for the report (default: local[*])")
    run.add_argument("--strict", action="store_true", help="exit 1 when a MUST check failed (a CI gate)")
    run.set_defaults(func=run_command)
