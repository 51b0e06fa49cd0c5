"""The `jetcheck` command: certify, matrix, bisect, load, report, run, durability; each command's options come from
jetcheck.options."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from jetcheck import __version__
from jetcheck.errors import JetcheckError
from jetcheck.fixtures import sticky_cancel, unraisable_interrupts, whole_loops
from jetcheck.fixtures.children import PARENT_SAYS_INTERRUPTED, interrupt_on_sigterm
from jetcheck.options import add_command, resolve_arguments
from jetcheck.redact import redact_url

REMAINDER_DEST = "pytest_args"  # the arguments after `--` that certify and matrix pass on to pytest


class Parser(argparse.ArgumentParser):
    """argparse with bad input as one `jetcheck: ` line and exit 2 (not a usage block), and option values that
    start with a minus and a digit (`--duration -5s`) taken as values, so that their own check says what is
    wrong with them instead of argparse reporting a missing argument."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # argparse's own pattern knows only plain negative numbers (-5, -.5), not -5s or -1e3 (a private attribute:
        # tests/test_private_apis.py says why)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed = super().parse_args(args, namespace)
        # argparse (3.11) hands `--out=--` over as [] when a command ends in a `--` remainder (certify, matrix)
        for name, value in vars(parsed).items():
            if value == [] and name != REMAINDER_DEST:
                self.error(f"--{name.replace('_', '-')}: expected a value, not --")
        if getattr(parsed, "command", None):  # the top-level parser: every option of the command gets its value
            resolve_arguments(parsed.command, parsed, os.environ)
        return parsed

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"jetcheck: {one_line(message.removeprefix('argument '))}\n")


# line breaks (for str.splitlines, terminals and log readers) and other control characters
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(message: str) -> str:
    """`message` with control characters escaped: a value quoted from the input cannot break the line."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], message)


@dataclass(frozen=True)
class Command:
    """A `jetcheck` command: the module that has its `validate(args)` (checks the options before anything starts),
    `run(args)` (returns the exit status) and DESCRIPTION (its --help text), its line in `jetcheck --help`, and
    whether the arguments after -- go to pytest; `laid_out`: --help keeps the DESCRIPTION's line breaks."""

    module: str
    help: str
    passthrough: bool = False
    laid_out: bool = False


# in the order --help lists them
COMMANDS = {
    "certify": Command("jetcheck.conformance.certify", "run the conformance suite against a server", passthrough=True),
    "matrix": Command(
        "jetcheck.conformance.matrix", "certify every server version of the matrix and compare them", passthrough=True
    ),
    "bisect": Command("jetcheck.conformance.bisect", "find the client releases between which a rule's status changes"),
    "diff": Command(
        "jetcheck.conformance.diff", "run the same generated programs on two servers and list what differs"
    ),
    "load": Command("jetcheck.load.cli", "run a JetStream load scenario with Locust", laid_out=True),
    "report": Command("jetcheck.reports.cli", "turn certify and load results into index.html, summary.md and tables"),
    "run": Command("jetcheck.run", "certify the embedded server (or --server), run a short load, write the report"),
    "durability": Command(
        "jetcheck.durability.cli",
        "certify that acknowledged writes survive crashes, pauses and partitions of a cluster's nodes",
    ),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; of `command` alone when it names one, so that only its module is imported (a
    certify does not import pandas, Locust or the durability workload: 0.4 s less at every start)."""
    parser = Parser(prog="jetcheck", description="Conformance and load testing for NATS JetStream.")
    parser.add_argument("--version", action="version", version=f"jetcheck {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, spec in COMMANDS.items():
        if command not in COMMANDS or command == name:
            module = importlib.import_module(spec.module)
            formatter = argparse.RawDescriptionHelpFormatter if spec.laid_out else argparse.HelpFormatter
            add_command(
                subparsers,
                name,
                run=module.run,
                validate=module.validate,
                passthrough=spec.passthrough,
                help=spec.help,
                description=module.DESCRIPTION,
                formatter_class=formatter,
            )
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else argv
    return build_parser(argv[0] if argv else None).parse_args(argv)


def _guarded(work: Callable[[], int]) -> int:
    """Run `work`; a problem with the user's input or target is one line on stderr and exit 2."""
    try:
        return work()
    except SystemExit as exc:  # argparse: --help, --version, or its one-line error
        return exc.code if isinstance(exc.code, int) else 2
    except JetcheckError as exc:  # a TargetError, a ConfigError or a results file that is not one
        print(f"jetcheck: {one_line(redact_url(str(exc)))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder named in the input that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        # a bare TimeoutError says nothing of itself: its class name at least
        print(f"jetcheck: {one_line(f'{where}{exc.strerror or exc or type(exc).__name__}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if not os.environ.get(PARENT_SAYS_INTERRUPTED):  # a jetcheck parent (matrix) says it once for both
            print("jetcheck: interrupted", file=sys.stderr)
        return 130


def validate(argv: list[str]) -> int:
    """Parse and check `argv` as `main` does, stopping before the command's first step (nothing is started,
    installed or written): 0 when it would run, else main's exit status (2 for bad input) and its line on stderr.
    Each command's `validate` is the first thing its `func` does."""

    def parse_and_validate() -> int:
        args = _parse(argv)
        args.validate(args)
        return 0

    return _guarded(parse_and_validate)


def main(argv: list[str] | None = None) -> int:
    # nats-py's TLS transport makes asyncio warn on every closed TLS connection; that noise is not the user's.
    logging.getLogger("asyncio").setLevel(logging.ERROR)

    def parse_and_run() -> int:
        args = _parse(argv)
        return args.func(args)

    # SIGTERM takes Ctrl-C's path: children stopped, what the run created removed, exit 130
    previous_sigterm = interrupt_on_sigterm()
    put_loops_back = whole_loops.install()  # an interrupt never leaves an event loop half made
    put_wait_for_back = sticky_cancel.install()  # nor a task it cancelled running on
    put_hook_back = unraisable_interrupts.install()  # nor one landing in a finalizer printed and lost
    try:
        return _guarded(parse_and_run)
    finally:
        put_hook_back()
        put_wait_for_back()
        put_loops_back()
        signal.signal(signal.SIGTERM, previous_sigterm)


if __name__ == "__main__":
    sys.exit(main())
