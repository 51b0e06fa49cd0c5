"""The object store client checks fail for every client: certify each client (nats-py, nats.js, nats.go) through
wire breakers in front of an embedded server, as a user would run it, or with its watcher, seal or status
misreporting (`<client>+<mode>`: a driver's misbehave mode, nats-py's wrapper of the same name).

What a client fails on its own (its deviations from ADR-20, docs/clients/index.md) is not listed here: it comes
from the client's reference run, through the proxy without a breaker, and every row must fail exactly the checks of
the rules it breaks plus those. Driver rows need node (nats.js) or Go (nats.go); without them the
row is skipped with the driver build's own reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from jetcheck.records import CheckResult

from .proofs import (
    ClientRow,
    broken_proxy,
    certified_fixture,
    certify_run,
    check_differences,
    declared_failures,
    expected_exit,
    outcome,
    wrong_reasons,
)
from .test_proofs_client import NOT_APPLICABLE, missing_toolchain

# The checks of the object store client rules (all of them go through the adapter's object store).
PORTED = {
    "objectstore.bucket-stream": "test_bucket_is_an_obj_stream_on_chunk_and_meta_subjects",
    "objectstore.put-get": "test_put_reports_the_digest_and_get_returns_the_bytes",
    "objectstore.wire-layout": "test_object_is_chunks_plus_one_info_message",
    "objectstore.mtime-not-stored": "test_stored_info_has_no_modification_time",
    "objectstore.chunking": "test_large_objects_are_split_into_chunks",
    "objectstore.replace": "test_second_put_replaces_the_object",
    "objectstore.delete": "test_deleted_object_is_not_found",
    "objectstore.delete-missing": "test_deleting_a_missing_object_is_an_error",
    "objectstore.list": "test_list_returns_live_objects",
    "objectstore.digest-verified": "test_get_refuses_bytes_that_do_not_match_the_digest",
    "objectstore.update-meta": "test_update_meta_changes_description_not_bytes",
    "objectstore.rename": "test_update_meta_renames_to_a_free_name_only",
    "objectstore.link-get": "test_get_of_a_link_returns_the_linked_object",
    "objectstore.add-link-rules": "test_add_link_refuses_deleted_targets_and_links",
    "objectstore.watch": "test_watch_sends_current_infos_then_end_of_data_then_changes",
    "objectstore.watch-updates-only": "test_watch_updates_only_sends_only_later_changes",
    "objectstore.seal": "test_sealed_bucket_refuses_puts_and_deletes",
    "objectstore.status": "test_status_reports_the_bucket_stream",
    "objectstore.status-backing": "test_status_names_backing_store_metadata_and_compression",
}
CLIENTS = ("nats-py", "nats.js", "nats.go")
# breakers -> the rules they break for any client (a breaker also breaks the rules whose checks lean on what it
# fakes: a fabricated info makes a free name look taken; a delete marker without `deleted` makes a deleted object live)
BREAKS = {
    "": set(),
    "obj-config,obj-fabricate-missing": {
        "objectstore.bucket-stream",
        "objectstore.watch-updates-only",  # its watcher's consumer delivers everything, not only the new
        "objectstore.delete-missing",
        "objectstore.rename",
        "objectstore.add-link-rules",
    },
    "obj-strip-rollup": {"objectstore.replace", "objectstore.delete"},
    "obj-strip-digest": {
        "objectstore.put-get",
        "objectstore.wire-layout",
        "objectstore.chunking",
        "objectstore.replace",
        "objectstore.rename",
        "objectstore.digest-verified",
        "objectstore.update-meta",
        "objectstore.link-get",
        "objectstore.add-link-rules",
    },
    "obj-stamp-mtime,obj-strip-deleted": {
        "objectstore.mtime-not-stored",
        "objectstore.watch",  # a delete reaches the watcher as a live object
        "objectstore.list",
        "objectstore.delete",
        "objectstore.update-meta",
        "objectstore.link-get",
        "objectstore.add-link-rules",
    },
    "obj-strip-link": {"objectstore.link-get", "objectstore.add-link-rules"},
    "obj-keep-renamed": {"objectstore.rename"},
}
# the client's own watcher misreports (driver misbehave modes; nats-py: the wrappers of conformance/clients/variants)
VARIANT_BREAKS = {
    "watch-no-end-of-data": {"objectstore.watch"},
    "watch-drop-first": {"objectstore.watch", "objectstore.watch-updates-only"},
    "seal-ignored": {"objectstore.seal"},
    "status-misreport": {"objectstore.status", "objectstore.status-backing"},  # size 0 and no backing store
}


@dataclass(frozen=True)
class ObjectStoreProof(ClientRow):
    @property
    def breaks(self) -> frozenset[str]:
        """Rule ids this row breaks (read by the proof gate), less what is na for the client."""
        broken = VARIANT_BREAKS[self.variant] if self.variant else BREAKS[self.breakers]
        return frozenset(broken - set(NOT_APPLICABLE.get(self.client, {})))


# Each run is a client's object store checks (a driver's or nats-py's process next to certify's): two at a time.
CONCURRENT_RUNS = 2
PROOFS = [ObjectStoreProof(client, breakers) for client in CLIENTS for breakers in BREAKS] + [
    ObjectStoreProof(client, "", variant) for client in CLIENTS for variant in VARIANT_BREAKS
]


def certify(server: str, client: str, out: Path) -> tuple[int, list[CheckResult], str]:
    selected = " or ".join(PORTED.values())
    return certify_run(server, out, "-m", "objectstore", "-k", selected, client=client)


def certify_row(server_url: str, case: ObjectStoreProof, out: Path) -> tuple[int, list[CheckResult], str]:
    """The row's client through the proxy with its breakers (none for a variant or a reference run)."""
    with broken_proxy(server_url, tuple(case.breakers.split(",")) if case.breakers else ()) as url:
        return certify(url, case.spelling, out)


certified = certified_fixture(certify_row, missing_toolchain, CONCURRENT_RUNS)


def reference_failures(certified: Mapping[str, Future], client: str) -> frozenset[str]:
    """The object store checks `client` fails with no breaker in the way (its own deviations from ADR-20, whatever
    the server does), run through the same proxy with no breaker."""
    _, results, stderr = certified[ObjectStoreProof(client).id].result()
    failed, odd = outcome(results)
    assert {r.id for r in results} == set(PORTED), f"the {client} reference ran {len(results)}: {stderr}"
    assert not odd, f"{client} reference checks that neither passed, failed nor were na: {odd}"
    return frozenset(failed)


@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_an_object_store_breaker_fails_exactly_its_rules_for_each_client(certified, case):
    """Through the breakers, the client fails exactly the checks of the broken rules and those it fails on its own
    (its reference run); the rest pass or are na."""
    if reason := missing_toolchain(case.client):
        pytest.skip(reason)
    own = reference_failures(certified, case.client)
    status, results, stderr = certified[case.id].result()
    _, odd = outcome(results)
    assert {r.id for r in results} == set(PORTED), f"ran {sorted(r.id for r in results)}: {stderr}"
    assert not odd, f"checks that neither passed, failed nor were na: {odd}"
    differences = check_differences(results, declared_failures(case) | own)
    assert not differences, f"{case.id}: {differences}"
    wrong = wrong_reasons(case, results, own)
    assert not wrong, f"{case.id}: checks that failed, but not for their rule's reason: {wrong}"
    assert status == expected_exit(results)
