"""Each server-side heartbeat check can fail: through a proxy that breaks its rule it fails, the others still pass."""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof

# Only the server's rules: the client's heartbeat rules are proved with client variants (test_proofs_client.py).
SERVER_HEARTBEAT = "heartbeat and server"

PROOFS = [
    # No idle heartbeat ever arrives, and pull requests lose their idle_heartbeat (so no 400 for a bad one).
    proof("drop-heartbeats,pull-drop-idle-heartbeat", SERVER_HEARTBEAT, {
        "heartbeat.pull-idle", "heartbeat.push-idle", "heartbeat.not-while-flowing",
        "heartbeat.pull-heartbeat-too-large", "heartbeat.pull-heartbeat-needs-expires",
    }),
    # A heartbeat follows every delivery: heartbeats while data flows, and mixed into the deliveries the idle
    # checks wait for first.
    proof("inject-heartbeats", SERVER_HEARTBEAT, {
        "heartbeat.pull-idle", "heartbeat.push-idle", "heartbeat.not-while-flowing",
    }),
]  # fmt: skip


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_rule_fails_exactly_its_checks(embedded_server, tmp_path, case):
    """Certify through the breaker fails the checks of the broken rules and passes (or na) every other check."""
    assert_breaks_exactly(embedded_server.url, tmp_path, case)
