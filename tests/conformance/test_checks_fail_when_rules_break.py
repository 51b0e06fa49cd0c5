"""Each conformance check can fail: through a proxy that breaks its rule, it fails and the others still pass."""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof

BASIC = "publish,dedup,purge,model"
MODEL = "model.publish-purge"
LIMITS_MODEL = "model.limits-discard-deletes"
CHECK_ORDER = "test_publish.py::test_check_order_of_expected_last_sequence_and_dedup_follows_the_server_version"
R3_NEEDS_A_CLUSTER = "na on a single server (it needs replicated streams): CLUSTER_PROOFS fails it"
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
            "publish.expected-last-subject-sequence-subject",
            "publish.expected-last-msg-id",
            "publish.expected-checks-before-dedup",
        },
        spared={f"{CHECK_ORDER}[r3]": R3_NEEDS_A_CLUSTER},
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
    # the early side of the window's timing rules (the late one: create-drop-window, above)
    proof(
        "create-window-fifth",
        BASIC,
        {"dedup.window-bounds", "dedup.window-expiry", "dedup.window-not-extended"},
        spared={
            "test_dedup.py::test_duplicate_window_out_of_bounds_is_rejected_with_10052[below-100ms]": "its 50 ms "
            "window is under the 500 ms the breaker shortens"
        },
    ),
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
    # per-message TTL (ADR-43): the header lost on the way, halved (the early side of its expiry), markers not asked
    proof(
        "strip-ttl",
        "ttl",
        {
            "ttl.disabled-refused",
            "ttl.invalid-refused",
            "ttl.expires",
            "ttl.never",
            "ttl.clamped-to-marker-ttl",
            "ttl.client-publish",
        },
    ),
    proof("ttl-halved", "ttl", {"ttl.expires", "ttl.client-publish"}),
    proof(
        "create-drop-marker-ttl",
        "ttl",
        {"ttl.marker-ttl-minimum", "ttl.marker-sets-rollup", "ttl.max-age-marker", "ttl.clamped-to-marker-ttl"},
    ),
    proof("stream-hide-errors", "ttl", {"ttl.cannot-disable", "ttl.marker-ttl-minimum"}),
    # consumer pause (2.11): never paused, paused for good, a resume that pauses, heartbeats lost. The heartbeats and
    # resume checks judge only a pause the server took as asked: one never paused, or paused for longer, fails them.
    proof(
        "pause-ignored",
        "pause",
        {
            "pause.until",
            "pause.no-deliveries",
            "pause.create-config",
            "pause.client-pause-resume",
            "pause.heartbeats-continue",
            "pause.resume-empty",
        },
    ),
    proof(
        "pause-forever",
        "pause",
        {"pause.until", "pause.no-deliveries", "pause.client-pause-resume", "pause.heartbeats-continue"},
    ),
    proof("pause-on-resume", "pause", {"pause.resume-empty"}),
    proof("drop-heartbeats", "pause", {"pause.heartbeats-continue"}),
    # API levels and asset metadata (ADR-44): the level not advertised, the server's metadata lost, the header lost
    # with the level hidden (0), a request "above" it asks for level 1, which the server serves
    proof(
        "info-drop-api-level",
        "apilevel",
        {"apilevel.info", "apilevel.asset-metadata", "apilevel.required-header", "apilevel.required-header-words"},
    ),
    proof("strip-asset-metadata", "apilevel", {"apilevel.asset-metadata", "apilevel.required-level"}),
    proof("strip-required-level", "apilevel", {"apilevel.required-header", "apilevel.required-header-words"}),
    # republish (ADR-28), metadata (ADR-33) and compression (ADR-35) asked at create and lost on the way
    proof(
        "create-drop-republish", "republish", {"republish.headers", "republish.headers-only", "republish.cycle-refused"}
    ),
    proof("create-drop-metadata", "metadata", {"metadata.round-trip", "metadata.size-limit"}),
    proof("create-drop-compression", "compression", {"compression.s2", "compression.invalid-refused"}),
    # counters (ADR-49): the increment lost, an invalid one made valid, the option lost, the expectations lost
    proof(
        "strip-incr",
        "counters",
        {
            "counters.increment",
            "counters.big-values",
            "counters.disabled-refused",
            # without Nats-Incr no increment is stored, so there is nothing to source
            "counters.sourced-aggregate",
            "counters.sourced-verbatim",
            # an increment that is no integer arrives as none: refused as missing (10169), not as invalid
            "counters.invalid-refused",
        },
        reasons={"counters.invalid-refused": "refused with 400/10169"},
    ),
    proof("incr-made-valid", "counters", {"counters.invalid-refused"}),
    proof(
        "create-drop-counter",
        "counters",
        {
            "counters.increment",
            "counters.big-values",
            "counters.invalid-refused",
            "counters.config",
            "counters.api-level",
            "counters.sourced-aggregate",
            "counters.sourced-verbatim",
            "counters.mirror-refused",
        },
    ),
    proof("strip-expected", "counters", {"counters.forbidden-headers"}),
    # counters through sources (ADR-49): the sources' record hidden (create-drop-sources and -mirror: sourcing rows)
    proof("strip-counter-sources", "counters", {"counters.sourced-aggregate"}),
    # priority groups (ADR-42): the policy lost at create, pulls that all name the group, pin ids and min_pending lost
    proof(
        "create-drop-priority",
        "priority",
        {
            "priority.config-refusals",
            "priority.one-group",  # fails on nats-server too (proofs.SERVER_FINDINGS); here also for the breaker
            "priority.pull-needs-group",
            "priority.pin-id",
            "priority.unpin",
            "priority.overflow-min-pending",
            "priority.overflow-min-ack-pending",
            "priority.pin-timeout",
            "priority.prioritized",
        },
    ),
    proof("pull-group-jobs", "priority", {"priority.pull-needs-group"}),
    # the documented codes of refusals (errors table): priority group configs, counter increments and schedules still
    # refused, but all with the general 400/10003 'bad request'
    proof(
        "refusals-as-bad-request",
        "priority,counters,schedules",
        {"priority.config-refusals", "counters.invalid-refused", "schedules.invalid-rejected"},
        reasons=dict.fromkeys(
            ("priority.config-refusals", "counters.invalid-refused", "schedules.invalid-rejected"),
            "refused with 400/10003",
        ),
    ),
    proof("pull-drop-pin-id", "priority", {"priority.pin-id", "priority.unpin", "priority.pin-timeout"}),
    proof("pull-drop-min-pending", "priority", {"priority.overflow-min-pending"}),
    proof("pull-drop-min-ack-pending", "priority", {"priority.overflow-min-ack-pending"}),
    proof("pull-drop-priority", "priority", {"priority.prioritized"}),
    proof("create-drop-priority-timeout", "priority", {"priority.pin-timeout"}),
    # mirrors and sources (ADR-59): the mirror or the sources lost at create, their transforms lost, the header hidden
    proof(
        "create-drop-mirror",
        "sourcing,counters",
        {
            "counters.mirror-refused",
            "counters.sourced-verbatim",
            "sourcing.mirror-copy",
            "sourcing.mirror-restrictions",
            "sourcing.durable-mirror-consumer",
            "sourcing.durable-source-config",
            "sourcing.mirror-transform",
            "sourcing.transform-refusals",
            "sourcing.oracle-headers",
        },
    ),
    proof(
        "create-drop-sources",
        "sourcing,counters",
        {
            "counters.sourced-aggregate",
            "counters.sourced-verbatim",
            "sourcing.mirror-restrictions",
            "sourcing.sources-aggregate",
            "sourcing.source-header",
            "sourcing.source-header-subject",
            "sourcing.source-transform",
            "sourcing.durable-upstream-consumer",
            "sourcing.upstream-acked",
            "sourcing.durable-consumer-removed",
            "sourcing.durable-source-config",
            "sourcing.durable-source",
            "sourcing.source-same-stream-twice",
            "sourcing.transform-refusals",
            "sourcing.oracle-headers",
        },
        # without its sources a stream makes no consumer to remove: the check fails at the one it waits for
        reasons={"sourcing.durable-consumer-removed": "a sourced WorkQueue stream gets a durable JS_SRC_"},
    ),
    proof(
        "source-drop-transforms",
        "sourcing",
        {"sourcing.source-transform", "sourcing.mirror-transform", "sourcing.transform-refusals"}
        | {"sourcing.oracle-headers"},  # the transformed source holds every message on its own subject
    ),
    proof(
        "source-drop-filters",
        "sourcing",
        {"sourcing.source-same-stream-twice", "sourcing.transform-refusals", "sourcing.durable-source-config"}
        | {"sourcing.oracle-headers"},  # the filtered source holds every message
        # without their filters the two sources are one source twice, which the server refuses (10140)
        reasons={"sourcing.source-same-stream-twice": "is documented as valid; the server refused it"},
    ),
    proof("create-drop-stream-transform", "sourcing", {"sourcing.stream-transform"}),
    proof("strip-stream-source", "sourcing", {"sourcing.source-header", "sourcing.source-header-subject"}),
    # reliable sourcing of WorkQueue/Interest streams (ADR-60): the upstream made a Limits stream, the pre-created
    # consumer lost, a removed source kept, a flow_control consumer's redelivery settings lost
    proof(
        "create-drop-retention",
        "sourcing",
        {
            "sourcing.durable-upstream-consumer",
            "sourcing.durable-mirror-consumer",
            "sourcing.upstream-acked",
            "sourcing.durable-source",
            "sourcing.durable-consumer-removed",
        },
        # a Limits upstream gets no durable consumer to remove: the check fails at the one it waits for
        reasons={"sourcing.durable-consumer-removed": "a sourced WorkQueue stream gets a durable JS_SRC_"},
    ),
    proof("source-drop-consumer", "sourcing", {"sourcing.durable-source-config", "sourcing.durable-source"}),
    proof("update-keeps-sources", "sourcing", {"sourcing.durable-consumer-removed"}),
    proof("consumer-drop-redelivery", "sourcing", {"sourcing.ack-flow-control"}),
    # consumer reset (ADR-60): a reset to a sequence made a reset to the ack floor, and the other way round
    proof("reset-drop-seq", "consumers", {"consumers.reset-seq", "consumers.reset-refused"}),
    proof("reset-to-first", "consumers", {"consumers.reset-ack-floor"}),
    # persist modes (ADR-56): persist_mode lost at create, every create made async
    proof(
        "create-drop-persist-mode",
        "persist",
        {
            "persist.async",
            "persist.api-level",
            "persist.async-refusals",
            "persist.async-file-only",
            "persist.immutable",
        },
    ),
    proof("create-async-persist", "persist", {"persist.default-unset"}),
    # message schedules (ADR-51): their headers lost, an '@at' made earlier, the stop headers lost, the option lost
    proof(
        "strip-schedule-headers",
        "schedules",
        {
            "schedules.at-past",
            "schedules.at-future",
            "schedules.disabled-refused",
            "schedules.invalid-rejected",
            "schedules.every",
            "schedules.time-zone-cron-only",
        },
    ),
    proof("schedule-at-early", "schedules", {"schedules.at-future"}),
    proof("strip-schedule-next", "schedules", {"schedules.scheduler-not-self"}),
    proof(
        "create-drop-schedules",
        "schedules",
        # an invalid schedule on a stream without schedules is refused as disabled (10188), not as invalid
        {
            "schedules.at-past",
            "schedules.at-future",
            "schedules.config",
            "schedules.every",
            "schedules.invalid-rejected",
        },
        reasons={"schedules.invalid-rejected": "refused with 400/10188"},
    ),
    # atomic batch publish (ADR-50): the batch headers lost (every message a plain publish), the option lost
    proof(
        "strip-batch-headers",
        "batch",
        {
            "batch.disabled-refused",
            "batch.commit",
            "batch.incomplete-abandoned",
            "batch.id-limit",
            "batch.sequence-missing",
            "batch.unsupported-header",
            "batch.expected-last-sequence",
            "batch.duplicate-msg-id",
            "batch.eob-commit",
        },
    ),
    proof(
        "create-drop-atomic",
        "batch",
        {
            "batch.commit",
            "batch.incomplete-abandoned",
            "batch.id-limit",
            "batch.sequence-missing",
            "batch.unsupported-header",
            "batch.duplicate-msg-id",
            "batch.eob-commit",
            "batch.api-level",
        },
    ),
]
# Rows that need a 3-node cluster behind the proxy: the replicated-stream instances are na on one server.
CLUSTER_PROOFS = [
    # A replicated stream dedups before it checks Expected-Last-Sequence: without the msg id there is nothing to
    # dedup, so the stale expectation is refused and the order looks expected-first.
    proof(
        "strip-msg-id",
        "publish",
        {"publish.expected-last-msg-id", "publish.expected-checks-before-dedup"},
        spared={f"{CHECK_ORDER}[r1]": "an unreplicated stream checks Expected-Last-Sequence first, msg id or not"},
    ),
]


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_checks(embedded_server, tmp_path, case):
    """Certify through the breaker fails the checks of the broken rules and passes (or na) every other check."""
    assert_breaks_exactly(embedded_server.url, tmp_path, case)


@pytest.mark.parametrize("case", CLUSTER_PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_of_replicated_streams_fails_exactly_its_checks(cluster_server, tmp_path, case):
    """Through the breaker in front of a cluster node, the replicated-stream checks of the broken rules fail too."""
    assert_breaks_exactly(cluster_server.url, tmp_path, case)
