"""The kv, objectstore and push checks can fail: through a breaker each fails and the others pass (or are na).

What the client under test fails on its own (nats-py deviates from ADR-8/ADR-20 in a few rules whatever the server
does) is not listed here: it comes from the reference run, the same areas through the proxy without a breaker, and
fails in every row besides what the row's breakers break. A row proves only the rules its breakers break.
"""

from __future__ import annotations

import pytest

from .proofs import Proof, assert_breaks_exactly, certify_broken, outcome, proof, recurring_failures

PROOFS = [
    proof(
        "kv-stream-config,obj-config,kv-purge-keep-one",
        "kv,objectstore",
        {
            "kv.bucket-stream",
            "kv.ttl-duplicate-window",
            "kv.history-kept",
            "kv.status",
            "kv.watch-include-history",
            "kv.deny-delete",
            "kv.direct-get",
            "kv.create-purge-aware",
            "kv.model-read-paths",  # direct gets go unserved, a key keeps one revision more
            "objectstore.bucket-stream",
            "objectstore.watch-updates-only",
        },
    ),
    proof(
        "strip-expected,obj-fabricate-missing",
        "kv,objectstore",
        {"kv.create-wire", "kv.create-client", "kv.update-wire", "kv.update-client", "objectstore.delete-missing"}
        | {"kv.model-read-paths"},  # a create of a live key, an update with a stale revision are stored
    ),
    proof(
        "kv-strip-operation,obj-strip-rollup,push-misroute-acks",
        "kv,objectstore,push",
        {
            "kv.delete-marker",
            "kv.purge-marker",
            "kv.keys",
            "kv.create-client",
            "kv.watch-initial-then-updates",
            "kv.watch-ignore-deletes",
            "kv.watch-meta-only",  # its initial data holds a DEL entry
            "kv.purge-ttl",  # the TTL'd purge marker loses its KV-Operation
            "kv.keys-filter",  # x.2's delete marker too: x.2 reads as live
            "kv.model-read-paths",  # every read path shows markers as values
            "objectstore.replace",
            "objectstore.delete",
            "push.durable-resumes",
        },
    ),
    proof(
        "kv-get-garbled,watch-hide-end",
        "kv,objectstore",
        {
            "kv.put-get",
            "kv.get-missing",
            "kv.create-client",
            "kv.update-client",
            "kv.history-kept",
            "kv.keys",
            "kv.watch-initial-then-updates",
            "kv.watch-eod-empty",
            "kv.watch-key-filter",
            "kv.watch-include-history",
            "kv.watch-ignore-deletes",
            "kv.watch-meta-only",
            "kv.marker-watch",  # its watch never ends the initial data
            "kv.model-read-paths",  # last_by_subj answers garbled, a watch's last delivery says something is pending
            "objectstore.watch",
        },
    ),
    proof(
        "obj-strip-digest,push-deliver-last,push-drop-deliver-group",
        "objectstore,push",
        {
            "objectstore.put-get",
            "objectstore.wire-layout",
            "objectstore.chunking",
            "objectstore.digest-verified",
            "objectstore.replace",
            "objectstore.update-meta",
            "objectstore.link-get",
            "push.durable-config",
            "push.durable-resumes",
            "push.ephemeral",
            "push.queue-group",
        },
    ),
    # the two sides of the ephemeral push consumer's inactive threshold: removed too early, or only at the server's
    # 5 s default
    proof("consumer-threshold-tenth", "push", {"push.ephemeral"}),
    proof("consumer-drop-inactive-threshold", "push", {"push.ephemeral"}),
]


AREAS = ("kv", "objectstore", "push")


@pytest.fixture(scope="module")
def reference_failures(embedded_server, tmp_path_factory) -> frozenset[str]:
    """The checks the client fails with no breaker in the way: its own deviations, whatever the server does. A
    failure that does not come back when certified again was a flake (a warning), not a deviation every row must
    show (a fresh-clone run once took a range watch's failure for one, and three rows 'should have failed' it)."""
    reference = Proof((), AREAS, frozenset())
    out = tmp_path_factory.mktemp("reference")
    _, results = certify_broken(embedded_server.url, out, reference)
    failed, odd = outcome(results)
    assert results, "the reference run ran no checks"
    assert not odd, f"reference checks that neither passed, failed nor were na: {odd}"
    return frozenset(recurring_failures(embedded_server.url, out, reference, results, failed))


@pytest.mark.filterwarnings("default::UserWarning")  # a client's flake is reported (recurring_changes)
@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_kv_objectstore_or_push_rule_fails_exactly_its_checks(
    embedded_server, tmp_path, reference_failures, case: Proof
):
    """Certify through the breakers fails the checks of the broken rules (and those the client fails on its own)
    and passes (or na) every other check."""
    in_reach = {check for check in reference_failures if area_of(check) in case.areas}
    assert_breaks_exactly(embedded_server.url, tmp_path, case, also_failing=in_reach, client_flakes=True)


def area_of(check: str) -> str:
    """The area of a check name: its module's (test_kv.py::... is kv)."""
    return check.split("::")[0].removeprefix("test_").removesuffix(".py")
