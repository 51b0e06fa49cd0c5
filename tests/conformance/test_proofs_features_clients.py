"""The client rules of the 2.11/2.12 server features (conformance/checks/test_features_client.py) can fail for every
client that exposes the feature: certify each client plainly, and as `<client>+<mode>` with the misbehaviour that
breaks one rule (a driver's misbehave mode, nats-py's wrapper of the same name: jetcheck.testing.variants_features).

A row must fail every check of the rule its mode breaks, while every other feature check keeps the status it has in
the client's reference run. A feature the client lacks is `na` for it: no mode can break that, so the row leaves the
rule out, and the reference run must show the check `na` (LACKS says why; the check's na reason cites the
client's API).
"""

from __future__ import annotations

from collections.abc import Mapping

from .client_rule_table import ClientRuleProofs, ClientRuleTable
from .proofs import Breaks

AREA = "client and (ttl or pause or priority)"
TTL = "ttl.client-publish"
PAUSE = "pause.client-pause-resume"
PINNING = "priority.client-pinning"
OVERFLOW = "priority.client-overflow"
FEATURE_RULES = frozenset({TTL, PAUSE, PINNING, OVERFLOW})
# mode -> the feature rule it breaks, the same for every client that has the feature
VARIANT_BREAKS = {
    "ttl-dropped": Breaks(frozenset({TTL})),
    "resume-ignored": Breaks(frozenset({PAUSE})),
    "pin-forgotten": Breaks(frozenset({PINNING})),
    "min-pending-dropped": Breaks(frozenset({OVERFLOW})),
}
# client -> the feature rules it has no API for (its check is na), with where its API shows it
LACKS: Mapping[str, Mapping[str, str]] = {
    "nats-py": {
        PINNING: "nats-py 2.16.0 has no priority groups: PullSubscription.fetch(batch, timeout, heartbeat) takes no "
        "group (nats/js/client.py)",
        OVERFLOW: "nats-py 2.16.0 has no priority groups: PullSubscription.fetch(batch, timeout, heartbeat) takes no "
        "group nor min_pending (nats/js/client.py)",
    },
}

TABLE = ClientRuleTable(AREA, FEATURE_RULES, VARIANT_BREAKS, LACKS)
PROOFS = TABLE.rows()


class TestFeatureCalls(ClientRuleProofs):
    """The TTL, pause and priority group calls of each client."""

    table = TABLE
