"""What the oracle checks share: a stream per generated example, a bounded shrink of a failing program, and a
failure that carries its program, what disagreed, and a script that reproduces it by hand."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from .hypothesis_profiles import ORACLE_EXAMPLES
from .jsapi import ApiError, api, clustered, create_stream, wait_until_answered
from .programs import Operation, Publish, render
from .reproduction import script

# Hypothesis must finish (and shrink) inside the check's time: a timeout inside an example reads as flakiness.
PROPERTY_TIMEOUT_S = 600
SHRINK_BUDGET_S = 60  # the fast profile's own shrinking of one failure
FOUND_SHOWN = 12


@dataclass(frozen=True)
class Stream:
    name: str
    root: str
    config: dict[str, Any]  # as asked, beside name and subjects


@asynccontextmanager
async def fresh_stream(nc, names, config: dict[str, Any], tag: str = "O"):
    """A prefixed stream on `<root>.>` with `config` for one example, deleted after it. On a cluster it is R1 unless
    `config` says otherwise: an R3 stream's DIRECT.GET may be answered by a replica that is behind (ADR-31), so the
    read oracles would need to wait for the paths to converge (oracle.replicas-equivalent compares R1 with R3)."""
    stream = Stream(names.stream(tag), names.subject(tag.lower()), config)
    await create_stream(nc, stream.name, [f"{stream.root}.>"], **config)
    if clustered(nc) and config.get("allow_direct"):  # DIRECT.GET reaches a stream on another node only later
        await wait_until_answered(nc, f"$JS.API.DIRECT.GET.{stream.name}", b'{"seq": 1}')
    try:
        yield stream
    finally:
        with suppress(ApiError):  # the run's cleanup deletes what is left, by its prefixed name
            await api(nc, f"$JS.API.STREAM.DELETE.{stream.name}")


def failure(what: str, config: dict[str, Any], program: list[Operation], found: list[str]) -> str:
    """An oracle's failure: what it holds, the stream and program, what disagreed, and a script to see it by hand."""
    more = f"\n  ... {len(found) - FOUND_SHOWN} more" if len(found) > FOUND_SHOWN else ""
    lines = "\n".join(f"  - {f}" for f in found[:FOUND_SHOWN]) + more
    return (
        f"{what}\nstream config {config}\nprogram:\n{render(program)}\nfound:\n{lines}\n"
        f"reproduce by hand (nats-py):\n{script(what, config, program)}"
    )


def run_machine(target, build: Callable[[asyncio.Runner, Any], type], machine_settings: settings) -> None:
    """Run the state machine `build(runner, nc)` makes, on one connection to `target` and one event loop (a
    RuleBasedStateMachine's rules are synchronous: each runs its requests on `runner`)."""
    with asyncio.Runner() as runner:
        nc = runner.run(target.connect())
        try:
            run_state_machine_as_test(build(runner, nc), settings=machine_settings)
        finally:
            runner.run(nc.close())


def fewer_steps(drawn: Any) -> Iterator[Any]:
    """Smaller candidates of a drawn value whose last item is a program: the program less one step (last step
    first: later steps depend on fewer others), then a publish less one header or with an empty payload."""
    *rest, program = drawn
    for i in reversed(range(len(program) if len(program) > 1 else 0)):
        yield (*rest, program[:i] + program[i + 1 :])
    for i, op in enumerate(program):
        if isinstance(op, Publish):
            simpler = [replace(op, headers=op.headers[:j] + op.headers[j + 1 :]) for j in range(len(op.headers))]
            simpler += [replace(op, msg_id=None)] if op.msg_id else []
            simpler += [replace(op, payload=b"")] if op.payload else []
            for candidate in simpler:
                yield (*rest, [*program[:i], candidate, *program[i + 1 :]])


@dataclass
class OracleRun:
    """Runs an oracle's examples on one connection to the target.

    A live server makes Hypothesis' shrinking slow (every candidate is a program run on the server), so the fast
    profile does not use it: a failing example loses one step at a time while it still fails (a pass over
    its steps, again after each step it drops), and the thorough profile shrinks with Hypothesis. A run whose profile
    has no shrink phase (a proof's --no-shrink) reports the first failing example as it is."""

    target: Any
    base: settings
    profile: str  # --profile: fast or thorough
    observe: Callable[[str, Any], None]
    ran: int = 0

    def __call__(
        self,
        strategy: st.SearchStrategy,
        example: Callable[[Any, Any], Awaitable[None]],
        smaller: Callable[[Any], Iterator[Any]] = fewer_steps,
    ) -> None:
        """Run `example(nc, drawn)` for every example `strategy` draws; a failure is raised for its smallest form."""
        failing: list[Any] = []
        thorough = self.profile == "thorough"
        phases = self.base.phases if thorough else tuple(p for p in self.base.phases if p is not Phase.shrink)
        with asyncio.Runner() as runner:
            nc = runner.run(self.target.connect())
            try:

                @settings(self.base, phases=phases, max_examples=ORACLE_EXAMPLES[self.profile])
                @given(strategy)
                def property_holds(drawn):
                    self.ran += 1
                    try:
                        runner.run(example(nc, drawn))
                    except AssertionError:
                        failing.append(drawn)
                        raise

                try:
                    property_holds()
                except AssertionError:
                    if thorough or not failing or Phase.shrink not in self.base.phases:
                        raise
                    runner.run(example(nc, self._shrunk(runner, nc, example, failing[-1], smaller)))
                    raise  # the smaller form no longer fails: the original failure stands
            finally:
                self.observe("measured_examples", self.ran)
                runner.run(nc.close())

    def _shrunk(
        self, runner, nc, example, drawn: Any, smaller: Callable[[Any], Iterator[Any]], until: float | None = None
    ) -> Any:
        until = time.monotonic() + SHRINK_BUDGET_S if until is None else until
        for candidate in smaller(drawn):
            if time.monotonic() > until:  # a server that answers slowly when it fails: the smallest found so far
                return drawn
            try:
                runner.run(example(nc, candidate))
            except AssertionError:
                return self._shrunk(runner, nc, example, candidate, smaller, until)
            except Exception:  # a candidate that ends otherwise does not show this failure
                continue
        return drawn
