"""The JetStream publish retry client rules (conformance/checks/test_publish_retries.py, ADR-22) can fail for every
client that retries: certify each client plainly, and as `<client>+publish-no-retry` (a driver's misbehave mode: the
publish is made with no retry, whatever was asked).

A row must fail every check of the rules its mode breaks, while every other check keeps the status it has in the
client's reference run. A client without publish retries is `na`: no mode can break that, so the row leaves the rule
out, and the reference run must show the check `na` (LACKS says why; the check's na reason cites the client's API).
"""

from __future__ import annotations

from collections.abc import Mapping

from .client_rule_table import ClientRuleProofs, ClientRuleTable
from .proofs import Breaks

AREA = "publish-client"
RETRY = "publish-client.retry-no-responders"
WAIT = "publish-client.retry-wait"
RETRY_RULES = frozenset({RETRY, WAIT})
# mode -> the rules it breaks (with no retry there is no wait to time), the same for every client that retries
VARIANT_BREAKS = {"publish-no-retry": Breaks(RETRY_RULES)}
# client -> the rules it has no API for (its check is na), with where its API shows it
LACKS: Mapping[str, Mapping[str, str]] = {
    "nats-py": {
        rule: "nats-py 2.16.0 has no JetStream publish retries: JetStreamContext.publish raises NoStreamResponseError "
        "on no responders at once (nats/js/client.py)"
        for rule in RETRY_RULES
    },
}

TABLE = ClientRuleTable(AREA, RETRY_RULES, VARIANT_BREAKS, LACKS, area=AREA)
PROOFS = TABLE.rows()


class TestPublishRetries(ClientRuleProofs):
    """The JetStream publish retries of each client."""

    table = TABLE
