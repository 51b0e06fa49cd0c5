"""The ADR-19 API-prefix client rule (conformance/checks/test_prefix.py) can fail for every client: certify each client
plainly, and as `<client>+kv-prefix-ignored`, whose KV puts go to `$KV.<bucket>.<key>` whatever the API prefix (a
driver's misbehave mode, nats-py's wrapper of the same name: jetcheck.testing.variants_prefix).

Every client takes an API prefix (nats-py `nc.jetstream(prefix=)`, nats.go `jetstream.NewWithAPIPrefix`, nats.js
`jetstream(nc, {apiPrefix})`), so none lacks the rule. nats-py 2.16.0 fails it in its reference run too (its KeyValue
puts to `$KV.<bucket>.<key>` whatever the prefix: docs/clients/nats-py.md); its row then fails as the plain client
does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jetcheck.records import CheckResult

from .client_rule_table import ClientRuleProofs, ClientRuleTable
from .proofs import Breaks
from .test_proofs_client import certify as certify_managed

AREA = "prefix"
KV_PUT = "prefix.kv-put"
PREFIX_RULES = frozenset({KV_PUT})
# mode -> the rule it breaks, the same for every client
VARIANT_BREAKS = {"kv-prefix-ignored": Breaks(frozenset({KV_PUT}))}
# client -> the rules it has no API for: none (every client takes an API prefix)
LACKS: Mapping[str, Mapping[str, str]] = {}


@dataclass(frozen=True)
class ManagedRuleTable(ClientRuleTable):
    """The check needs a managed server (it starts ADR-19's sibling server from the target's binary): each run
    starts its own instead of reaching the embedded server by URL, where the check is na."""

    def certify(self, server: str, client: str, out: Path, *pytest_args: str) -> tuple[int, list[CheckResult], str]:
        return certify_managed(client, out, "-m", self.select, *pytest_args)


TABLE = ManagedRuleTable(AREA, PREFIX_RULES, VARIANT_BREAKS, LACKS, area=AREA)
PROOFS = TABLE.rows()


class TestApiPrefix(ClientRuleProofs):
    """The KV put of each client under an API prefix."""

    table = TABLE
