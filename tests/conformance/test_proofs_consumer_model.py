"""The consumer model check can fail: through a proxy that breaks a rule it follows, it fails, the other model checks
still pass."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from .proofs import assert_broke_exactly, certified_rows, certify_broken, module_cases, proof

CONSUMER_MODEL = "model.consumer-acks-pending"
# Each run shrinks a failing program against the live server (a core at most): one at a time.
CONCURRENT_RUNS = 1

PROOFS = [
    # consumer info counts one message more pending (and redelivered) than the consumer has
    proof("consumer-info-off-by-one", "model", {CONSUMER_MODEL}),
    # a nak that does not redeliver: the next pull brings fewer messages (or others) than the rules allow
    proof("nak-as-progress", "model", {CONSUMER_MODEL}),
]


@pytest.fixture(scope="module")
def certified(request, embedded_server, tmp_path_factory) -> dict[str, Future]:
    """Every selected row's certify run through its breakers, by row id."""

    def run(case, out):
        return certify_broken(embedded_server.url, out, case)

    with certified_rows(module_cases(request), run, CONCURRENT_RUNS, tmp_path_factory) as futures:
        yield futures


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_checks(certified, case):
    """Certify through the breaker fails the checks of the broken rules and passes (or na) every other check."""
    assert_broke_exactly(case, *certified[case.id].result())
