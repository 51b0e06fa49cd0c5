"""`jetcheck diff`: the same seeded programs on two servers, and every observable difference between them.

Each program (publishes with any mix of JetStream's headers and lookalikes, deletes, purges; `conformance/programs.py`)
runs on a fresh stream on each side. What it shows (each answer, then the stream's state, messages, last message
per subject and a consumer's num_pending per filter; `conformance/outcomes.py`) is compared. Each kind of difference
is shrunk to a minimal program, against both servers, and printed with both answers and a nats-py script that
reproduces it by hand. It answers the upgrade question ("what changes from 2.11.11 to 2.12.0?") and the vendor's
("where does my server differ from nats-server?"). A difference is a finding whichever side is right; the oracle
checks (`certify -- -m oracle`) say which side breaks a documented rule.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from jetcheck.credentials import CREDENTIAL_OPTIONS
from jetcheck.fixtures.cleanup import RunLedger, claim_prefix, delete_created_streams
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials, probe
from jetcheck.option_table import new_run_prefix

from .names import Names
from .oracle_runs import fewer_steps
from .outcomes import Outcome, outcome
from .programs import SETUPS, Operation, Setup, header_programs
from .reproduction import script

DESCRIPTION = (
    "Run the same seeded programs of stream operations on two servers (--server, and --against: a nats-server release "
    "jetcheck starts, or a nats:// URL) and list every observable difference as a minimal program with both servers' "
    "answers and a nats-py script that reproduces it. Exits 0 when the servers agree, 1 when they differ."
)
SHOWN_KINDS = 20  # distinct kinds of difference shrunk and written out
PROGRAMS = SETUPS.flatmap(lambda setup: st.tuples(st.just(setup), header_programs(setup)))


@dataclass
class Side:
    label: str
    nc: Any
    names: Names


@dataclass(frozen=True)
class Difference:
    setup: Setup
    program: list[Operation]
    found: list[str]

    @property
    def kind(self) -> str:
        """What differed, without the values: differences of one kind are one finding."""
        first = self.found[0]
        return first.split(":")[0].split(",")[-1].strip().split("(")[0]


def validate(args: argparse.Namespace) -> None:
    """The options' table checks every value; nothing more to check before the servers start."""


async def _run_on(side: Side, setup: Setup, program: list[Operation], storage: str) -> Outcome:
    name, root = side.names.stream("D"), side.names.subject("d")
    config = {"name": name, "subjects": [f"{root}.>"], "storage": storage, "allow_direct": True, **setup.config()}
    reply = json.loads((await side.nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(config).encode(), 5)).data)
    if "error" in reply:
        raise RuntimeError(f"{side.label} refused the stream {config}: {reply['error']}")
    try:
        return await outcome(side.nc, name, root, program)
    finally:
        await side.nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", 5)


async def _compare(sides: tuple[Side, Side], setup: Setup, program: list[Operation], storage: str) -> list[str]:
    a, b = [await _run_on(side, setup, program, storage) for side in sides]
    return a.differences(b, program, (sides[0].label, sides[1].label))


def _programs(count: int, at: int) -> Iterator[tuple[Setup, list[Operation]]]:
    drawn: list[tuple[Setup, list[Operation]]] = []

    @seed(at)
    @settings(
        max_examples=count, database=None, phases=[Phase.generate], deadline=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(PROGRAMS)
    def collect(example):
        drawn.append(example)

    collect()
    return iter(drawn)


async def _shrunk(sides: tuple[Side, Side], difference: Difference, storage: str) -> Difference:
    for candidate in fewer_steps((difference.setup, difference.program)):
        found = await _compare(sides, candidate[0], candidate[1], storage)
        if found:
            return await _shrunk(sides, Difference(candidate[0], candidate[1], found), storage)
    return difference


async def _diff(args: argparse.Namespace) -> tuple[list[Difference], int, tuple[str, str]]:
    credentials = Credentials(**{name: getattr(args, name) for name in CREDENTIAL_OPTIONS})
    providers = [
        provider_for(args.server, args.server_version, credentials),
        provider_for(*(("local", args.against) if "://" not in args.against else (args.against, "")), Credentials()),
    ]
    async with AsyncExitStack() as stack:
        sides = []
        for provider in providers:
            target = provider.start()
            stack.callback(provider.stop)
            nc = await target.connect()
            stack.push_async_callback(nc.close)
            info = await probe(nc)
            prefix = new_run_prefix()
            await claim_prefix(nc, prefix)
            ledger = RunLedger(prefix)
            stack.push_async_callback(delete_created_streams, nc, ledger)
            where = "" if target.managed else f" at {target.url}"
            names = Names(prefix, itertools.count(1), ledger)
            sides.append(Side(f"nats-server {info.version}{where}", nc, names))
        pair = (sides[0], sides[1])
        kinds: dict[str, Difference] = {}
        ran = 0
        for setup, program in _programs(args.programs, args.seed):
            ran += 1
            found = await _compare(pair, setup, program, args.storage)
            if found:
                difference = Difference(setup, program, found)
                kinds.setdefault(difference.kind, difference)
        shrunk = [await _shrunk(pair, d, args.storage) for d in list(kinds.values())[:SHOWN_KINDS]]
        return shrunk, ran, (pair[0].label, pair[1].label)


def report(differences: list[Difference], ran: int, labels: tuple[str, str], storage: str) -> str:
    """The differences as Markdown: each with its program, what differed, and a script to see it by hand."""
    lines = [f"# {labels[0]} against {labels[1]}", "", f"{ran} programs on {storage} streams: "]
    lines[-1] += f"{len(differences)} kind(s) of difference." if differences else "no difference."
    for i, difference in enumerate(differences, 1):
        config = {"storage": storage, "allow_direct": True, **difference.setup.config()}
        program = "\n".join(f"{n}. `{op}`" for n, op in enumerate(difference.program, 1))
        lines += ["", f"## {i}. {difference.kind}", "", program, "", *(f"- {f}" for f in difference.found)]
        lines += ["", "```python", script(f"{labels[0]} against {labels[1]}", config, difference.program), "```"]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    differences, ran, labels = asyncio.run(_diff(args))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "diff.md").write_text(report(differences, ran, labels, args.storage), encoding="utf-8")
    print(f"{labels[0]} against {labels[1]}: {ran} programs, {len(differences)} kind(s) of difference")
    for difference in differences:
        print(f"  {difference.found[0]}")
        print("    program: " + "; ".join(map(str, difference.program)))
    print(f"written: {out / 'diff.md'}")
    return 1 if differences else 0
