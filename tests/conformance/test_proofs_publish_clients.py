"""The JetStream publish retry client rules (conformance/checks/test_publish_retries.py, ADR-22) can fail for every
client that retries: certify each client plainly, and as `<client>+publish-no-retry` (a driver's misbehave mode: the
publish is made with no retry, whatever was asked).

A row must fail every check of the rules its mode breaks, while every other check keeps the status it has in the
client's reference run. A client without publish retries is `na`: no mode can break that, so the row leaves the rule
out, and the reference run must show the check `na` (LACKS says why; the check's na reason cites the client's API).
"""

from __future__ import annotations

from collections.abc import Mapping

from .client_rule_table import ClientRuleTable
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

TABLE = ClientRuleTable(AREA, RETRY_RULES, VARIANT_BREAKS, LACKS)
RetryProof = TABLE.row_class()
PROOFS = TABLE.rows(RetryProof)
certified = TABLE.certified_fixture()


def test_the_table_covers_every_publish_retry_rule():
    """Every publish-client rule is a client rule the mode breaks; every lacking one is one of them."""
    TABLE.assert_covers_its_area(AREA)


test_a_client_without_retries_is_na_in_the_reference_run = TABLE.reference_test(RetryProof)
test_a_publish_without_retry_fails_exactly_its_rules = TABLE.mode_test(RetryProof)
