"""Showing that checks can fail: certify through a deliberately non-conforming server.

The broken server is the real one behind `python -m jetcheck.testing.proxy --break ...`, and certify is the
real `jetcheck certify` pointed at the proxy's URL, exactly as a user would run it, with the testing package's
plugin loaded so that `--client <client>+<variant>` resolves.

A proof row is judged check by check: it names the rules it breaks, and fails every check certify collects for
them, every parameter instance, except those it spares (each with why), each for its rule's reason: the failure's
message carries the fragment the row names for the rule (`reasons`), or the rule's usual one (reasons.REASONS). A
check that fails otherwise (an unexpected exception, another assertion) proves nothing about its rule.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jetcheck.conformance.certify import checks_command
from jetcheck.fixtures import children
from jetcheck.records import RESULTS_FILE, CheckResult, read_results
from jetcheck.testing.plugin import NO_SHRINK
from jetcheck.verdict import judge

from .reasons import REASONS, ROW_REASONS
from .test_catalog import check_rule_ids

# Checks nats-server itself fails (the proofs' server, and the releases docs/servers/nats-server.md names): findings
# about its behaviour, each reproduced by hand there. A row that runs one may see it fail, in its own words whatever
# the row breaks (a breaker may also spare the server its bug): check -> what its failure says.
SERVER_FINDINGS: dict[str, str] = {
    # an empty CONSUMER.PAUSE answers paused false, but a push consumer delivers what was stored during the pause
    # only once another message comes (server/consumer.go updatePauseState: the resume does not signal the consumer)
    "test_pause.py::test_an_empty_pause_request_resumes_at_once": "a resumed consumer delivers",
    # a SHOULD: ADR-42 limits a consumer to one priority group; the server takes several
    "test_priority.py::test_a_consumer_with_two_priority_groups_is_refused": "more than one priority group is",
    # a SHOULD: the end of a no_hdr batch counts the messages it sent as still pending (server/stream.go
    # getDirectRequest decrements Nats-Num-Pending only where it writes a message's headers)
    "test_reads.py::test_a_direct_get_with_no_hdr_returns_the_body_without_headers": "the end of a no_hdr batch keeps",
    # ADR-31 reads multi_last up to a time inclusively; the server leaves out a message stored at that very time
    # (server/stream.go getDirectMulti: GetSeqFromTime(up_to_time) - 1)
    "test_reads.py::test_multi_last_up_to_a_messages_own_time_includes_it": "and message 3 was stored at it",
}

CERTIFY_TIMEOUT_S = 240
PROXY_START_S = 30
PROXY_STOP_S = 10
# offers the client variants to --client; a proof needs a check to fail, not a minimal failing example
TESTING_PLUGIN = ("-p", "jetcheck.testing.plugin", NO_SHRINK)
COLLECT_TIMEOUT_S = 120
# certify's rootdir is the conformance package, so every check's node id starts with its checks folder
CHECKS_DIR = "checks/"


def check_name(result: CheckResult) -> str:
    """A result's check as proof rows name it: its node id inside the checks folder, with its parameters."""
    return result.check.removeprefix(CHECKS_DIR)


@functools.cache
def certify_checks() -> dict[str, str]:
    """Every check `jetcheck certify` collects with its defaults, every parameter instance, by check name, with its
    rule id: certify's own pytest command with --collect-only, in a scratch directory (collection writes run.json)."""
    with tempfile.TemporaryDirectory(prefix="jetcheck-collect-") as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JETCHECK_")} | {"JETCHECK_OUT": scratch}
        proc = subprocess.run(
            checks_command("--collect-only", "-q"),
            capture_output=True,
            text=True,
            env=env,
            cwd=scratch,
            timeout=COLLECT_TIMEOUT_S,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"collecting certify's checks failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    rules = check_rule_ids()  # by "module.function"
    checks = {}
    for line in proc.stdout.splitlines():
        if line.startswith(CHECKS_DIR) and "::" in line:
            name = line.removeprefix(CHECKS_DIR)
            module, function = name.split("::", 1)
            (checks[name],) = rules[f"{module.removesuffix('.py')}.{function.split('[')[0]}"]
    return checks


def checks_of(rules: Iterable[str], checks: Mapping[str, str] | None = None) -> frozenset[str]:
    """The checks (names) of `rules` among `checks` (check name -> rule id; certify's by default)."""
    rules = set(rules)
    return frozenset(name for name, rule in (certify_checks() if checks is None else checks).items() if rule in rules)


def declared_failures(row, checks: Mapping[str, str] | None = None) -> frozenset[str]:
    """The checks a proof row must see fail: every check of the rules it breaks, but those it spares."""
    return checks_of(row.breaks, checks) - set(getattr(row, "spared", {}))


@dataclass(frozen=True)
class Proof:
    """Running `areas` through `breakers` fails exactly the checks of `breaks` but the `spared` ones (check name ->
    why the breakers leave it passing); every other check passes or is na."""

    breakers: tuple[str, ...]
    areas: tuple[str, ...]
    breaks: frozenset[str]
    client: str = "nats-py"  # the client under test (--client): a wire breaker breaks any client's rules
    spared: Mapping[str, str] = field(default_factory=dict, compare=False)
    reasons: Mapping[str, str] = field(default_factory=dict, compare=False)  # rule -> its failure's fragment here

    @property
    def id(self) -> str:
        return "+".join(self.breakers) + ("" if self.client == "nats-py" else f":{self.client}")


@dataclass(frozen=True)
class Breaks:
    """What a misbehaviour (a client variant, a breaker) breaks: every check of `must` fails but the `spared` ones
    (check name -> why); checks of `may` fail or not, by client, for the reason `why_may`."""

    must: frozenset[str]
    may: frozenset[str] = frozenset()
    why_may: str = ""
    spared: Mapping[str, str] = field(default_factory=dict, compare=False)
    reasons: Mapping[str, str] = field(default_factory=dict, compare=False)  # rule -> its failure's fragment here


@dataclass(frozen=True)
class ClientRow:
    """A client proof row: `client` certified through the wire `breakers` ("" for none), or as `client+variant`
    (its own misbehaviour, no proxy); neither is the client's reference run."""

    client: str
    breakers: str = ""
    variant: str = ""

    @property
    def id(self) -> str:
        return f"{self.client}:{self.breakers or self.variant or 'reference'}"

    @property
    def spelling(self) -> str:
        """The --client value."""
        return f"{self.client}+{self.variant}" if self.variant else self.client


def proof(
    breakers: str,
    areas: str,
    breaks: set[str],
    client: str = "nats-py",
    spared: Mapping[str, str] | None = None,
    reasons: Mapping[str, str] | None = None,
) -> Proof:
    return Proof(
        tuple(breakers.split(",")), tuple(areas.split(",")), frozenset(breaks), client, dict(spared or {}),
        dict(reasons or {}),
    )  # fmt: skip


def reason_for(row, rule: str) -> tuple[str, ...]:
    """The message fragments a failing check of `rule` carries under `row` (one of them, when its checks fail in
    different words): the row's own, else its entry in reasons.ROW_REASONS, else the rule's usual one; () when none
    names one (the proof gate reports it)."""
    reason = (getattr(row, "reasons", {}).get(rule) or ROW_REASONS.get(getattr(row, "id", ""), {}).get(rule)
              or REASONS.get(rule, ""))  # fmt: skip
    return (reason,) if isinstance(reason, str) and reason else tuple(reason or ())


def wrong_reasons(
    row, results: list[CheckResult], own: Iterable[str] = (), name_of: Callable[[CheckResult], str] = check_name
) -> dict[str, str]:
    """The failed checks of the rules `row` breaks whose message carries none of the rule's reasons (reason_for),
    with what they said instead; checks named in `own` (those the client fails with no breaker, for its own reason)
    are not judged."""
    own = set(own)
    wrong = {}
    for r in results:
        if r.status != "fail" or r.id not in row.breaks or name_of(r) in own:
            continue
        reasons = reason_for(row, r.id)
        if not any(reason.casefold() in r.message.casefold() for reason in reasons):
            wrong[name_of(r)] = f"wanted {' or '.join(map(repr, reasons)) or 'a named reason'} in: {r.message[:300]}"
    return wrong


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
    and the tails of its stdout (the verdict) and stderr."""
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
    return proc.returncode, list(read_results(results_path)), proc.stdout[-2000:] + proc.stderr[-2000:]


def expected_exit(results: list[CheckResult]) -> int:
    """The exit status certify owes for a finished run of `results` (jetcheck.verdict: 1 when a MUST check failed,
    4 when most MUST rules of the profile did not run, else 0)."""
    return judge(results, {"finished_at": "finished"}).exit_code()


def certify(server: str, out: Path, *pytest_args: str, client: str = "nats-py") -> tuple[int, list[CheckResult]]:
    """`jetcheck certify ...` as certify_run, without its stderr."""
    code, results, _stderr = certify_run(server, out, *pytest_args, client=client)
    return code, results


def outcome(results: list[CheckResult]) -> tuple[set[str], dict[str, str]]:
    """The failing checks (names), and every check that neither passed, failed, was na nor found its documents
    disagreeing (with its message)."""
    failed = {check_name(r) for r in results if r.status == "fail"}
    odd = {
        r.check: f"{r.status}: {r.message[:300]}" for r in results if r.status not in ("pass", "fail", "na", "disagree")
    }
    return failed, odd


def check_differences(results: list[CheckResult], expected: Iterable[str]) -> str:
    """Empty when exactly the `expected` checks failed; otherwise the checks that should have failed and did not (with
    their status, or "not run"), then those that failed unexpectedly (with their message)."""
    by_name = {check_name(r): r for r in results}
    failed = {name for name, r in by_name.items() if r.status == "fail"}
    expected = set(expected)
    unbroken = {name: f"{by_name[name].status}: {by_name[name].message[:200]}" if name in by_name else "not run"
                for name in sorted(expected - failed)}  # fmt: skip
    unexpected = {name: by_name[name].message[:300] for name in sorted(failed - expected)}
    return "; ".join(
        f"{what}: {found}"
        for what, found in (("should fail and did not", unbroken), ("failed unexpectedly", unexpected))
        if found
    )


def recurring_changes(
    changed: Mapping[str, str],
    rerun: Callable[[str], list[CheckResult]],
    baseline: Mapping[str, str],
    name_of: Callable[[CheckResult], str] = check_name,
) -> dict[str, str]:
    """Of `changed` (check name -> what changed from `baseline`), the changes that come back when `rerun(keyword)`
    certifies those checks again with the same breakers or variant. A breaker acts the same every time: a change
    that does not come back was the client's or the machine's own flake, reported as a warning, not as the row's."""
    if not changed:
        return {}
    functions = sorted({name.split("::")[-1].split("[")[0] for name in changed})
    again = rerun(" or ".join(functions))
    recurring = {name_of(r) for r in again if r.status != baseline.get(name_of(r))}
    for name in sorted(set(changed) - recurring):
        warnings.warn(f"{name} changed once and not again: {changed[name]}", stacklevel=2)
    return {name: text for name, text in changed.items() if name in recurring}


def assert_client_row_broke_exactly(
    case,
    label: str,
    results: list[CheckResult],
    baseline: Mapping[str, str],
    rerun: Callable[[str], list[CheckResult]],
    name_of: Callable[[CheckResult], str],
    compared: list[CheckResult] | None = None,
) -> None:
    """A client row's run (a variant, a driver mode or breakers) against its client's reference run, `baseline`
    (check name -> status): every declared check failed, for its rule's reason, and every other check of `compared`
    (all of `results` unless given) kept its reference status; a change that `rerun` does not bring back is the
    client's flake (recurring_changes). `label` names the row in the messages."""
    failed = {name_of(r) for r in results if r.status == "fail"}
    statuses = {name_of(r): f"{r.status}: {r.message[:300]}" for r in results}
    unbroken = sorted(f"{name}: {statuses.get(name, 'not run')}" for name in declared_failures(case) - failed)
    assert not unbroken, f"{label} should fail every check of {sorted(case.breaks)}; these did not: {unbroken}"
    wrong = wrong_reasons(case, results, {name for name, status in baseline.items() if status == "fail"}, name_of)
    assert not wrong, f"{label}: checks that failed, but not for their rule's reason: {wrong}"
    changed = {
        name_of(r): f"{baseline.get(name_of(r))} -> {r.status}: {r.message[:200]}"
        for r in (results if compared is None else compared)
        if r.id not in case.breaks | case.may and r.status != baseline.get(name_of(r))
    }
    changed = recurring_changes(changed, rerun, baseline, name_of)
    assert not changed, f"{label} changed checks of rules it should not break: {changed}"


def certified_fixture(
    certify_row: Callable[[str, object, Path], object], missing: Callable[[str], str], workers: int
) -> Callable:
    """A proof module's `certified` fixture: `certify_row(server_url, row, out)` against the embedded server for
    every selected row and its client's reference row (with_references), `workers` at a time, by row id."""

    @pytest.fixture(scope="module")
    def certified(request, embedded_server, tmp_path_factory) -> Iterator[dict[str, Future]]:
        def run(case, out: Path):
            return certify_row(embedded_server.url, case, out)

        with certified_rows(with_references(request, missing), run, workers, tmp_path_factory) as futures:
            yield futures

    return certified


def markexpr(areas: tuple[str, ...]) -> str:
    return " or ".join(areas)


def module_cases(request) -> list:
    """The `case` parameters of the selected tests of the requesting fixture's module, in collection order."""
    params = (getattr(item, "callspec", None) for item in request.session.items if item.module is request.module)
    return [callspec.params["case"] for callspec in params if callspec and "case" in callspec.params]


def with_references(request, missing: Callable[[str], str]) -> list:
    """The selected client rows of the requesting module whose client can run here (`missing(client)` says why
    not, "" when it can), each after its client's reference row (the row's class with the client alone), once."""
    return list(dict.fromkeys(row for case in module_cases(request) if not missing(case.client)
                              for row in (type(case)(case.client), case)))  # fmt: skip


@contextmanager
def certified_rows(
    cases: Iterable, run: Callable, workers: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future]]:
    """`run(case, out)` for every one of `cases`, `workers` at a time: the futures, by case id. Proof runs spend
    most of their time waiting out timeouts, so a few overlap without starving each other's timing.

    Each `out` is a new folder, made here, in this thread: pytest's TempPathFactory is not thread-safe (two runs
    making a worker's first folder at once each emptied its base folder under the other, and one failed with
    "Directory not empty" in a rehearsal of the suite)."""
    with ThreadPoolExecutor(workers) as pool:
        yield {case.id: pool.submit(run, case, tmp_path_factory.mktemp("certify")) for case in cases}


def certify_broken(server_url: str, out: Path, case: Proof, *selection: str) -> tuple[int, list[CheckResult]]:
    """Certify `case.areas` (of them, what pytest's `selection`, -k ..., keeps) through `case.breakers` in front of
    `server_url`: certify's exit status and results."""
    with broken_proxy(server_url, case.breakers) as url:
        return certify(url, out, "-m", markexpr(case.areas), *selection, client=case.client)


def assert_breaks_exactly(
    server_url: str, out: Path, case: Proof, also_failing: Iterable[str] = (), client_flakes: bool = False
) -> None:
    """Certify `case.areas` through `case.breakers` in front of `server_url` and judge it (assert_broke_exactly).
    With `client_flakes`, an unexpected failure that does not come back when certified again is left out (a
    warning names it; recurring_changes)."""
    status, results = certify_broken(server_url, out, case)
    if client_flakes:
        results = without_one_off_failures(server_url, out, case, results, declared_failures(case) | set(also_failing))
    assert_broke_exactly(case, status, results, also_failing)


def without_one_off_failures(
    server_url: str, out: Path, case: Proof, results: list[CheckResult], expected: set[str]
) -> list[CheckResult]:
    """`results` without the unexpected failures (checks not in `expected`) that pass when certified again through
    the same breakers: a breaker acts the same every time, a client's flake does not (nats-py's KV watch can end its
    initial data before the entries on a loaded machine, and history() then finds no keys)."""
    unexpected = {check_name(r) for r in results if r.status == "fail"} - expected
    one_off = unexpected - recurring_failures(server_url, out, case, results, unexpected)
    return [r for r in results if check_name(r) not in one_off]


def recurring_failures(
    server_url: str, out: Path, case: Proof, results: list[CheckResult], among: set[str]
) -> set[str]:
    """Of the checks `among` that failed in `results`, those that fail again when certified once more through
    `case.breakers` (recurring_changes: the others are reported as warnings)."""
    failed = {check_name(r): r.message[:200] for r in results if r.status == "fail" and check_name(r) in among}
    if not failed:
        return set()

    def again(keyword: str) -> list[CheckResult]:
        return certify_broken(server_url, out / "again", case, "-k", keyword)[1]

    return set(recurring_changes(failed, again, dict.fromkeys(failed, "pass")))


def server_findings(case: Proof, results: list[CheckResult]) -> dict:
    """The SERVER_FINDINGS checks that failed in `results` ("failed": a breaker may also spare the server its bug,
    e.g. one that never pauses has nothing to resume), and those of them `case` does not break that failed without
    their finding's words ("unsaid", with what they said)."""
    failed = {check_name(r) for r in results if check_name(r) in SERVER_FINDINGS and r.status == "fail"}
    unsaid = {
        name: r.message[:300]
        for r in results
        if (name := check_name(r)) in failed and name not in declared_failures(case)
        and SERVER_FINDINGS[name].casefold() not in r.message.casefold()
    }  # fmt: skip
    return {"failed": failed, "unsaid": unsaid}


def assert_broke_exactly(
    case: Proof, status: int, results: list[CheckResult], also_failing: Iterable[str] = ()
) -> None:
    """Exactly the declared checks failed (every check of `case.breaks` but the spared ones, and the checks
    `also_failing` names: those the client fails with no breaker), every other check passed or was na, and
    certify's exit status says whether a MUST check failed."""
    _, odd = outcome(results)
    assert results, "no checks ran"
    assert not odd, f"checks that neither passed, failed, were na nor disagreed: {odd}"
    findings = server_findings(case, results)
    assert not findings["unsaid"], f"{case.id}: server findings that failed in other words: {findings['unsaid']}"
    also_failing = set(also_failing) | findings["failed"]
    differences = check_differences(results, declared_failures(case) | also_failing)
    assert not differences, f"{case.id}: {differences}"
    wrong = wrong_reasons(case, results, also_failing)
    assert not wrong, f"{case.id}: checks that failed, but not for their rule's reason: {wrong}"
    must_failed = any(r.status == "fail" and r.level == "MUST" for r in results)
    assert status == (1 if must_failed else 0)
