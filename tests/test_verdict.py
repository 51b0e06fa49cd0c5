"""The one verdict: how results become outcomes, and every consumer (certify, report, run, matrix) agreeing on it."""

from __future__ import annotations

import itertools

import pytest

from jetcheck.records import STATUSES, CheckResult
from jetcheck.verdict import (
    EXIT_CONFORMS,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_MUST_FAILED,
    STATUS_ORDER,
    judge,
    overall_exit_code,
    overall_outcome,
    rule_statuses,
    worst_status,
)

FINISHED = {"started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z"}


def result(rule: str, status: str, level: str = "MUST", subject: str = "server", check: str = "") -> CheckResult:
    return CheckResult(
        id=rule,
        status=status,
        area=rule.split(".")[0],
        title="t.",
        level=level,
        source="s",
        min_version="2.2.0",
        server_version="2.15.1",
        client={"name": "nats-py", "version": "2.16.0"},
        duration_s=0.01,
        check=check or f"{rule}::{status}",
        subject=subject,
    )


class TestStatusOrder:
    def test_the_order_covers_every_status_once(self):
        assert sorted(STATUS_ORDER) == sorted(STATUSES)

    @pytest.mark.parametrize(("a", "b"), list(itertools.combinations(STATUS_ORDER, 2)))
    def test_the_worst_of_two_is_the_earlier_in_the_order(self, a, b):
        assert worst_status([a, b]) == worst_status([b, a]) == a

    def test_no_statuses_has_no_worst(self):
        with pytest.raises(ValueError, match="no statuses"):
            worst_status([])

    def test_a_rule_takes_its_worst_check(self):
        results = [result("r.a", "pass"), result("r.a", "skip"), result("r.b", "na"), result("r.b", "pass")]
        assert rule_statuses(results) == {"r.a": "skip", "r.b": "na"}


class TestSubjects:
    def test_server_conforms_and_client_fails_are_said_apart(self):
        """The server's rules all pass, the client's MUST rules fail: two sentences, the server's first."""
        results = [result(f"s.r{n}", "pass") for n in range(3)]
        results += [result("c.r1", "fail", subject="client"), result("c.r2", "fail", subject="client")]
        results += [result("c.r3", "pass", subject="client")]
        verdict = judge(results, {**FINISHED, "collected": 6})
        assert verdict.lines() == [
            "server 2.15.1: conforms, 3/3 server rules pass",
            "client nats-py 2.16.0: 2 MUST client rules fail, 1/3 client rules pass",
        ]
        server, client = verdict.subjects
        assert (server.conforms, client.conforms) == (True, False)
        assert verdict.must_failures == 2 and not verdict.ok
        assert verdict.exit_code() == EXIT_MUST_FAILED

    def test_must_skip_is_shown_but_not_a_failure(self):
        verdict = judge([result("s.a", "pass"), result("s.b", "skip")], FINISHED)
        assert verdict.ok
        assert verdict.lines() == ["server 2.15.1: conforms, 1/2 server rules pass (1 skipped)"]

    def test_must_error_is_a_failure_that_says_it_could_not_finish(self):
        verdict = judge([result("s.a", "error"), result("s.b", "na")], FINISHED)
        assert not verdict.ok
        assert verdict.lines() == [
            "server 2.15.1: 1 MUST server rule fails (1 of them could not finish: error), 0/2 server rules pass (1 na)"
        ]

    def test_should_failures_are_shown_and_do_not_fail(self):
        verdict = judge([result("s.a", "pass"), result("s.b", "fail", level="SHOULD")], FINISHED)
        assert verdict.ok
        assert verdict.lines() == ["server 2.15.1: conforms, 1/2 server rules pass; 1 SHOULD rule fails"]

    def test_a_rule_with_several_failing_checks_counts_once(self):
        verdict = judge([result("s.a", "fail", check="x"), result("s.a", "fail", check="y")], FINISHED)
        assert verdict.must_failures == 1
        assert len(verdict.subjects[0].must_failing) == 2


class TestCompleteness:
    RESULTS = (result("s.a", "pass"), result("s.b", "pass"))

    @pytest.mark.parametrize(
        ("run_info", "reason"),
        [
            (None, "2 result(s) and no run.json"),
            ({"started_at": "x", "collected": 2}, "the run did not finish (run.json has no finished_at)"),
            ({**FINISHED, "collected": 5}, "2 of 5 checks ran"),
            ({**FINISHED, "interrupted": True}, "the run was interrupted"),
            ({**FINISHED, "stopped_reason": "the target stopped answering"}, "the run stopped: the target stopped"),
        ],
        ids=["no-run-json", "no-finished-at", "fewer-than-collected", "interrupted", "stopped"],
    )
    def test_an_unfinished_run_never_passes(self, run_info, reason):
        verdict = judge(list(self.RESULTS), run_info)
        assert not verdict.complete and not verdict.ok
        assert reason in verdict.incomplete_reason
        assert verdict.lines()[0].startswith("INCOMPLETE: ")
        assert verdict.outcome == "incomplete"
        assert "conforms" not in " ".join(verdict.lines())
        assert verdict.exit_code() == (EXIT_INTERRUPTED if "interrupted" in reason else EXIT_INCOMPLETE)
        assert verdict.exit_code(strict=False) == verdict.exit_code()

    def test_expected_overrides_collected(self):
        assert not judge(list(self.RESULTS), {**FINISHED, "collected": 2}, expected=3).complete
        assert judge(list(self.RESULTS), {**FINISHED, "collected": 2}).complete

    def test_no_results_is_no_verdict(self):
        verdict = judge([], {**FINISHED, "collected": 0})
        assert verdict.complete and not verdict.ok
        assert verdict.lines() == ["no checks ran"]


class TestSeveralResultSets:
    def test_each_result_set_is_judged_and_the_worst_decides(self):
        good = judge([result("s.a", "pass")], FINISHED, label="2.15.1")
        bad = judge([result("s.a", "fail")], FINISHED, label="2.12.8")
        partial = judge([result("s.a", "pass")], {"started_at": "x"}, label="2.9.10")
        assert good.lines() == ["2.15.1: server 2.15.1: conforms, 1/1 server rules pass"]
        assert overall_outcome([good, bad]) == "fail"
        assert overall_outcome([good, bad, partial]) == "incomplete"
        assert overall_outcome([good]) == "pass"
        assert overall_exit_code([good, bad]) == EXIT_MUST_FAILED
        assert overall_exit_code([good, bad, partial]) == EXIT_INCOMPLETE
        assert overall_exit_code([good, bad], strict=False) == EXIT_CONFORMS
