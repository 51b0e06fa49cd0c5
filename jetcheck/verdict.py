"""The one place that turns conformance results into outcomes: per rule, per subject, per run.

Every consumer asks this module: `jetcheck certify`'s exit code, the report's banner and summary.md, `jetcheck run`
(with and without --strict) and the matrix cells of `jetcheck matrix` and the report.

Statuses, worst first (``STATUS_ORDER``): ``fail``, ``error``, ``skip``, ``disagree``, ``na``, ``pass``. A rule with
several checks takes the worst status of its checks, and so does a matrix cell with several results.

What a status means for the verdict:

- ``fail`` and ``error`` of a MUST rule: the subject does not conform (an error is an outcome that could not be
  established, which a certificate cannot pass over). Of a SHOULD rule: shown, never failing.
- ``skip``: the check did not run (skipped for a reason other than the target's abilities). It does not count as a
  failure, but every sentence shows how many rules were not run.
- ``disagree``: two documents say different things about the rule (an ADR and the errors table, say), and the target
  does what one of them says; the result names both. Not a failure, of a MUST rule or a SHOULD: a target cannot be
  held to both. Shown, and counted apart; the rule ran.
- ``na``: the rule is not in the run's profile (a rule of a newer nats-server release than the one certified, its
  message beginning "not in profile"), or the target cannot support it (needs a cluster, a managed server); fine,
  and shown, each kind apart.
- ``pass``: fine.

A run holds the target to a profile (conformance.profiles: the rules of one nats-server release, or every rule),
which run.json names and the verdict's first line repeats. A subject "conforms" only in what ran: when more than
half of its MUST rules in the profile did not run (skipped, or na because the target cannot support them), it is
"not certified", whatever the rest says (certify exits 4).

A run is judged per subject: the server (rules it decides alone) and each client under test (rules the client
takes part in), so "the server conforms, the client fails" is said in those words.

A result set is complete only when its run.json says the run finished (``finished_at``), was neither interrupted
nor stopped (``interrupted``, ``stopped_reason``), and results.jsonl holds as many results as checks were collected
(``collected``). An incomplete result set never yields a passing verdict, whatever its results say.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jetcheck.records import CheckResult

STATUS_ORDER = ("fail", "error", "skip", "disagree", "na", "pass")  # worst first
FAILING = ("fail", "error")

# certify's exit codes; `jetcheck run` maps an incomplete run to its own "step did not complete" code
EXIT_CONFORMS = 0
EXIT_MUST_FAILED = 1
EXIT_INCOMPLETE = 2  # the outcome is unknown: the run did not finish
EXIT_NOT_CERTIFIED = 4  # complete, no MUST rule failed, but most MUST rules of the profile did not run
OUT_OF_PROFILE = "not in profile"  # how the message of an `na` for a rule newer than the profile begins
EXIT_INTERRUPTED = 130

OUTCOMES = ("incomplete", "fail", "pass")  # of a run, worst first
HEADLINES = {"incomplete": "INCOMPLETE", "fail": "FAILED", "pass": "OK"}  # an outcome in one word


def worst_status(statuses: Iterable[str]) -> str:
    """The worst of `statuses` in STATUS_ORDER; a rule or a matrix cell with several results shows this one."""
    ranks = [STATUS_ORDER.index(status) for status in statuses]
    if not ranks:
        raise ValueError("worst_status of no statuses")
    return STATUS_ORDER[min(ranks)]


def rule_statuses(results: Iterable[CheckResult]) -> dict[str, str]:
    """One status per rule id: the worst of its checks."""
    by_rule: dict[str, list[str]] = {}
    for result in results:
        by_rule.setdefault(result.id, []).append(result.status)
    return {rule: worst_status(statuses) for rule, statuses in by_rule.items()}


def outside_profile(result: CheckResult) -> bool:
    """Whether a check is `na` because its rule is newer than the run's profile (a rule the run did not owe)."""
    return result.status == "na" and result.message.startswith(OUT_OF_PROFILE)


def did_not_run(result: CheckResult) -> bool:
    """Whether a check of its profile did not run: skipped, or `na` for what the target cannot do."""
    return result.status in ("skip", "na") and not outside_profile(result)


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number} {singular if number == 1 else plural}"


@dataclass(frozen=True)
class SubjectVerdict:
    """The outcome for one subject of a run: the server, or one client under test."""

    subject: str  # "server" | "client"
    name: str  # "server 2.15.1", "client nats-py 2.16.0"
    rules: int  # distinct rules judged
    checks: int
    passed: int  # rules whose checks all passed
    not_applicable: int  # rules whose worst status is na
    not_run: int  # rules whose worst status is skip
    must_failing: tuple[CheckResult, ...]  # MUST checks that failed or errored
    should_failing: tuple[CheckResult, ...]  # SHOULD checks that failed or errored
    complete: bool = True  # whether the run they come from finished
    out_of_profile: int = 0  # of the na rules, those newer than the profile
    must_in_profile: int = 0  # MUST rules in the profile
    # checks of those rules that did not run (skip, or na for what the target cannot do)
    must_not_run_checks: tuple[CheckResult, ...] = ()
    disagreeing: int = 0  # rules whose worst status is disagree: their documents disagree, the target follows one

    @property
    def cannot_support(self) -> int:
        """Rules whose worst status is na for what the target cannot do (not for the profile)."""
        return self.not_applicable - self.out_of_profile

    @property
    def must_not_run(self) -> int:
        """MUST rules of the profile that did not run."""
        return len({result.id for result in self.must_not_run_checks})

    @property
    def certified(self) -> bool:
        """Whether enough of the profile's MUST rules ran for a verdict on the subject (see the module)."""
        return self.must_in_profile > 0 and self.must_not_run * 2 <= self.must_in_profile

    @property
    def must_failing_rules(self) -> int:
        return len({result.id for result in self.must_failing})

    @property
    def should_failing_rules(self) -> int:
        return len({result.id for result in self.should_failing})

    @property
    def conforms(self) -> bool:
        return self.complete and not self.must_failing and self.certified

    def sentence(self) -> str:
        """What a manager reads, e.g. "server 2.15.1: conforms, 165/165 server rules pass"."""
        ran = "" if self.complete else " that ran"
        rules = f"{self.passed}/{self.rules} {self.subject} rules{ran} pass"
        extras = []
        if self.out_of_profile:
            extras.append(f"{self.out_of_profile} not in profile")
        if self.cannot_support:
            extras.append(f"{self.cannot_support} na")
        if self.not_run:
            extras.append(f"{self.not_run} not run")
        if self.disagreeing:
            extras.append(_count(self.disagreeing, "rule", "rules") + " whose documents disagree")
        if extras:
            rules += f" ({', '.join(extras)})"
        if self.must_failing:
            failing = self.must_failing_rules
            errors = len({r.id for r in self.must_failing if r.status == "error"})
            head = f"{failing} MUST {self.subject} {'rule fails' if failing == 1 else 'rules fail'}"
            if errors:
                head += f" ({errors} of them could not finish: error)"
            head += f", {rules}"
        elif self.complete and not self.must_in_profile:
            head = f"not certified: none of the MUST rules checked is in the profile, {rules}"
        elif self.complete and not self.certified:
            head = (
                f"not certified: {self.must_not_run} of its {self.must_in_profile} MUST rules in the profile did "
                f"not run, {rules}"
            )
        elif self.complete and (self.not_run or self.must_not_run):
            # a subject of which only some rules of its profile were checked conforms in those, not as a whole
            ran = self.rules - self.out_of_profile - self.not_run - self.cannot_support  # a disagree ran
            head = f"conforms in the {ran} {'rule' if ran == 1 else 'rules'} that ran, {rules}"
        elif self.complete:
            head = f"conforms, {rules}"
        else:
            head = f"not established (run incomplete), {rules}"
        if self.should_failing:
            head += f"; {_count(self.should_failing_rules, 'SHOULD rule fails', 'SHOULD rules fail')}"
        return f"{self.name}: {head}"


@dataclass(frozen=True)
class RunVerdict:
    """The outcome of one result set (one certify run): whether it is complete, and each subject's verdict."""

    complete: bool
    incomplete_reason: str
    subjects: tuple[SubjectVerdict, ...]  # the server first, then each client
    interrupted: bool = False
    label: str = ""  # the result set's name, when a report holds several
    profile: str = ""  # the profile the run held the target to, as its first line says it ("" when not recorded)

    @property
    def ok(self) -> bool:
        return self.complete and bool(self.subjects) and all(s.conforms for s in self.subjects)

    @property
    def must_failures(self) -> int:
        """MUST rules that failed or errored, over every subject."""
        return sum(s.must_failing_rules for s in self.subjects)

    @property
    def outcome(self) -> str:
        """One of OUTCOMES: incomplete, fail or pass."""
        if not self.complete:
            return "incomplete"
        return "pass" if self.ok else "fail"

    def lines(self) -> list[str]:
        """The verdict as a manager reads it: incompleteness first, then one sentence per subject."""
        lines = []
        if not self.complete:
            lines.append(f"INCOMPLETE: {self.incomplete_reason}; this is not a verdict")
        if self.profile:
            lines.append(f"held to {self.profile}")
        lines += [s.sentence() for s in self.subjects] or ["no checks ran"]
        return [f"{self.label}: {line}" for line in lines] if self.label else lines

    def exit_code(self, strict: bool = True) -> int:
        """certify's exit code: 0 conforms, 1 a MUST rule failed, 2 incomplete, 4 not certified (most MUST rules of
        the profile did not run), 130 interrupted. Without `strict` (`jetcheck run`'s default) a complete run exits
        0 whatever it found."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if not self.complete:
            return EXIT_INCOMPLETE
        if strict and not self.ok:
            return EXIT_MUST_FAILED if self.must_failures or not self.subjects else EXIT_NOT_CERTIFIED
        return EXIT_CONFORMS


def overall_outcome(verdicts: Iterable[RunVerdict]) -> str:
    """The worst outcome of several result sets ("pass" when there are none)."""
    outcomes = [v.outcome for v in verdicts]
    return min(outcomes, key=OUTCOMES.index) if outcomes else "pass"


EXIT_ORDER = (EXIT_INTERRUPTED, EXIT_INCOMPLETE, EXIT_MUST_FAILED, EXIT_NOT_CERTIFIED, EXIT_CONFORMS)  # worst first
COMPLETED_EXITS = (EXIT_CONFORMS, EXIT_MUST_FAILED, EXIT_NOT_CERTIFIED)  # certify's codes for a run with a verdict


def worst_exit(codes: Iterable[int]) -> int:
    """The worst of certify's exit codes (EXIT_ORDER): interrupted over incomplete over failed over not certified
    over conforming; EXIT_CONFORMS when there are none."""
    return min(codes, key=EXIT_ORDER.index, default=EXIT_CONFORMS)


def overall_exit_code(verdicts: Iterable[RunVerdict], strict: bool = True) -> int:
    """The exit code of several result sets (worst_exit)."""
    return worst_exit(v.exit_code(strict) for v in verdicts)


def completeness(results: int, run_info: dict[str, Any] | None, expected: int | None = None) -> tuple[bool, str]:
    """(complete, why not) for a result set of `results` results and its run.json (None when missing)."""
    if not run_info:
        return False, f"{results} result(s) and no run.json: the run did not record how it went"
    collected = expected if expected is not None else run_info.get("collected")
    problems = []
    if collected is not None and results < int(collected):
        problems.append(f"{results} of {collected} checks ran")
    if run_info.get("interrupted"):
        problems.append("the run was interrupted")
    if run_info.get("stopped_reason"):
        problems.append(f"the run stopped: {run_info['stopped_reason']}")
    if not run_info.get("finished_at"):
        problems.append("the run did not finish (run.json has no finished_at)")
    return not problems, "; ".join(problems)


def _subject_key(result: CheckResult) -> tuple[int, str, str]:
    if result.subject == "server":
        return 0, "server", f"server {result.server_version}".strip()
    client = " ".join(v for v in (result.client.get("name", ""), result.client.get("version", "")) if v)
    return 1, result.subject, f"{result.subject} {client}".strip()


def judge(
    results: list[CheckResult], run_info: dict[str, Any] | None, expected: int | None = None, label: str = ""
) -> RunVerdict:
    """The verdict of one result set: its results.jsonl, its run.json (None when missing) and, when known
    otherwise, the number of checks `expected` (else run.json's `collected`)."""
    complete, reason = completeness(len(results), run_info, expected)
    grouped: dict[tuple[int, str, str], list[CheckResult]] = {}
    for result in results:
        grouped.setdefault(_subject_key(result), []).append(result)
    subjects = []
    for (_rank, subject, name), of_subject in sorted(grouped.items()):
        by_rule = rule_statuses(of_subject)
        statuses = list(by_rule.values())
        failing = [r for r in of_subject if r.status in FAILING]
        out_of_profile = {r.id for r in of_subject if outside_profile(r)}
        must = {r.id for r in of_subject if r.level == "MUST"} - out_of_profile
        subjects.append(
            SubjectVerdict(
                subject=subject,
                name=name,
                rules=len(statuses),
                checks=len(of_subject),
                passed=statuses.count("pass"),
                not_applicable=statuses.count("na"),
                not_run=statuses.count("skip"),
                must_failing=tuple(r for r in failing if r.level == "MUST"),
                should_failing=tuple(r for r in failing if r.level != "MUST"),
                complete=complete,
                out_of_profile=len(out_of_profile),
                must_in_profile=len(must),
                must_not_run_checks=tuple(r for r in of_subject if r.id in must and did_not_run(r)),
                disagreeing=statuses.count("disagree"),
            )
        )
    interrupted = bool(run_info and run_info.get("interrupted"))
    return RunVerdict(complete, reason, tuple(subjects), interrupted, label, _profile_line(run_info))


def _profile_line(run_info: dict[str, Any] | None) -> str:
    profile = (run_info or {}).get("profile") or {}
    return f"profile {profile['name']} ({profile['why']})" if profile.get("name") else ""
