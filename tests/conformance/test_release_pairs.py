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

from .proofs import certify_run, check_name
from .test_catalog import check_rule_ids


@dataclass(frozen=True)
class ReleasePair:
    """`buggy` is the last release with the bug, `fixed` the first with its fix; `bug` is the fix (its pull request
    or issue), which the rule's source cites. On `buggy` the check instance `check` fails, its message carrying
    `reason`; on `fixed` every instance of its function passes. A pair proves `check` can fail (proof_gate)."""

    rule: str
    check: str  # as certify names it inside the checks folder: test_purge.py::test_x[file]
    buggy: str
    fixed: str
    bug: str
    reason: str

    @property
    def id(self) -> str:
        return f"{self.rule}@{self.buggy}..{self.fixed}"

    @property
    def function(self) -> str:
        return function_of(self.check)


def function_of(check: str) -> str:
    """The check function of a check's name: test_x of test_purge.py::test_x[file]."""
    return check.split("::")[1].split("[")[0]


PAIRS = [
    ReleasePair(
        "purge.seq-one",
        "test_purge.py::test_purge_with_seq_one_removes_nothing[file]",
        "2.14.1",
        "2.14.2",
        "nats-server#8241",
        "purge seq=1 on file storage removed 6 of 6 messages",
    ),
    ReleasePair(
        "purge.keep",
        "test_purge.py::test_purge_with_keep_counts_messages_not_the_deleted_sequences_between",
        "2.14.1",
        "2.14.2",
        "nats-server#8241",
        "it purged 23, leaving 2 from seq 47",
    ),
    ReleasePair(
        "limits.per-subject-limit-set-by-update",
        "test_limits.py::test_setting_max_msgs_per_subject_by_update_trims_every_subject",
        "2.14.1",
        "2.14.2",
        "nats-server#8254",
        "the stream holds 4 from seq 1",
    ),
    ReleasePair(
        "publish.expected-last-subject-sequence-subject",
        "test_publish.py::test_expected_last_subject_sequence_of_another_subject_holds_in_any_header_order",
        "2.11.6",
        "2.11.7",
        "nats-server#7065",
        "refuse with 400/10071; it was stored at 2",
    ),
    ReleasePair(
        "retention.interest-rollup",
        "test_retention.py::test_a_rollup_no_consumer_wants_still_purges_an_interest_stream",
        "2.12.7",
        "2.12.8",
        "nats-server#8019",
        "1 message(s) still stored from seq 1",
    ),
    ReleasePair(
        "retention.interest-max-deliver-stays",
        "test_retention.py::test_interest_message_past_one_consumers_max_deliver_stays_when_another_acks",
        "2.10.25",
        "2.10.26",
        "nats-server#6575",
        "it was removed within 2 s of the ack",
    ),
    ReleasePair(
        "reads.get-last-by-subject",
        "test_reads.py::test_get_last_by_subject_returns_the_newest_after_deletes_and_new_stores",
        "2.10.25",
        "2.10.26",
        "nats-server#6526",
        "9; it returned seq 6",
    ),
    ReleasePair(
        "reads.direct-get-start-time-after-last",
        "test_reads.py::test_a_direct_get_with_a_start_time_after_the_last_message_finds_none",
        "2.11.3",
        "2.11.4",
        "nats-server#6911",
        "documented answer 404; got messages [1] and no status",
    ),
    ReleasePair(
        "reads.direct-get-multi-last-up-to-time-before-first",
        "test_reads.py::test_a_multi_last_up_to_a_time_before_the_first_message_finds_none",
        "2.11.3",
        "2.11.4",
        "nats-server#6911",
        "documented answer 404; got messages [3], then status 204",
    ),
    ReleasePair(
        "reads.direct-get-batch-from-deleted-sequence",
        "test_reads.py::test_a_batched_direct_get_from_a_deleted_sequence_returns_the_messages_after_it",
        "2.11.9",
        "2.11.10",
        "nats-server#7291",
        "then 204 EOB; got no message, then status 404",
    ),
    ReleasePair(
        "consumers.deliver-by-start-time",
        "test_consumers.py::test_deliver_by_start_time_starts_at_that_time_when_later_messages_were_deleted",
        "2.12.3",
        "2.12.4",
        "nats-server#7751",
        "the consumer had num_pending 3 and delivered [8, 9, 10]",
    ),
    ReleasePair(
        "consumers.last-per-subject-pending",
        "test_consumers.py::test_last_per_subject_pending_stays_right_after_a_filter_update_on_memory",
        "2.14.2",
        "2.14.3",
        "nats-server#8313",
        "num_pending after it is 11, not 2",
    ),
    ReleasePair(
        "consumers.mem-storage-immutable",
        "test_consumers.py::test_mem_storage_cannot_be_updated",
        "2.14.3",
        "2.14.4",
        "nats-server#8382",
        "the update was accepted and consumer info reports mem_storage True",
    ),
]


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """The results of each release in PAIRS, certified once on the checks paired with it."""

    @functools.cache
    def results_of(version: str) -> tuple[CheckResult, ...]:
        checks = sorted({pair.function for pair in PAIRS if version in (pair.buggy, pair.fixed)})
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


def instances(results: tuple[CheckResult, ...], function: str) -> dict[str, CheckResult]:
    """The results of `function`'s instances, by check name."""
    named = {check_name(r): r for r in results}
    return {name: r for name, r in named.items() if function_of(name) == function}


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pair: pair.id)
def test_the_last_release_with_a_bug_fails_its_rule_and_the_first_with_the_fix_passes(certified, pair):
    """The buggy release fails the check with the bug's reason; the fixed release passes every instance of it."""
    buggy, fixed = instances(certified(pair.buggy), pair.function), instances(certified(pair.fixed), pair.function)
    assert pair.check in buggy and fixed, f"{pair.check} did not run on both releases: {sorted(buggy)}"
    failed = buggy[pair.check]
    assert failed.status == "fail" and pair.reason in failed.message, (
        f"nats-server {pair.buggy} should fail {pair.check} ({pair.reason!r}): {failed.status}: {failed.message[:400]}"
    )
    assert {name: r.status for name, r in fixed.items()} == dict.fromkeys(fixed, "pass"), [
        (name, r.status, r.message[:300]) for name, r in fixed.items() if r.status != "pass"
    ]


def test_each_pair_names_a_check_of_its_rule_and_a_bug_its_rule_cites():
    """A pair's check is one of its rule's checks, its releases are in order, and the rule's source cites the bug."""
    rules = load_catalog()
    checks = {name.split(".", 1)[1]: ids for name, ids in check_rule_ids().items()}
    for pair in PAIRS:
        assert checks.get(pair.function) == {pair.rule}, pair
        assert parse_version(pair.buggy) < parse_version(pair.fixed), pair
        assert pair.bug in rules[pair.rule].source, f"{pair.rule}'s source does not cite {pair.bug}"
    assert len({pair.id for pair in PAIRS}) == len(PAIRS)
