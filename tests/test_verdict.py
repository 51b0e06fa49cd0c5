"""The one verdict: how results become outcomes, and every consumer (certify, report, run, matrix) agreeing on it."""

from __future__ import annotations

import html
import io
import itertools
import json

import pytest

from jetcheck.records import STATUSES, CheckResult
from jetcheck.reports import charts, warm
from jetcheck.verdict import (
    EXIT_CONFORMS,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_MUST_FAILED,
    EXIT_NOT_CERTIFIED,
    OUT_OF_PROFILE,
    STATUS_ORDER,
    judge,
    overall_exit_code,
    overall_outcome,
    rule_statuses,
    worst_status,
)

FINISHED = {"started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z"}


def result(
    rule: str, status: str, level: str = "MUST", subject: str = "server", check: str = "", message: str = ""
) -> CheckResult:
    return CheckResult(
        message=message,
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
        assert verdict.lines() == ["server 2.15.1: conforms in the 1 rule that ran, 1/2 server rules pass (1 not run)"]

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


class TestProfiles:
    NEWER = f"{OUT_OF_PROFILE} 2.9.0: s.new is a rule of nats-server 2.10.0 and later"

    def test_the_verdict_first_names_the_profile_the_run_held_the_target_to(self):
        """run.json's profile is the verdict's first line, before any subject's sentence."""
        profile = {"name": "latest", "why": "every rule: the server reports '0.0.0', which is no release"}
        verdict = judge([result("s.a", "pass")], {**FINISHED, "profile": profile})
        assert verdict.lines() == [
            "held to profile latest (every rule: the server reports '0.0.0', which is no release)",
            "server 2.15.1: conforms, 1/1 server rules pass",
        ]

    def test_rules_newer_than_the_profile_are_counted_apart_and_leave_the_verdict_whole(self):
        """Rules not in the profile are not rules the run failed to run: the subject conforms, and says how many."""
        results = [result("s.a", "pass"), *(result(f"s.new{n}", "na", message=self.NEWER) for n in range(5))]
        verdict = judge(results, FINISHED)
        assert verdict.lines() == ["server 2.15.1: conforms, 1/6 server rules pass (5 not in profile)"]
        assert verdict.exit_code() == EXIT_CONFORMS

    def test_a_run_of_only_rules_newer_than_the_profile_certifies_nothing_and_says_so(self):
        """Only rules of a newer release were selected: not certified, in words that say none was in the profile."""
        verdict = judge([result(f"s.new{n}", "na", message=self.NEWER) for n in range(3)], FINISHED)
        assert verdict.lines() == [
            "server 2.15.1: not certified: none of the MUST rules checked is in the profile, 0/3 server rules pass "
            "(3 not in profile)"
        ]
        assert verdict.exit_code() == EXIT_NOT_CERTIFIED

    @pytest.mark.parametrize("missing", ["skip", "na"])
    def test_a_subject_most_of_whose_must_rules_did_not_run_is_not_certified(self, missing):
        """Two of three MUST rules of the profile not run (skipped, or na for what the target cannot do): no
        "conforms", and certify exits 4; SHOULD rules do not count."""
        results = [result("s.a", "pass"), result("s.b", missing), result("s.c", missing)]
        results += [result("s.d", "pass", level="SHOULD"), result("s.e", "pass", level="SHOULD")]
        verdict = judge(results, FINISHED)
        (server,) = verdict.subjects
        assert (server.must_in_profile, server.must_not_run, server.certified) == (3, 2, False)
        assert verdict.lines()[0].startswith(
            "server 2.15.1: not certified: 2 of its 3 MUST rules in the profile did not run, 3/5 server rules pass"
        )
        assert (verdict.ok, verdict.exit_code(), verdict.exit_code(strict=False)) == (False, EXIT_NOT_CERTIFIED, 0)
        failing = judge([*results, result("s.f", "fail")], FINISHED)
        assert failing.exit_code() == EXIT_MUST_FAILED  # a failure says more than too little ran
        assert overall_exit_code([verdict, failing]) == EXIT_MUST_FAILED

    def test_a_subject_with_only_rules_outside_its_profile_is_not_certified(self):
        """Nothing of the profile ran: there is nothing to certify."""
        verdict = judge([result("s.new", "na", message=self.NEWER)], FINISHED)
        assert not verdict.subjects[0].certified and verdict.exit_code() == EXIT_NOT_CERTIFIED


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


# --- every consumer agrees -------------------------------------------------------------------------------------
#
# Each consumer is called through its own entry: certify through `jetcheck certify` (its pytest run replaced: the
# result set is already there), `jetcheck run` through main_job (its certify step copies the result set; its report
# step is `jetcheck report --in RUN`), the matrix through `jetcheck matrix`'s rule_status and the report's matrix.

COLLECTED = 3
COMPLETENESS = {
    "complete": {**FINISHED, "collected": COLLECTED},
    "interrupted": {**FINISHED, "collected": COLLECTED, "interrupted": True},
    "stopped": {**FINISHED, "collected": COLLECTED, "stopped_reason": "the target stopped answering"},
    "fewer-than-collected": {**FINISHED, "collected": COLLECTED + 37},
    "unfinished": {"started_at": FINISHED["started_at"], "collected": COLLECTED},
    "no-run-json": None,
}
HEADLINES = {"incomplete": "**INCOMPLETE**", "fail": "**FAILED**", "pass": "**OK**"}


def write_result_set(folder, results: list[CheckResult], run_info: dict | None):
    from jetcheck.records import RESULTS_FILE, RUN_FILE, write_results

    folder.mkdir(parents=True, exist_ok=True)
    write_results(folder / RESULTS_FILE, results)
    if run_info is not None:
        (folder / RUN_FILE).write_text(json.dumps(run_info))
    return folder


def certify_exit(folder, monkeypatch, capsys) -> tuple[int, str]:
    """`jetcheck certify --out FOLDER` whose pytest run leaves FOLDER's result set as it is."""
    from jetcheck import cli
    from jetcheck.conformance import certify

    monkeypatch.setattr(certify, "preflight", lambda cfg: None)
    monkeypatch.setattr(certify, "run_checks", lambda cfg, pytest_args: 0)
    capsys.readouterr()
    code = cli.main(["certify", "--out", str(folder)])
    return code, capsys.readouterr().out


def report_texts(folder, out) -> tuple[str, str]:
    """summary.md and index.html of `jetcheck report --in FOLDER`."""
    from jetcheck.reports.build import build_report

    index = build_report([str(folder)], out=out).index
    return (out / "summary.md").read_text(), index.read_text()


def run_job(folder, run_dir, strict: bool) -> tuple[int, str]:
    """`jetcheck run` whose certify step produces FOLDER's result set; no load step (no Spark)."""
    from jetcheck.records import RESULTS_FILE
    from jetcheck.run import Step, main_job

    step = Step("certify", ["cp", "-r", str(folder), str(run_dir / "certify")], run_dir / "certify" / RESULTS_FILE, 60)
    progress = io.StringIO()
    code = main_job(run_dir, [step], stream=progress, strict=strict)
    return code, progress.getvalue()


def matrix_cells(results: list[CheckResult], tmp_path) -> tuple[dict[str, str], dict[str, str]]:
    """The status per rule as `jetcheck matrix` and the report's compatibility matrix show it."""
    from jetcheck.conformance.matrix import rule_status
    from jetcheck.reports.conformance_report import aggregate_conformance
    from jetcheck.reports.inputs import resolve

    folder = write_result_set(tmp_path / "matrix-set", results, COMPLETENESS["complete"])
    matrix = aggregate_conformance([resolve(folder)]).matrix.set_index("id")
    column = next(c for c in matrix.columns if c.startswith("server "))
    return rule_status(results), matrix[column].to_dict()


def combination(status: str, level: str, subject: str) -> list[CheckResult]:
    """One passing server rule, one passing client rule, and the rule under test."""
    return [
        result("stream.ok", "pass"),
        result("ordered.ok", "pass", subject="client"),
        result("kv.under-test", status, level=level, subject=subject),
    ]


@pytest.mark.parametrize("completeness", list(COMPLETENESS))
@pytest.mark.parametrize("subject", ["server", "client"])
@pytest.mark.parametrize("level", ["MUST", "SHOULD"])
@pytest.mark.parametrize("status", STATUS_ORDER)
def test_every_consumer_gives_the_same_verdict(status, level, subject, completeness, tmp_path, monkeypatch, capsys):
    """The documented rule, asserted through certify's exit code, summary.md, the HTML banner, `run` with and
    without --strict, and the matrix cells: MUST fail/error fails its subject alone; skip, na and SHOULD failures
    do not; an incomplete result set is never a pass, and says so first."""
    results = combination(status, level, subject)
    run_info = COMPLETENESS[completeness]
    folder = write_result_set(tmp_path / "certify", results, run_info)
    failing = level == "MUST" and status in ("fail", "error")
    complete = completeness == "complete"
    outcome = "incomplete" if not complete else "fail" if failing else "pass"
    expected_exit = {"complete": 1 if failing else 0, "interrupted": 130}.get(completeness, 2)

    # the conformance chart (matplotlib, most of a report's time) says nothing about the verdict
    monkeypatch.setattr(charts, "conformance_bars", lambda summary: "data:image/png;base64,")
    # nor does Spark: these runs log no load, yet with no session active `run` would start and warm up a JVM for
    # each (8 s a test when this module runs on its own, where the full suite has the report tests' session)
    monkeypatch.setattr(warm, "warms", lambda master: False)

    code, printed = certify_exit(folder, monkeypatch, capsys)
    assert code == expected_exit
    lenient_code, _ = run_job(folder, tmp_path / "run", strict=False)
    assert lenient_code == (0 if complete else 3)
    strict_code, progress = run_job(folder, tmp_path / "strict-run", strict=True)
    assert strict_code == (3 if not complete else 1 if failing else 0)
    summary = (tmp_path / "strict-run" / "report" / "summary.md").read_text()
    index = (tmp_path / "strict-run" / "report" / "index.html").read_text()
    assert summary.splitlines()[2].startswith(HEADLINES[outcome])
    verdict = judge(results, run_info)
    for line in verdict.lines():
        assert line in printed and line in summary and html.escape(line) in index
        assert f"verdict: {line}" in progress
    server, client = (s.sentence() for s in verdict.subjects)
    assert server.startswith("server 2.15.1: ") and client.startswith("client nats-py 2.16.0: ")
    judged, other = (server, client) if subject == "server" else (client, server)
    if not complete:
        assert verdict.lines()[0].startswith("INCOMPLETE: ") and "conforms" not in summary
    elif failing:
        assert f": 1 MUST {subject} rule fails" in judged and ": conforms, " in other
    elif status == "skip" or (status, level) == ("na", "MUST"):  # a MUST rule the target could not be checked on
        assert ": conforms in the 1 rule that ran, 1/2 " in judged and ": conforms, " in other
    else:
        assert ": conforms, " in judged and ": conforms, " in other

    by_matrix, by_report = matrix_cells(results, tmp_path)
    assert by_matrix["kv.under-test"] == by_report["kv.under-test"] == status


# --- the defects of issue 12 (5, 6) and issue 16, each through the consumers ------------------------------------


def test_a_report_of_an_interrupted_certify_says_incomplete(tmp_path):
    """40 of 219 checks and no finished_at: summary.md and the HTML say INCOMPLETE, never "no MUST failures"."""
    results = [result(f"stream.r{n}", "pass") for n in range(40)]
    folder = write_result_set(tmp_path / "certify", results, {"started_at": FINISHED["started_at"], "collected": 219})
    summary, index = report_texts(folder, tmp_path / "report")
    assert "**INCOMPLETE**" in summary and "40 of 219 checks ran" in summary
    assert "INCOMPLETE: 40 of 219 checks ran" in index
    assert "no MUST failures" not in summary + index


def test_the_banner_states_the_server_and_the_client_apart(tmp_path):
    """All server rules pass, two MUST client rules fail: the server conforms, the client fails, in words."""
    results = [result(f"stream.r{n}", "pass") for n in range(5)]
    results += [result(f"ordered.r{n}", "fail" if n < 2 else "pass", subject="client") for n in range(4)]
    folder = write_result_set(tmp_path / "certify", results, {**FINISHED, "collected": len(results)})
    summary, index = report_texts(folder, tmp_path / "report")
    for text in (summary, index):
        assert "server 2.15.1: conforms, 5/5 server rules pass" in text
        assert "client nats-py 2.16.0: 2 MUST client rules fail, 2/4 client rules pass" in text


def test_certify_and_the_report_agree_on_a_must_skip(tmp_path, monkeypatch, capsys):
    """A skipped MUST check was not run: shown, not a failure, for certify as for the report."""
    results = [result("stream.a", "pass"), result("stream.b", "skip")]
    folder = write_result_set(tmp_path / "certify", results, {**FINISHED, "collected": 2})
    code, printed = certify_exit(folder, monkeypatch, capsys)
    summary, _index = report_texts(folder, tmp_path / "report")
    assert code == 0
    assert summary.splitlines()[2].startswith("**OK**")
    assert "server 2.15.1: conforms in the 1 rule that ran, 1/2 server rules pass (1 not run)" in printed + summary


def test_documents_that_disagree_fail_no_rule_and_are_shown_with_both(tmp_path, monkeypatch, capsys):
    """A MUST check whose documents disagree is no failure: certify exits 0 and lists it with both documents' words;
    the verdict counts it apart, and the report lists it under "Where the documents disagree", not the failures."""
    words = "the target follows 412/10185 x (the errors table), not 412/10185 y (ADR-44): it answered 412/10185 x"
    results = [result("stream.a", "pass"), result("apilevel.words", "disagree", message=words)]
    folder = write_result_set(tmp_path / "certify", results, {**FINISHED, "collected": 2})
    monkeypatch.setattr(charts, "conformance_bars", lambda summary: "data:image/png;base64,")
    code, printed = certify_exit(folder, monkeypatch, capsys)
    summary, index = report_texts(folder, tmp_path / "report")
    assert code == EXIT_CONFORMS
    sentence = "server 2.15.1: conforms, 1/2 server rules pass (1 rule whose documents disagree)"
    assert sentence in printed and sentence in summary and sentence in index
    assert f"DISAGREE MUST   server apilevel.words: {words}" in printed
    listed = summary.split("### Where the documents disagree")[1]
    assert words in listed and "_no check failed_" in summary
    assert "Where the documents disagree (1)" in index and html.escape(words) in index


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(STATUS_ORDER, 2)))
def test_the_matrix_and_the_report_show_the_same_cell(a, b, tmp_path):
    """A rule with two checks of different statuses gets the same cell in `jetcheck matrix` and the report."""
    results = [result("kv.r", a, check="one"), result("kv.r", b, check="two")]
    by_matrix, by_report = matrix_cells(results, tmp_path)
    assert by_matrix["kv.r"] == by_report["kv.r"] == a


def test_a_report_of_several_result_sets_judges_each(tmp_path, capsys):
    """`jetcheck report` over two result sets: each set's verdict, named, on the console and in summary.md; one
    unfinished set makes the whole report INCOMPLETE."""
    from jetcheck import cli

    done = write_result_set(tmp_path / "2.15.1", [result("stream.a", "pass")], {**FINISHED, "collected": 1})
    cut = write_result_set(tmp_path / "2.12.8", [result("stream.a", "fail")], {"started_at": "x", "collected": 9})
    out = tmp_path / "report"
    assert cli.main(["report", "--in", str(done), "--in", str(cut), "--out", str(out)]) == 0
    console = capsys.readouterr().err
    summary = (out / "summary.md").read_text()
    expected = [
        "2.15.1: server 2.15.1: conforms, 1/1 server rules pass",
        "2.12.8: INCOMPLETE: 1 of 9 checks ran; the run did not finish (run.json has no finished_at); "
        "this is not a verdict",
        "2.12.8: server 2.15.1: 1 MUST server rule fails, 0/1 server rules that ran pass",
    ]
    assert summary.splitlines()[2] == "**INCOMPLETE**"
    for line in expected:
        assert f"verdict: {line}" in console and f"- {line}" in summary
