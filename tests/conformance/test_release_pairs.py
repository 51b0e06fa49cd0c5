"""Real releases as proofs: for each bug nats-server fixed that broke a documented rule, the last release with the bug
fails the rule's check, for the bug's reason, and the first release with the fix passes it, each certified as a user
would (`jetcheck certify --server local --server-version X`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest

from jetcheck.conformance.catalog import load_catalog
from jetcheck.records import CheckResult
from jetcheck.versions import parse_version

from .proofs import certify_run
from .test_catalog import check_rule_ids


@dataclass(frozen=True)
class ReleasePair:
    """`buggy` is the last release with the bug, `fixed` the first with its fix; `bug` is the fix (its pull request
    or issue), which the rule's source cites; the failure on `buggy` carries `reason`."""

    rule: str
    check: str  # the check function, as conformance/checks names it
    buggy: str
    fixed: str
    bug: str
    reason: str

    @property
    def id(self) -> str:
        return f"{self.rule}@{self.buggy}..{self.fixed}"


PAIRS = [
    ReleasePair(
        "purge.seq-one",
        "test_purge_with_seq_one_removes_nothing",
        "2.14.1",
        "2.14.2",
        "nats-server#8241",
        "purge seq=1 on file storage removed 6 of 6 messages",
    ),
]


def releases() -> list[str]:
    return sorted({v for pair in PAIRS for v in (pair.buggy, pair.fixed)}, key=parse_version)


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """The results of each release in PAIRS, certified once on the checks paired with it."""

    @functools.cache
    def results_of(version: str) -> tuple[CheckResult, ...]:
        checks = sorted({pair.check for pair in PAIRS if version in (pair.buggy, pair.fixed)})
        _code, results, output = certify_run(
            "local",
            tmp_path_factory.mktemp(f"release-{version}"),
            "-k",
            " or ".join(checks),
            options=("--server-version", version),
        )
        assert results, f"nats-server {version}: no checks ran\n{output}"
        return tuple(results)

    return results_of


def of_pair(results: tuple[CheckResult, ...], pair: ReleasePair) -> list[CheckResult]:
    return [r for r in results if r.id == pair.rule and r.check.split("::")[-1].split("[")[0] == pair.check]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pair: pair.id)
def test_the_last_release_with_a_bug_fails_its_rule_and_the_first_with_the_fix_passes(certified, pair):
    """The buggy release fails the rule's check with the bug's reason; the fixed release passes every instance."""
    buggy, fixed = of_pair(certified(pair.buggy), pair), of_pair(certified(pair.fixed), pair)
    assert buggy and fixed, f"{pair.check} did not run on both releases"
    failures = [r.message for r in buggy if r.status == "fail"]
    assert any(pair.reason in message for message in failures), (
        f"nats-server {pair.buggy} should fail {pair.rule} ({pair.reason!r}): "
        f"{[(r.status, r.message[:300]) for r in buggy]}"
    )
    assert all(r.status == "pass" for r in fixed), [(r.status, r.message[:300]) for r in fixed]


def test_each_pair_names_a_check_of_its_rule_and_a_bug_its_rule_cites():
    """A pair's check is one of its rule's checks, its releases are in order, and the rule's source cites the bug."""
    rules = load_catalog()
    checks = {name.split(".", 1)[1]: ids for name, ids in check_rule_ids().items()}
    for pair in PAIRS:
        assert checks.get(pair.check) == {pair.rule}, pair
        assert parse_version(pair.buggy) < parse_version(pair.fixed), pair
        assert pair.bug in rules[pair.rule].source, f"{pair.rule}'s source does not cite {pair.bug}"
    assert len({pair.id for pair in PAIRS}) == len(PAIRS)
