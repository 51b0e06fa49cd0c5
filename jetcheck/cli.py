"""The `jetcheck` command: certify, load, report, run."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from jetcheck import __version__
from jetcheck.fixtures.children import PARENT_SAYS_INTERRUPTED, interrupt_on_sigterm
from jetcheck.fixtures.errors import TargetError
from jetcheck.redact import redact_url


def build_parser() -> argparse.ArgumentParser:
    from jetcheck.conformance import certify, matrix
    from jetcheck.load import cli as load_cli
    from jetcheck.reports import cli as reports_cli

    parser = argparse.ArgumentParser(prog="jetcheck", description="Conformance and load testing for NATS JetStream.")
    parser.add_argument("--version", action="version", version=f"jetcheck {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    certify.register(subparsers)
    matrix.register(subparsers)
    load_cli.register(subparsers)
    reports_cli.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # nats-py's TLS transport makes asyncio warn on every closed TLS connection; that noise is not the user's.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    # SIGTERM takes Ctrl-C's path: children stopped, what the run created removed, exit 130
    previous_sigterm = interrupt_on_sigterm()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return args.func(args)
    except TargetError as exc:
        print(f"jetcheck: {redact_url(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if not os.environ.get(PARENT_SAYS_INTERRUPTED):
            print("jetcheck: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)


if __name__ == "__main__":
    sys.exit(main())
