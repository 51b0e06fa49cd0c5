"""The kv, objectstore and push checks can fail: through a breaker each fails and the others pass (or are na)."""

from __future__ import annotations

import pytest

from .proofs import assert_breaks_exactly, proof

# nats-py 2.16.0 deviates from ADR-8/ADR-20 here whatever the server does, so these fail in every row (and on
# every server): a nats-py that fixes one makes these proofs fail until the set is updated.
CLIENT_DEVIATIONS = {
    "kv.bucket-allow-direct",  # create_key_value leaves allow_direct false
    "kv.history-bounds",  # history=0 makes an unlimited-history bucket
    "kv.watch-updates-only",  # KeyValue.watch has no updates_only
    "objectstore.mtime-not-stored",  # put stores the current time as mtime
    "objectstore.list",  # list() includes deleted objects by default
    "objectstore.rename",  # update_meta refuses every rename
    "objectstore.add-link-rules",  # ObjectStore has no add_link
}
KV_ONLY = {r for r in CLIENT_DEVIATIONS if r.startswith("kv.")}
OBJ_ONLY = CLIENT_DEVIATIONS - KV_ONLY

PROOFS = [
    proof(
        "kv-stream-config,obj-config,kv-purge-keep-one",
        "kv,objectstore",
        CLIENT_DEVIATIONS
        | {
            "kv.bucket-stream",
            "kv.ttl-duplicate-window",
            "kv.history-kept",
            "kv.status",
            "kv.watch-include-history",
            "kv.deny-delete",
            "kv.direct-get",
            "kv.create-purge-aware",
            "objectstore.bucket-stream",
            "objectstore.watch-updates-only",
        },
    ),
    proof(
        "strip-expected,obj-fabricate-missing",
        "kv,objectstore",
        CLIENT_DEVIATIONS
        | {"kv.create-wire", "kv.create-client", "kv.update-wire", "kv.update-client", "objectstore.delete-missing"},
    ),
    proof(
        "kv-strip-operation,obj-strip-rollup,push-misroute-acks",
        "kv,objectstore,push",
        CLIENT_DEVIATIONS
        | {
            "kv.delete-marker",
            "kv.purge-marker",
            "kv.keys",
            "kv.create-client",
            "kv.watch-initial-then-updates",
            "kv.watch-ignore-deletes",
            "objectstore.replace",
            "objectstore.delete",
            "push.durable-resumes",
        },
    ),
    proof(
        "kv-get-garbled,watch-hide-end",
        "kv,objectstore",
        CLIENT_DEVIATIONS
        | {
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
            "objectstore.watch",
        },
    ),
    proof(
        "obj-strip-digest,push-deliver-last,push-drop-deliver-group",
        "objectstore,push",
        OBJ_ONLY
        | {
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
            "push.queue-group-enforced",
        },
    ),
]


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_breaking_a_kv_objectstore_or_push_rule_fails_exactly_its_checks(embedded_server, tmp_path, case):
    """Certify through the breakers fails the checks of the broken rules and passes (or na) every other check."""
    assert_breaks_exactly(embedded_server.url, tmp_path, case)
