"""Each streams, limits, retention and reads check can fail: through a proxy that breaks its rule it fails, and
every other check of the row's areas still passes or is na."""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof

# proofs.broken_proxy leaves the proxy's stdout/stderr pipes open; their ResourceWarning is not about these checks.

RETENTION_ROW = "create-drop-discard-new-per-subject,create-drop-retention,consumer-drop-delivery-limits"
PROOFS = [
    proof("stream-hide-errors,names-drop-subject,info-drop-consumer-count", "streams", {
        "streams.create-different-config-rejected", "streams.create-subject-overlap-rejected",
        "streams.update-storage-rejected", "streams.update-retention-workqueue-rejected",
        "streams.update-one-way-flags", "streams.update-unknown-rejected", "streams.info",
        "streams.info-unknown-rejected", "streams.names-by-subject", "streams.list", "streams.delete",
    }),
    proof("recreate-differs,update-keeps-limits-retention-storage,names-drop-last", "streams,limits", {
        "streams.create-idempotent", "streams.update-editable", "streams.update-storage-rejected",
        "streams.update-retention-workqueue-rejected", "streams.update-retention-limits-interest", "streams.names",
        "streams.names-by-subject", "limits.lowered-limit-applies",
    }),
    proof("create-drop-limits", "limits", {
        "limits.max-msgs-discard-old", "limits.max-msgs-discard-new", "limits.max-bytes-discard-old",
        "limits.max-bytes-discard-new", "limits.max-age", "limits.max-age-minimum", "limits.max-msg-size",
        "limits.max-msgs-per-subject-discard-old", "limits.per-subject-replaces-at-max-msgs",
        "limits.discard-new-per-subject", "limits.interest-stream", "limits.workqueue-stream",
    }),
    # the two sides of a timing rule: max_age dropped, messages never expire (above); a fifth of it, too early
    proof("create-max-age-fifth", "limits", {"limits.max-age"}),
    proof(RETENTION_ROW, "limits,retention", {
        "limits.discard-new-per-subject", "limits.discard-new-per-subject-needs-discard-new",
        "limits.discard-new-per-subject-needs-per-subject-limit", "retention.interest-dropped-without-interest",
        "retention.interest-removed-when-all-acked", "retention.interest-follows-filters",
        "retention.workqueue-removed-on-ack", "retention.workqueue-max-deliver-stays",
        "retention.workqueue-explicit-ack", "retention.workqueue-pull-ack-none", "retention.workqueue-deliver-all",
        "retention.workqueue-one-unfiltered", "retention.workqueue-overlapping-filters",
        "retention.workqueue-partially-overlapping-filters", "retention.interest-rollup",
        "retention.interest-max-deliver-stays",
    }),
    proof("msg-get-drop-subject-selectors,msg-get-first-by-default,msg-get-drop-headers,msg-delete-next-seq,"
          "direct-get-strip-headers,create-allow-direct", "reads", {
        "reads.get-by-sequence", "reads.get-missing", "reads.get-last-by-subject", "reads.get-next-by-subject",
        "reads.get-bad-request", "reads.direct-get", "reads.direct-get-subject-appended", "reads.direct-get-not-found",
        "reads.direct-get-needs-allow-direct", "reads.delete-message", "reads.delete-missing",
        "reads.direct-get-start-time-after-last", "reads.direct-get-multi-last-up-to-time-before-first",
        "reads.direct-get-batch-from-deleted-sequence",
        # direct-get-strip-headers takes the first reply's Nats-Sequence, or the status of a 413 alone
        "reads.direct-get-batch", "reads.direct-get-batch-max-bytes", "reads.direct-get-batch-start-time",
        "reads.direct-get-multi-last", "reads.direct-get-multi-last-up-to", "reads.direct-get-multi-last-too-many",
        "reads.direct-get-multi-last-up-to-time-inclusive",  # fails on nats-server too (proofs.SERVER_FINDINGS)
    }),
    proof("msg-delete-hide-errors", "reads", {"reads.delete-denied", "reads.delete-missing"}),
    proof("direct-get-batch-plus-one,direct-get-drop-max-bytes,direct-get-start-time-earlier,direct-get-drop-no-hdr",
          "reads", {
        "reads.direct-get-batch", "reads.direct-get-batch-max-bytes", "reads.direct-get-batch-start-time",
        "reads.direct-get-start-time-after-last", "reads.direct-get-no-headers",
    }),
    proof("direct-get-multi-last-first-only,direct-get-drop-up-to,direct-get-413-as-404", "reads", {
        "reads.direct-get-multi-last", "reads.direct-get-multi-last-up-to", "reads.direct-get-multi-last-too-many",
        "reads.direct-get-multi-last-up-to-time-before-first",
        "reads.direct-get-multi-last-up-to-time-inclusive",  # fails on nats-server too (proofs.SERVER_FINDINGS)
    }),
]  # fmt: skip


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_checks(embedded_server, tmp_path, case):
    """Certify through the breakers fails the checks of the broken rules and passes (or na) every other check."""
    assert_breaks_exactly(embedded_server.url, tmp_path, case)
