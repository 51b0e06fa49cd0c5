"""The consumer create/update client rules (conformance/checks/test_consumer_actions.py) can fail for every client
that has the call: certify each client plainly, and as `<client>+consumer-actions-rotated` (a driver's misbehave
mode, nats-py's wrapper of the same name: a create made with the client's update call, an update with its create
call, a create-or-update with its create call).

A row must fail every check of the rules its mode breaks, while every other check keeps the status it has in the
client's reference run. A call the client lacks is `na` for it: no mode can break that, so the row leaves the rule
out, and the reference run must show the check `na` (LACKS says why; the check's na reason cites the client's API).
"""

from __future__ import annotations

from collections.abc import Mapping

from .client_rule_table import ClientRuleProofs, ClientRuleTable
from .proofs import Breaks

AREA = "consumers-client"
CREATE = "consumers-client.create-action"
UPDATE = "consumers-client.update-action"
UPSERT = "consumers-client.create-or-update"
ACTION_RULES = frozenset({CREATE, UPDATE, UPSERT})
# mode -> the rules it breaks, the same for every client that has the calls
VARIANT_BREAKS = {"consumer-actions-rotated": Breaks(ACTION_RULES)}
# client -> the rules whose call it has no API for (its check is na), with where its API shows it
LACKS: Mapping[str, Mapping[str, str]] = {
    "nats-py": {
        CREATE: "nats-py 2.16.0 has no create-only consumer call: JetStreamManager.add_consumer sends no action "
        "(nats/js/manager.py)",
        UPDATE: "nats-py 2.16.0 has no update-only consumer call: JetStreamManager.add_consumer sends no action "
        "(nats/js/manager.py)",
    },
    "nats.js": {
        UPSERT: "@nats-io/jetstream 3.4.0 has no create-or-update consumer call: JetStreamManager.consumers has add() "
        "and update(); ConsumerApiAction is not exported and add() sends its empty action as create "
        "(lib/jsmconsumer_api.js)",
    },
}

TABLE = ClientRuleTable(AREA, ACTION_RULES, VARIANT_BREAKS, LACKS, area=AREA)
PROOFS = TABLE.rows()


class TestConsumerActionCalls(ClientRuleProofs):
    """The consumer create, update and create-or-update calls of each client."""

    table = TABLE
