"""The push client checks fail for every driven client too: the wire breakers that break push consumers for nats-py
(test_proofs_kv) sit between the server and any client, so the same rows certify nats.js and nats.go through them.

queue-group-enforced is `na` for both (they take a push consumer's queue from its deliver_group: no mismatch can be
asked for), so no row can break it for them; test_proofs_client.NOT_APPLICABLE records that.
"""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof
from .test_proofs_client import missing_toolchain

PUSH_BROKEN = {"push.durable-config", "push.durable-resumes", "push.ephemeral", "push.queue-group"}

PROOFS = [
    proof("push-deliver-last,push-drop-deliver-group", "push", PUSH_BROKEN, client=client)
    for client in ("nats.js", "nats.go")
]


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_push_consumers_fails_a_driven_clients_push_checks(embedded_server, tmp_path, case):
    """Through the breakers, the client's durable, ephemeral and queue push checks fail, and the rest pass or na."""
    if reason := missing_toolchain(case.client):
        pytest.skip(reason)
    assert_breaks_exactly(embedded_server.url, tmp_path, case)
