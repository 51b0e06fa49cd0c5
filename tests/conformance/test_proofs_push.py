"""The push client checks fail for every driven client too: the wire breakers that break push consumers for nats-py
(test_proofs_kv) sit between the server and any client, so the same rows certify nats.js and nats.go through them.

queue-group-enforced is asked of the group each consumer has, so these breakers leave it to the clients: nats-py and
nats.go pass it, nats.js fails it with no breaker (its push API cannot name a queue, so it cannot be asked to refuse
one). The `bind-any-queue` variant (test_proofs_client) shows it failing for each client.
"""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof
from .test_proofs_client import missing_toolchain

PUSH_BROKEN = {"push.durable-config", "push.durable-resumes", "push.ephemeral", "push.queue-group"}

# The checks a client fails with no breaker, for its own reason (docs/guides/version-matrix.md's client table).
OWN_FAILURES = {"nats.js": ("test_push.py::test_subscriptions_must_match_the_consumers_deliver_group",), "nats.go": ()}

PROOFS = [
    proof("push-deliver-last,push-drop-deliver-group", "push", PUSH_BROKEN, client=client)
    for client in ("nats.js", "nats.go")
]


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_push_consumers_fails_a_driven_clients_push_checks(embedded_server, tmp_path, case):
    """Through the breakers, the client's durable, ephemeral and queue push checks fail, and the rest pass or na."""
    if reason := missing_toolchain(case.client):
        pytest.skip(reason)
    assert_breaks_exactly(embedded_server.url, tmp_path, case, also_failing=OWN_FAILURES[case.client])
