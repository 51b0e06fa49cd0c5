"""Each oracle can fail for its reason: through breakers no example check was written for, the oracles of the
broken rules fail, and the other oracles still pass (or are na)."""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof

MODEL = "oracle.model-headers"
PROOFS = [
    # a refusal that stored its message; memory streams that never dedup
    proof(
        "store-then-refuse,memory-streams-lose-dedup",
        "oracle",
        {MODEL, "oracle.refusal-no-effect", "oracle.storage-equivalent"},
    ),
    # consumers that mis-select by filter or start sequence, an update that is not a create, a read path that
    # answers for another sequence
    proof(
        "consumer-drop-last-filter,consumer-start-one-later,update-drop-per-subject-limit,direct-get-drop-up-to",
        "oracle",
        {
            "oracle.partitioned-consumers",
            "oracle.pivoted-reads",
            "oracle.update-as-create",
            "oracle.read-paths-agree",
        },
    ),
]
CLUSTER_PROOFS = [
    # replicated streams that never dedup: R1 and R3 part ways. No Nats-Expected-Last-Msg-Id reaches the cluster
    # either (so the model check fails too): on 2.15.1 an R3 stream stops answering publishes after one is refused
    # for it (docs/servers/nats-server.md), which would end the replicas oracle in unanswered publishes.
    proof("replicated-streams-lose-dedup,strip-expected-last-msg-id", "oracle", {"oracle.replicas-equivalent", MODEL}),
]


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_oracles(embedded_server, tmp_path, case):
    """Certify through the breakers fails the oracles of the broken rules and passes (or na) every other oracle."""
    assert_breaks_exactly(embedded_server.url, tmp_path, case)


@pytest.mark.parametrize("case", CLUSTER_PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_of_replicated_streams_fails_exactly_its_oracles(cluster_server, tmp_path, case):
    """Through the breaker in front of a cluster node, the oracles of replicated streams fail too."""
    assert_breaks_exactly(cluster_server.url, tmp_path, case)
