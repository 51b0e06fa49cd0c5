"""Each conformance check can fail: through a proxy that breaks its rule, it fails and the others still pass."""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof

BASIC = "publish,dedup,purge,model"
MODEL = "model.publish-purge"
LIMITS_MODEL = "model.limits-discard-deletes"
PROOFS = [
    proof(
        "strip-msg-id",
        BASIC,
        {
            "dedup.duplicate-acked",
            "dedup.by-id-not-payload",
            "dedup.ids-survive-purge",
            "dedup.window-expiry",
            "dedup.window-not-extended",
            "publish.expected-last-msg-id",
            MODEL,
            LIMITS_MODEL,
        },
    ),
    proof(
        "strip-expected",
        BASIC,
        {
            "publish.expected-stream",
            "publish.expected-last-sequence",
            "publish.expected-last-subject-sequence",
            "publish.expected-last-msg-id",
            "publish.expected-checks-before-dedup",
        },
    ),
    proof(
        "puback-mark-duplicate",
        BASIC,
        {
            "publish.puback-fields",
            "dedup.by-id-not-payload",
            "dedup.window-expiry",
            "dedup.window-not-extended",
            MODEL,
            LIMITS_MODEL,
        },
    ),
    proof("create-window-1s", BASIC, {"dedup.default-window", "dedup.window-follows-max-age"}),
    proof("create-drop-window", BASIC, {"dedup.window-bounds", "dedup.window-expiry", "dedup.window-not-extended"}),
    proof("purge-keep-one", BASIC, {"purge.all", "dedup.ids-survive-purge", MODEL}),
    proof("purge-drop-filter", BASIC, {"purge.filter", "purge.filter-seq", "purge.filter-keep", MODEL}),
    proof(
        "purge-drop-seq",
        BASIC,
        {
            "purge.seq",
            "purge.seq-one",
            "purge.filter-seq",
            "purge.seq-keep-rejected",
            "purge.consumer-moves-forward",
            MODEL,
        },
    ),
    proof(
        "purge-drop-keep",
        BASIC,
        {"purge.keep", "purge.keep-at-least-count", "purge.filter-keep", "purge.seq-keep-rejected", MODEL},
    ),
    proof("purge-hide-errors", BASIC, {"purge.seq-keep-rejected", "purge.unknown-stream", MODEL}),
    proof("create-drop-limits", "model", {"model.limits-discard-deletes"}),
]


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_checks(embedded_server, tmp_path, case):
    """Certify through the breaker fails the checks of the broken rules and passes (or na) every other check."""
    assert_breaks_exactly(embedded_server.url, tmp_path, case)
