"""Every check certify collects, every parameter instance, has been shown to fail: some proof row fails it on
purpose. conftest refuses a session that collects proofs while one has not (proof_gate); these tests pin the gate."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from jetcheck.conformance.catalog import certify_rules
from jetcheck.records import CheckResult

from . import conftest
from .proof_gate import (
    adapter_rules,
    excused_client_rules,
    proof_rows,
    stale_spares,
    unproven_checks,
    unproven_client_checks,
    unreasoned,
)
from .proofs import certify_checks, proof, wrong_reasons
from .test_proofs_client import REFERENCE
from .test_release_pairs import PAIRS

HERE = Path(__file__).parent
# Two parameter instances of one rule's check, and a check of another rule.
CHECKS = {
    "test_area.py::test_rule_x[one]": "area.x",
    "test_area.py::test_rule_x[two]": "area.x",
    "test_area.py::test_rule_y": "area.y",
}


def test_certify_checks_are_every_parameter_instance_with_its_rule():
    """The gate's checks are certify's: each parameter instance on its own, each with a catalog rule, every rule
    a certify check tests (rules another command judges, checked_by, have none)."""
    checks = certify_checks()
    assert len(checks) > len(set(checks.values())), "parameter instances are separate checks"
    assert set(checks.values()) == set(certify_rules())


def test_every_check_certify_collects_is_failed_by_some_proof_row():
    """No check, no parameter instance, is left without a proof row or a real release with a bug that fails it."""
    rows, checks = proof_rows(), certify_checks()
    by_releases = {pair.check for pair in PAIRS}
    assert not unproven_checks(rows, checks, by_releases), "checks no proof row or release pair fails"
    assert by_releases <= set(checks), "release pairs of checks certify does not collect"
    assert not stale_spares(rows, checks)


def test_every_adapter_check_is_failed_for_every_client():
    """Each client's proof rows fail every check of every client rule that goes through the client adapter."""
    missing = unproven_client_checks(
        proof_rows(), certify_checks(), list(REFERENCE), adapter_rules(), excused_client_rules()
    )
    assert not missing


def test_a_parameter_instance_a_row_spares_is_unproven():
    """A row breaking a rule proves each of its checks but those it spares: the spared instance has no proof."""
    rows = [proof("b", "area", {"area.x", "area.y"}, spared={"test_area.py::test_rule_x[two]": "b fixes it up"})]
    assert unproven_checks(rows, CHECKS) == ["test_area.py::test_rule_x[two]"]
    assert unproven_checks([*rows, proof("c", "area", {"area.x"})], CHECKS) == []


def test_a_spare_that_names_no_check_of_the_broken_rules_is_reported():
    """A spared name that is not a check of the row's rules (a typo, a renamed parameter) is reported."""
    rows = [proof("b", "area", {"area.x"}, spared={"test_area.py::test_rule_y": "not area.x's"})]
    assert stale_spares(rows, CHECKS) == ["b: test_area.py::test_rule_y"]


def test_a_client_row_proves_only_its_own_clients_checks():
    """A row for one client proves nothing for another; an excused rule's checks are left out."""
    rows = [proof("b", "area", {"area.x", "area.y"}, client="nats.js")]
    everything = {"area.x", "area.y"}
    assert unproven_client_checks(rows, CHECKS, ["nats.js", "nats.go"], everything, {}) == {"nats.go": sorted(CHECKS)}
    excused = {"nats.go": {"area.x": "na for nats.go"}}
    assert unproven_client_checks(rows, CHECKS, ["nats.go"], everything, excused) == {
        "nats.go": ["test_area.py::test_rule_y"]
    }


def test_every_proof_row_names_the_reason_each_rule_it_breaks_fails_for():
    """Each rule a row breaks has the fragment its checks' failure messages carry: the row's own or the rule's."""
    assert unreasoned(proof_rows()) == []


def test_a_row_without_a_reason_for_a_rule_is_reported():
    """A rule no row reason and no usual reason covers is a gap; the row's own reason closes it."""
    assert unreasoned([proof("b", "area", {"area.x"})]) == ["b: area.x"]
    assert unreasoned([proof("b", "area", {"area.x"}, reasons={"area.x": "x was not kept"})]) == []


def failed(rule: str, message: str, check: str = "checks/test_area.py::test_rule_x[one]") -> CheckResult:
    return CheckResult(rule, "fail", "area", "", "MUST", "", "", "", {}, 0.0, message=message, check=check)


def test_a_check_failing_without_its_rules_reason_proves_nothing():
    """A failure whose message lacks the row's reason (an exception, another assertion) is named; the reason's
    words, in any case, pass; a check the client fails on its own is not judged."""
    row = proof("b", "area", {"area.x"}, reasons={"area.x": "X Was Not Kept"})
    crash = failed("area.x", "TypeError: within() missing 1 required positional argument: 'what'")
    wanted = f"wanted {'X Was Not Kept'!r} in: {crash.message}"
    assert wrong_reasons(row, [crash]) == {"test_area.py::test_rule_x[one]": wanted}
    assert wrong_reasons(row, [failed("area.x", "ADR-1: x was not kept after a purge")]) == {}
    assert wrong_reasons(row, [crash], own={"test_area.py::test_rule_x[one]"}) == {}
    assert wrong_reasons(row, [failed("area.y", "anything")]) == {}  # not a rule the row breaks


def test_collecting_proofs_with_a_gap_is_a_usage_error(monkeypatch):
    """A session that collects a proof row while the gate finds a gap stops at collection, naming the gap; one
    that collects no proof row does not look."""
    monkeypatch.setattr(conftest, "gaps", lambda: ["no proof row fails test_area.py::test_rule_x[two]"])
    with pytest.raises(pytest.UsageError, match=r"no proof row fails test_area.py::test_rule_x\[two\]"):
        conftest.pytest_collection_finish(SimpleNamespace(items=[SimpleNamespace(path=HERE / "test_proofs_push.py")]))
    conftest.pytest_collection_finish(SimpleNamespace(items=[SimpleNamespace(path=HERE / "test_catalog.py")]))
