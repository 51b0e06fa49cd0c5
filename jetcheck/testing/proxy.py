"""The fault proxy with the suite's breakers, standalone: what the proofs put between a server and a client.

    python -m jetcheck.testing.proxy --upstream nats://127.0.0.1:4222 --break strip-msg-id,purge-drop-keep

It prints its URL and runs until SIGTERM; on stop it prints how often each breaker changed a frame.
"""

from __future__ import annotations

import argparse
import sys

from jetcheck.fixtures import proxy

from .breaker_registry import BREAKERS, breakers_named


def main(argv: list[str] | None = None) -> int:
    parser = proxy.argument_parser("python -m jetcheck.testing.proxy")
    parser.add_argument("--break", dest="breakers", default="", help=f"comma-separated breakers: {', '.join(BREAKERS)}")
    return proxy.main(argv, parser, _breakers)


def _breakers(args: argparse.Namespace) -> list[proxy.Breaker]:
    return breakers_named(*args.breakers.split(","))


if __name__ == "__main__":
    sys.exit(main())
