"""The oracles of the kv and sourcing areas can fail on a deviation no other check of theirs sees: a direct get that
reads a purge marker as a delete (only the read-path model compares direct gets of markers), and mirrors and sources
whose copies lose the application's X- headers (only the differential check compares headers of copies).

The existing rows of the kv and sourcing areas (test_proofs_kv, test_checks_fail_when_rules_break) break these
oracles too, each for its own deviation; these rows show what only an oracle finds.
"""

from __future__ import annotations

import pytest

from .proofs import Proof, assert_breaks_exactly, certify_broken, outcome, proof, recurring_failures
from .test_proofs_kv import area_of

PROOFS = [
    proof("kv-direct-purge-as-delete", "kv", {"kv.model-read-paths"}),
    proof("copies-drop-user-headers", "sourcing", {"sourcing.oracle-headers"}),
]
AREAS = ("kv", "sourcing")


@pytest.fixture(scope="module")
def reference_failures(embedded_server, tmp_path_factory) -> frozenset[str]:
    """The checks the client fails with no breaker in the way (nats-py's own KV deviations), which every kv row sees
    fail too; a failure that does not come back when certified again was a flake."""
    reference = Proof((), AREAS, frozenset())
    out = tmp_path_factory.mktemp("reference")
    _, results = certify_broken(embedded_server.url, out, reference)
    failed, odd = outcome(results)
    assert results, "the reference run ran no checks"
    assert not odd, f"reference checks that neither passed, failed nor were na: {odd}"
    return frozenset(recurring_failures(embedded_server.url, out, reference, results, failed))


@pytest.mark.filterwarnings("default::UserWarning")  # a client's flake is reported (recurring_changes)
@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_an_oracle_fails_on_a_deviation_only_it_compares(embedded_server, tmp_path, reference_failures, case: Proof):
    """Certify through the breaker fails the oracle of the broken rule (and what the client fails on its own) and
    passes (or na) every other check of its area."""
    in_reach = {check for check in reference_failures if area_of(check) in case.areas}
    assert_breaks_exactly(embedded_server.url, tmp_path, case, also_failing=in_reach, client_flakes=True)
