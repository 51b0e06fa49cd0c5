"""The client-side checks can fail: certify the same scenarios with nats-py and with deliberate client variants.

Each row runs the real `jetcheck certify --client <client>` against an embedded server (managed, so restarts run)
and names the exact checks that fail; every other check of those areas passes or is na.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from jetcheck.fixtures.binaries import DEFAULT_VERSION
from jetcheck.records import RESULTS_FILE, CheckResult, read_results

SERVER_VERSION = os.environ.get("JETCHECK_SERVER_VERSION", DEFAULT_VERSION)

CERTIFY_TIMEOUT_S = 180
# The certify runs spend their time waiting out short timeouts and heartbeat intervals (about 7 s of CPU in a
# 20-40 s run), so a few at once overlap well on 2 cores without starving each other's timing.
# Runs mostly wait on heartbeat timeouts; two at a time keeps timing-sensitive checks honest on 2 cores.
CONCURRENT_RUNS = 2
REPORTS_MISSED = "test_heartbeat_client.py::test_the_client_reports_missed_heartbeats_after_two_intervals"
QUIET = "test_heartbeat_client.py::test_the_client_reports_nothing_while_messages_flow"
STALL_NOT_TERMINAL = "test_heartbeat_client.py::test_consumption_resumes_after_a_stall"
STALL_RECOVERED = "test_ordered.py::test_a_stall_longer_than_two_heartbeats_loses_and_repeats_nothing"
START_BY_TIME = "test_ordered.py::test_an_ordered_consumer_keeps_its_start_and_continues_after_a_reset[by_start_time]"
RESET_CHECKS = {
    "test_ordered.py::test_a_dropped_delivery_is_redelivered_in_order",
    "test_ordered.py::test_the_recreated_consumer_has_the_ordered_settings",
    "test_ordered.py::test_the_old_consumer_is_gone_after_its_inactive_threshold",
    "test_ordered.py::test_a_deleted_consumer_is_recreated_without_loss",
    "test_ordered.py::test_a_server_restart_loses_and_repeats_nothing[graceful]",
    "test_ordered.py::test_a_server_restart_loses_and_repeats_nothing[kill-9]",
    "test_ordered.py::test_a_filtered_ordered_consumer_delivers_only_its_subject_across_a_reset",
    "test_ordered.py::test_an_ordered_consumer_keeps_its_start_and_continues_after_a_reset[by_start_sequence]",
    START_BY_TIME,
    "test_ordered.py::test_an_ordered_consumer_keeps_its_start_and_continues_after_a_reset[last_per_subject]",
}


@dataclass(frozen=True)
class ClientProof:
    """Certifying `areas` (checks matching `keyword`) with `client` fails exactly the checks in `fails`."""

    client: str
    areas: str
    fails: frozenset[str]
    keyword: str = ""

    @property
    def id(self) -> str:
        return f"{self.client}:{self.areas}" + (f":{self.keyword}" if self.keyword else "")


RESET_SLOW = {
    "test_ordered.py::test_the_old_consumer_is_gone_after_its_inactive_threshold",
    "test_ordered.py::test_a_deleted_consumer_is_recreated_without_loss",
    "test_ordered.py::test_a_server_restart_loses_and_repeats_nothing[graceful]",
    "test_ordered.py::test_a_server_restart_loses_and_repeats_nothing[kill-9]",
}
# Slowest rows first, so the concurrent runs finish close together. never-reset is split in two because each of
# its failing checks waits out its whole delivery timeout.
NEVER_RESET_SLOW = "restart or deleted or old_consumer or stall"
NEVER_RESET_FAST = f"not ({NEVER_RESET_SLOW})"
PROOFS = [
    # Missed heartbeats taken as terminal: whatever only heartbeats can recover (a stall, a deleted consumer, a
    # restart) ends consumption; resets after a gap still work. by_start_time is nats-py's own failure (below).
    ClientProof("nats-py+give-up-heartbeats", "client and (ordered or heartbeat)", frozenset({
        STALL_NOT_TERMINAL, STALL_RECOVERED, START_BY_TIME,
        "test_ordered.py::test_a_deleted_consumer_is_recreated_without_loss",
        "test_ordered.py::test_a_server_restart_loses_and_repeats_nothing[graceful]",
        "test_ordered.py::test_a_server_restart_loses_and_repeats_nothing[kill-9]",
    })),
    # The real client: its ordered consumer recovers from every fault but loses a by_start_time start on reset
    # (it keeps opt_start_time next to by_start_sequence, which the server refuses), and it stays silent when
    # heartbeats stop.
    ClientProof("nats-py", "ordered or heartbeat", frozenset({START_BY_TIME, REPORTS_MISSED})),
    # The stall check passes: a plain push consumer gets the held messages once traffic resumes.
    ClientProof("nats-py+never-reset", "ordered", frozenset(RESET_SLOW), keyword=NEVER_RESET_SLOW),
    ClientProof("nats-py+never-reset", "ordered", frozenset(RESET_CHECKS - RESET_SLOW), keyword=NEVER_RESET_FAST),
    ClientProof("nats-py+chatty-heartbeats", "heartbeat", frozenset({QUIET}), keyword="client"),
    ClientProof("nats-py+adr37-heartbeats", "heartbeat", frozenset(), keyword="client"),
]  # fmt: skip


def certify(client: str, out: Path, *pytest_args: str) -> tuple[int, list[CheckResult]]:
    command = [sys.executable, "-m", "jetcheck.cli", "certify", "--server", "local", "--server-version",
               SERVER_VERSION, "--client", client, "--out", str(out), "--", *pytest_args]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=CERTIFY_TIMEOUT_S)
    results_path = out / RESULTS_FILE
    if not results_path.exists():
        raise AssertionError(f"certify wrote no results (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, list(read_results(results_path))


def check_name(result: CheckResult) -> str:
    return result.check.rsplit("/", 1)[-1]


@pytest.fixture(scope="module")
def certified(request, tmp_path_factory) -> dict[str, Future]:
    """Every selected row's certify run, started together (at most CONCURRENT_RUNS at a time), by row id."""
    cases = [item.callspec.params["case"] for item in request.session.items
             if item.module is request.module and hasattr(item, "callspec")]  # fmt: skip
    with ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
        runs = {}
        for case in dict.fromkeys(cases):
            args = ["-m", case.areas] + (["-k", case.keyword] if case.keyword else [])
            runs[case.id] = pool.submit(certify, case.client, tmp_path_factory.mktemp("certify"), *args)
        yield runs


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_a_client_deviation_fails_exactly_its_checks(certified, case):
    """Certify with the client fails the listed checks and passes (or na) every other check of the areas."""
    status, results = certified[case.id].result()
    failed = {check_name(r) for r in results if r.status == "fail"}
    odd = {r.check: f"{r.status}: {r.message[:300]}" for r in results if r.status not in ("pass", "fail", "na")}
    assert results, "no checks ran"
    assert {r.client["name"] for r in results} == {case.client}
    assert not odd, f"checks that neither passed, failed nor were na: {odd}"
    assert failed == case.fails, f"expected to fail: {sorted(case.fails)}; failed: {sorted(failed)}"
    must_failed = any(r.status == "fail" and r.level == "MUST" for r in results)
    assert status == (1 if must_failed else 0)
