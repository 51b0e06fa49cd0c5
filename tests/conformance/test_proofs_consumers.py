"""Each consumers and pull check can fail: through a proxy that breaks its rule it fails, the others still pass."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from .proofs import assert_broke_exactly, certified_rows, certify_broken, module_cases, proof

# These runs wait out ack waits, inactive thresholds and pull expiries (a fourth of a core each): two at a time.
CONCURRENT_RUNS = 2

PROOFS = [
    proof("consumer-drop-start,consumer-drop-filters", "consumers", {
        "consumers.deliver-last", "consumers.deliver-new", "consumers.deliver-by-start-sequence",
        "consumers.deliver-by-start-time", "consumers.deliver-last-per-subject", "consumers.opt-start-conflict",
        "consumers.filter-subject", "consumers.filter-subjects", "consumers.filter-validation",
        "consumers.last-per-subject-pending", "consumers.reset-refused",
    }),
    # consumer-deliver-last also turns the all+seq conflict into last+seq: refused with 10094 all the same, whose
    # words the errors table leaves to the server (consumer-drop-start fails consumers.opt-start-conflict)
    proof("acks-only,consumer-deliver-last", "consumers", {
        "consumers.nak", "consumers.nak-delay", "consumers.in-progress", "consumers.term", "consumers.deliver-all",
    }),
    proof("consumer-drop-delivery-limits,consumer-ack-policy-swap", "consumers", {
        "consumers.max-deliver", "consumers.backoff", "consumers.backoff-max-deliver", "consumers.max-ack-pending",
        "consumers.ack-explicit", "consumers.ack-all", "consumers.ack-none", "consumers.ack-policy-immutable",
    }),
    proof("consumer-info-off-by-one,consumer-hide-durable,consumer-drop-inactive-threshold,consumer-drop-ack-wait",
          "consumers", {
        "consumers.info-pending-counters", "consumers.info-redelivered", "consumers.deliver-new",
        "consumers.deliver-last", "consumers.filter-subject", "consumers.filter-subjects", "consumers.ack-none",
        "consumers.durable", "consumers.ephemeral", "consumers.ack-wait-redelivery", "consumers.max-deliver",
        "consumers.in-progress", "consumers.last-per-subject-pending", "consumers.deliver-by-start-time",
    }, spared={"test_consumers.py::test_deliver_by_start_time_starts_at_the_first_message_at_that_time":
               "it reads the deliveries only, which consumer-info-off-by-one leaves alone"}),
    # the early side of the inactive threshold (the late one: consumer-drop-inactive-threshold, above)
    proof("consumer-threshold-tenth", "consumers", {"consumers.ephemeral"}),
    proof("pull-status-blur", "pull", {
        "pull.max-bytes", "pull.expires-timeout", "pull.no-wait-empty", "pull.no-wait-partial", "pull.max-waiting",
        "pull.max-request-batch", "pull.max-request-expires", "pull.max-request-max-bytes", "pull.consumer-deleted",
        "pull.push-based", "pull.bad-request",
    }),
    proof("pull-batch-cap-2,pull-drop-max-bytes,pull-empty-body-batch-2", "pull", {
        "pull.empty-body-one", "pull.batch", "pull.max-bytes", "pull.expires-timeout", "pull.no-wait-partial",
        "pull.max-request-batch", "pull.max-request-max-bytes",
    }),
]  # fmt: skip


@pytest.fixture(scope="module")
def certified(request, embedded_server, tmp_path_factory) -> dict[str, Future]:
    """Every selected row's certify run through its breakers, by row id, CONCURRENT_RUNS at a time."""

    def run(case, out):
        return certify_broken(embedded_server.url, out, case)

    with certified_rows(module_cases(request), run, CONCURRENT_RUNS, tmp_path_factory) as futures:
        yield futures


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_checks(certified, case):
    """Certify through the breaker fails the checks of the broken rules and passes (or na) every other check."""
    assert_broke_exactly(case, *certified[case.id].result())
