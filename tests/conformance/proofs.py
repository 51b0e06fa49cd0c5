"""Showing that checks can fail: certify through a deliberately non-conforming server.

The broken server is the real one behind `python -m jetcheck.testing.proxy --break ...`, and certify is the
real `jetcheck certify` pointed at the proxy's URL, exactly as a user would run it, with the testing package's
plugin loaded so that `--client <client>+<variant>` resolves.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from jetcheck.fixtures import children
from jetcheck.records import RESULTS_FILE, CheckResult, read_results

CERTIFY_TIMEOUT_S = 240
PROXY_START_S = 30
PROXY_STOP_S = 10
TESTING_PLUGIN = ("-p", "jetcheck.testing.plugin")  # offers the client variants to --client


@dataclass(frozen=True)
class Proof:
    """Running `areas` through `breakers` fails exactly the checks of `breaks`; every other check passes or is na."""

    breakers: tuple[str, ...]
    areas: tuple[str, ...]
    breaks: frozenset[str]
    client: str = "nats-py"  # the client under test (--client): a wire breaker breaks any client's rules

    @property
    def id(self) -> str:
        return "+".join(self.breakers) + ("" if self.client == "nats-py" else f":{self.client}")


@dataclass(frozen=True)
class Breaks:
    """What a misbehaviour (a client variant, a breaker) breaks: every check of `must` fails; checks of `may` fail
    or not, by client, for the reason `why_may`."""

    must: frozenset[str]
    may: frozenset[str] = frozenset()
    why_may: str = ""


def proof(breakers: str, areas: str, breaks: set[str], client: str = "nats-py") -> Proof:
    return Proof(tuple(breakers.split(",")), tuple(areas.split(",")), frozenset(breaks), client)


@contextmanager
def broken_proxy(upstream_url: str, breakers: tuple[str, ...]) -> Iterator[str]:
    """The standalone proxy with `breakers`, in front of `upstream_url`; yields its URL."""
    proc = children.start(
        [sys.executable, "-m", "jetcheck.testing.proxy", "--upstream", upstream_url, "--break", ",".join(breakers)],
        own_session=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        try:
            url = children.first_line(proc, PROXY_START_S)
        except children.ChildExited as exc:
            raise RuntimeError(f"proxy did not start: {exc}: {proc.stderr.read().strip()}") from None
        except TimeoutError as exc:
            raise RuntimeError(f"proxy did not start: {exc}") from None
        if not url.startswith("nats://"):
            raise RuntimeError(f"proxy did not start: {url}")
        yield url
    finally:
        children.stop(proc, PROXY_STOP_S, ask=signal.SIGTERM)
        proc.communicate()  # its last words on stderr, and its pipes closed


def certify_run(
    server: str,
    out: Path,
    *pytest_args: str,
    client: str = "nats-py",
    options: tuple[str, ...] = (),
    timeout_s: float = CERTIFY_TIMEOUT_S,
) -> tuple[int, list[CheckResult], str]:
    """`jetcheck certify --server SERVER --client CLIENT OPTIONS --out OUT -- PYTEST_ARGS`: its exit status, results
    and the tail of its stderr."""
    command = [sys.executable, "-m", "jetcheck.cli", "certify", "--server", server, "--client", client, *options]
    proc = subprocess.run(
        [*command, "--out", str(out), "--", *TESTING_PLUGIN, *pytest_args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    results_path = out / RESULTS_FILE
    if not results_path.exists():
        raise AssertionError(f"certify wrote no results (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, list(read_results(results_path)), proc.stderr[-2000:]


def certify(server: str, out: Path, *pytest_args: str, client: str = "nats-py") -> tuple[int, list[CheckResult]]:
    """`jetcheck certify ...` as certify_run, without its stderr."""
    code, results, _stderr = certify_run(server, out, *pytest_args, client=client)
    return code, results


def outcome(results: list[CheckResult]) -> tuple[set[str], dict[str, str]]:
    """Rule ids with a failing check, and every check that neither passed, failed nor was na (with its message)."""
    failed = {r.id for r in results if r.status == "fail"}
    odd = {r.check: f"{r.status}: {r.message[:300]}" for r in results if r.status not in ("pass", "fail", "na")}
    return failed, odd


def markexpr(areas: tuple[str, ...]) -> str:
    return " or ".join(areas)


def assert_breaks_exactly(server_url: str, out: Path, case: Proof) -> None:
    """Certify `case.areas` through `case.breakers` in front of `server_url`: exactly `case.breaks` fail, every
    other check passes or is na, and certify's exit status says whether a MUST check failed."""
    with broken_proxy(server_url, case.breakers) as url:
        status, results = certify(url, out, "-m", markexpr(case.areas), client=case.client)
    failed, odd = outcome(results)
    assert results, "no checks ran"
    assert not odd, f"checks that neither passed, failed nor were na: {odd}"
    assert failed == case.breaks, f"expected to fail: {sorted(case.breaks)}; failed: {sorted(failed)}"
    must_failed = any(r.status == "fail" and r.level == "MUST" for r in results)
    assert status == (1 if must_failed else 0)
