"""The KV client rules can fail for every client: certify each client's KV checks through the KV breakers.

The wire breakers sit in a proxy in front of the server that both the client under test and the suite reach, so
they apply to any client; where the client's own watcher must misbehave, a row certifies `<client>+<mode>` (a
driver's misbehave mode, nats-py's wrapper of the same name) against the server itself. Each row certifies one
client through one set of breakers (or one mode) and must fail every check of the KV client rules the table says
they break, while every other KV client check keeps the status it has for that client without breakers (its
reference run). Expectations come from the table, the same for every client.
Server (wire) rules are left to test_proofs_kv: they judge the server, whatever the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from jetcheck.conformance.catalog import load_catalog
from jetcheck.conformance.clients.deviations import deviation_for
from jetcheck.records import CheckResult

from .proofs import (
    Breaks,
    ClientRow,
    assert_client_row_broke_exactly,
    broken_proxy,
    certified_fixture,
    certify_run,
)
from .test_proofs_client import check_name, missing_toolchain

CLIENTS = ("nats-py", "nats.js", "nats.go")
AREA = "kv and client"
WATCHES = frozenset(
    {
        "kv.watch-initial-then-updates",
        "kv.watch-eod-empty",
        "kv.watch-key-filter",
        "kv.watch-include-history",
        "kv.watch-ignore-deletes",
        "kv.watch-updates-only",
        "kv.watch-meta-only",
        "kv.marker-watch",  # ADR-48's markers, read through a watch
    }
)
# The KV client rules (all of them go through the client adapter).
KV_ADAPTER_RULES = WATCHES | frozenset(
    {
        "kv.bucket-stream",
        "kv.bucket-allow-direct",
        "kv.ttl-duplicate-window",
        "kv.history-bounds",
        "kv.history-kept",
        "kv.put-get",
        "kv.create-client",
        "kv.update-client",
        "kv.delete-marker",
        "kv.purge-marker",
        "kv.get-missing",
        "kv.keys",
        "kv.status",
    }
)
# ADR-48 (limit markers, per-key and purge TTLs) and ADR-8's key filters and bucket management
ADR48 = frozenset({"kv.limit-markers-config", "kv.create-ttl", "kv.purge-ttl", "kv.marker-get", "kv.marker-watch"})
ADR48 |= {"kv.status-limit-marker-ttl"}
MANAGEMENT = frozenset({"kv.keys-filter", "kv.keys-filters", "kv.bucket-delete", "kv.bucket-names"})
KV_ADAPTER_RULES |= ADR48 | MANAGEMENT
# client -> the KV adapter rules it has no API for (na for it, so no row can break them there), with why
LACKS = {
    "nats-py": {
        "kv.bucket-names": "nats-py 2.16.0 has no KV bucket lister (nats/js/client.py JetStreamContext: key_value, "
        "create_key_value, delete_key_value only)",
    },
}
STREAM_CONFIG = frozenset(
    {"kv.bucket-stream", "kv.bucket-allow-direct", "kv.ttl-duplicate-window", "kv.history-bounds", "kv.history-kept"}
    | {"kv.status"}  # the history it reports is the stream's
)
# Everything that reads a key: a client that keeps asking DIRECT.GET of a bucket stream created without allow_direct
# (nats.js sets its direct flag from the config it asked for) finds no responder there.
READS = KV_ADAPTER_RULES - STREAM_CONFIG - {"kv.history-kept"} - WATCHES
HISTORY_PLUS_ONE = "kv.watch-include-history"  # the stream keeps one revision more than the bucket's history
WITHOUT_DIRECT = "a client that reads by direct get whatever the created stream says finds no responder"


# breakers -> the KV adapter rules they break, the same for every client.
BREAKS = {
    "kv-stream-config": Breaks(STREAM_CONFIG | {HISTORY_PLUS_ONE}, READS, WITHOUT_DIRECT),
    "strip-expected": Breaks(frozenset({"kv.create-client", "kv.update-client"})),
    # create() of a deleted key reads its marker's operation to know it may recreate it; a watcher tells deletes by it
    "kv-strip-operation": Breaks(
        frozenset({"kv.delete-marker", "kv.purge-marker", "kv.keys", "kv.create-client"})
        | {"kv.watch-initial-then-updates", "kv.watch-ignore-deletes"}
        | {"kv.watch-meta-only"}  # its initial data holds a DEL entry
        | {"kv.purge-ttl", "kv.keys-filter"}  # the TTL'd purge marker; x.2's delete marker, so x.2 reads as live
    ),
    # Without allow_direct every client that honours the stream's config reads through STREAM.MSG.GET, garbled here.
    "kv-stream-config,kv-get-garbled": Breaks(
        STREAM_CONFIG | {HISTORY_PLUS_ONE, "kv.put-get", "kv.get-missing"},
        READS - {"kv.put-get", "kv.get-missing"},
        WITHOUT_DIRECT + "; a garbled get breaks what the check reads back",
    ),
    # a watch of x.* (or of the empty range z.>) sees every key of the bucket; so do keys(['x.*'])
    "kv-watch-widen-range": Breaks(frozenset({"kv.watch-key-filter", "kv.watch-eod-empty", "kv.keys-filter"})),
}
# the client's own watcher misreports (driver misbehave modes; nats-py: the wrappers of conformance/clients/variants)
VARIANT_BREAKS = {
    "watch-no-end-of-data": Breaks(WATCHES),
    "watch-drop-first": Breaks(WATCHES - {"kv.watch-eod-empty"}),  # an empty watch has no first update to drop
    # ADR-48's TTLs never reach the client: a bucket without limit markers, values and purges without Nats-TTL
    "kv-ttl-ignored": Breaks(
        frozenset({"kv.limit-markers-config", "kv.create-ttl", "kv.purge-ttl", "kv.status-limit-marker-ttl"})
    ),
    # every marker reaches the application as a value: limit markers, and delete and purge markers alike
    "kv-markers-as-values": Breaks(
        frozenset({"kv.marker-get", "kv.marker-watch", "kv.delete-marker", "kv.purge-marker"})
        | {"kv.watch-initial-then-updates"}  # its initial data holds a DEL entry, its later changes a PURGE
        | {"kv.watch-meta-only"},  # its initial data holds a DEL entry
        reasons={rule: "a key not found error in basic gets" for rule in ("kv.delete-marker", "kv.purge-marker")},
    ),
    "kv-keys-unfiltered": Breaks(frozenset({"kv.keys-filter", "kv.keys-filters"})),
    "kv-buckets-misreport": Breaks(frozenset({"kv.bucket-delete", "kv.bucket-names"})),
    # a watch asked for MetaOnly is made without it: its entries carry their values
    "kv-watch-meta-ignored": Breaks(frozenset({"kv.watch-meta-only"})),
}


@dataclass(frozen=True)
class KvProof(ClientRow):
    @property
    def row(self) -> Breaks:
        if self.variant:
            return VARIANT_BREAKS[self.variant]
        return BREAKS[self.breakers] if self.breakers else Breaks(frozenset())

    @property
    def breaks(self) -> frozenset[str]:
        return self.row.must - set(LACKS.get(self.client, {}))

    @property
    def may(self) -> frozenset[str]:
        return self.row.may

    @property
    def spared(self) -> Mapping[str, str]:
        return BREAKS[self.breakers].spared if self.breakers else {}

    @property
    def reasons(self) -> Mapping[str, str]:
        return self.row.reasons


# Each run is a client's KV checks (a driver's or nats-py's process next to certify's): two at a time.
CONCURRENT_RUNS = 2
PROOFS = [KvProof(client, breakers) for client in CLIENTS for breakers in ("", *BREAKS)] + [
    KvProof(client, variant=variant) for client in CLIENTS for variant in VARIANT_BREAKS
]


def certify(server: str, client: str, out: Path, *pytest_args: str) -> tuple[int, list[CheckResult], str]:
    return certify_run(server, out, "-m", AREA, *pytest_args, client=client)


def certify_row(server_url: str, case: KvProof, out: Path, *pytest_args: str) -> tuple[list[CheckResult], str]:
    """The row's client (or variant) through the proxy with its breakers; a variant or reference run: no proxy."""
    if not case.breakers:
        _, results, stderr = certify(server_url, case.spelling, out, *pytest_args)
    else:
        with broken_proxy(server_url, tuple(case.breakers.split(","))) as url:
            _, results, stderr = certify(url, case.client, out, *pytest_args)
    return results, stderr


certified = certified_fixture(certify_row, missing_toolchain, CONCURRENT_RUNS)


def test_the_table_covers_every_kv_adapter_rule():
    """Every KV client rule that goes through the adapter is broken by some row, and is a client rule."""
    catalog = load_catalog()
    assert all(catalog[rule].subject == "client" for rule in KV_ADAPTER_RULES)
    assert set().union(*(row.must for row in [*BREAKS.values(), *VARIANT_BREAKS.values()])) == KV_ADAPTER_RULES


@pytest.mark.parametrize("case", [KvProof(client) for client in CLIENTS], ids=lambda case: case.client)
def test_a_get_after_delete_or_purge_is_not_found_and_a_documented_deviation_still_fails(certified, case):
    """ADR-8's markers read as key not found: nats-py and nats.go pass; nats.js, which documents returning the
    marker, fails both rules, its result saying so in its own words first."""
    client = case.client
    if reason := missing_toolchain(client):
        pytest.skip(reason)
    reference, stderr = certified[case.id].result()
    markers = {r.check: r for r in reference if r.id in ("kv.delete-marker", "kv.purge-marker")}
    assert {r.id for r in markers.values()} == {"kv.delete-marker", "kv.purge-marker"}, stderr
    deviation = deviation_for(client, "kv.delete-marker")
    for result in markers.values():
        if deviation is None:
            assert result.status == "pass", f"{result.check}: {result.message}"
        else:
            assert result.status == "fail" and result.message.startswith(deviation.label() + ". after "), result
            assert "ADR-8: a delete or purge marker is a key not found error in basic gets" in result.message
    assert (deviation is not None) == (client == "nats.js")


@pytest.mark.filterwarnings("default::UserWarning")  # a client's flake is reported (recurring_changes)
@pytest.mark.parametrize("case", PROOFS, ids=lambda case: case.id)
def test_kv_breakers_fail_exactly_their_client_rules(embedded_server, certified, tmp_path, case):
    """Through the breakers, the client fails every check of the rules they break; its other KV client checks
    keep their reference status."""
    if reason := missing_toolchain(case.client):
        pytest.skip(reason)
    reference, stderr = certified[KvProof(case.client).id].result()
    assert reference, f"the {case.client} reference run ran no checks: {stderr}"
    baseline = {check_name(r): r.status for r in reference}
    if not case.breakers and not case.variant:
        odd = {name: status for name, status in baseline.items() if status not in ("pass", "fail", "na")}
        assert not odd, f"the reference run has checks that neither passed, failed nor were na: {odd}"
        return

    results, stderr = certified[case.id].result()
    assert results, f"no checks ran: {stderr}"
    ours = [r for r in results if r.id in KV_ADAPTER_RULES]

    def rerun(keyword: str) -> list[CheckResult]:
        return certify_row(embedded_server.url, case, tmp_path / "again", "-k", keyword)[0]

    assert_client_row_broke_exactly(case, case.id, results, baseline, rerun, check_name, compared=ours)
