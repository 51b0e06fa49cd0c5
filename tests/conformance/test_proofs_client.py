"""The client-side checks can fail, for every client: certify each client plainly and with deliberate variants.

A client's reference run is the baseline: what that client passes and fails on its own. Each variant row certifies
the same client with one misbehaviour (a driver's `misbehave` mode, or a wrapper around the adapter) and must fail
every check of the rules the table below says that misbehaviour breaks, while every other check keeps its baseline
status (rules marked `may` depend on how the client recovers, so their status is free). Expectations come from the
variants' table, the reference run and what each client documents (conformance.clients Documented), never from a
list of one client's bugs: which variants a client has is the testing package's registry, its reference is the
client itself unless it documents no missed-heartbeat report, and a rule is out of its reach when its check is
`na` for what the client documents.

Each row runs the real `jetcheck certify --client <client>` against an embedded server (managed, so restarts run).
Driver rows need node (nats.js) or Go (nats.go); without them the row is skipped with the reason.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from jetcheck.conformance.clients import ADAPTERS, Documented, adapter_for
from jetcheck.conformance.clients.build import find_go, go_required, need_tool
from jetcheck.errors import ConfigError
from jetcheck.records import CheckResult
from jetcheck.specs import DEFAULT_VERSION
from jetcheck.testing import CLIENT_VARIANTS

from .proofs import (
    Breaks,
    ClientRow,
    assert_client_row_broke_exactly,
    certified_rows,
    certify_run,
    expected_exit,
    with_references,
)

SERVER_VERSION = os.environ.get("JETCHECK_SERVER_VERSION", DEFAULT_VERSION)
CERTIFY_TIMEOUT_S = 300
# The certify runs spend their time waiting out short timeouts and heartbeat intervals (a few seconds of CPU in a
# 20-60 s run): three at a time use under half of 2 cores (0.4), which keeps timing-sensitive checks honest.
CONCURRENT_RUNS = 3
AREAS = "client and (ordered or heartbeat or push)"  # the client rules that go through the client adapter

GAP = "ordered.gap-recovered"
CONFIG = "ordered.recreated-config"
RELEASED = "ordered.old-consumer-released"
DELETED = "ordered.consumer-deleted-recovered"
RESTART = "ordered.server-restart-recovered"
STALL = "ordered.heartbeat-stall-recovered"
FILTER = "ordered.filter-subject"
START = "ordered.start-policy"
REPORTS = "heartbeat.client-reports-missed"
QUIET = "heartbeat.client-quiet-while-flowing"
NOT_TERMINAL = "heartbeat.client-not-terminal"
RESETS = {GAP, CONFIG, RELEASED, FILTER, START}  # checks that lose a delivery in transit to force a reset
PUSH_ONCE = {"push.durable-config", "push.ephemeral", "push.queue-group"}  # each message delivered exactly once
# async-nats's and jnats's proofs are run by hand (docs/guides/certify-client.md): each client here costs minutes
# of CI
CLIENTS = tuple(client for client in ADAPTERS if client not in ("async-nats", "jnats"))
# Adapter rules whose check is `na` for a client documenting this behaviour (the check reads the same field), so no
# row can break them for it: rule -> (Documented field, value, why).
NA_WHEN_DOCUMENTED = {
    "objectstore.watch-updates-only": (
        "object_watch_updates_only",
        False,
        "the client's object store watch has no updates-only option (ADR-20 does not list one)",
    ),
}
ADR37_REFERENCE = "adr37-heartbeats"  # the testing package's nats-py that reports missed heartbeats as ADR-37 asks


def documented(client: str) -> Documented:
    return adapter_for(client).documented  # a driven client's adapter starts nothing until it connects


NOT_APPLICABLE = {
    client: {rule: why for rule, (field, value, why) in NA_WHEN_DOCUMENTED.items()
             if getattr(documented(client), field) == value}
    for client in CLIENTS
}  # fmt: skip


# variant -> the rules it breaks, the same for every client that has the variant.
BREAKS = {
    "swallow-missed-heartbeat": Breaks(frozenset({REPORTS})),
    # It reports within 100 ms of anything, so also long before 2 intervals pass.
    "chatty-missed-heartbeat": Breaks(frozenset({QUIET, REPORTS})),
    "terminal-on-missed-heartbeat": Breaks(
        frozenset({NOT_TERMINAL}),
        frozenset({STALL, DELETED, RESTART}),
        "an ordered consumer ends too when its client reports missed heartbeats while it recovers",
    ),
    "duplicate-delivery": Breaks(frozenset(RESETS | PUSH_ONCE | {DELETED, RESTART, STALL, QUIET, NOT_TERMINAL})),
    "drop-deliveries-after-reset": Breaks(
        frozenset(RESETS),
        frozenset({DELETED, RESTART, STALL}),
        "these faults end in a reset only for a client that recreates its consumer on them",
    ),
    # nats-py's own: an ordered consumer that never recreates its consumer (a held stall still delivers).
    "never-reset": Breaks(frozenset(RESETS | {DELETED, RESTART})),
    # A bind that joins the consumer's own group whatever queue was named (nats.js fails the rule with no variant).
    "bind-any-queue": Breaks(frozenset({"push.queue-group-enforced"})),
    "adr37-heartbeats": Breaks(frozenset()),  # a reference: it breaks nothing
}
# What a client is certified with as its baseline: one that documents no missed-heartbeat report has nothing for
# the heartbeat variants to swallow or misuse, so it is certified with the ADR-37 watch around it.
REFERENCE = {
    client: client if documented(client).missed_heartbeats else f"{client}+{ADR37_REFERENCE}" for client in CLIENTS
}


def variants_of(client: str) -> tuple[str, ...]:
    """The registered variants `client` can take (a driven one: the driver's modes; an in-process one: wrappers),
    but the one its reference is built on."""
    driven = ADAPTERS[client] is None
    taken = REFERENCE[client].split("+")[1:]
    return tuple(name for name, variant in CLIENT_VARIANTS.items()
                 if (variant.driver_mode if driven else variant.wrap) and name not in taken
                 and name in BREAKS)  # fmt: skip


VARIANTS = {client: variants_of(client) for client in CLIENTS}


@dataclass(frozen=True)
class ClientProof(ClientRow):
    """Certifying `client`'s adapter rules with `variant` ("" for its reference run) breaks the table's rules."""

    @property
    def spelling(self) -> str:
        """The --client value: the reference, plus the variant."""
        return REFERENCE[self.client] + (f"+{self.variant}" if self.variant else "")

    @property
    def breaks(self) -> frozenset[str]:
        """Rule ids every check of which this row must see fail (read by test_proof_coverage)."""
        return BREAKS[self.variant].must if self.variant else frozenset()

    @property
    def may(self) -> frozenset[str]:
        return BREAKS[self.variant].may if self.variant else frozenset()

    @property
    def spared(self) -> Mapping[str, str]:
        """Checks of `breaks` the variant leaves passing, with why (read by proofs.declared_failures)."""
        return BREAKS[self.variant].spared if self.variant else {}

    @property
    def reasons(self) -> Mapping[str, str]:
        """Rule -> the fragment its checks' failures carry under this variant, where not the rule's usual one."""
        return BREAKS[self.variant].reasons if self.variant else {}

    @property
    def areas(self) -> str:
        """The checks this row certifies: a variant only the areas of the rules it touches, kept short."""
        touched = sorted({rule.split(".")[0] for rule in self.breaks | self.may})
        return f"client and ({' or '.join(touched)})" if self.variant else AREAS


PROOFS = [ClientProof(client, variant=variant) for client in REFERENCE for variant in ("", *VARIANTS[client])]


@functools.cache
def missing_toolchain(client: str) -> str:
    """Why `client`'s driver cannot be built here (the build's own one line), or "" when it can."""
    try:
        if client == "nats.js":
            need_tool("node", client)
            need_tool("npm", client)
        elif client == "nats.go":
            find_go(go_required())
    except ConfigError as exc:
        return str(exc)
    return ""


def certify(client: str, out: Path, *pytest_args: str) -> tuple[int, list[CheckResult], str]:
    """A managed server of its own per run: the restart checks need one."""
    options = ("--server-version", SERVER_VERSION)
    return certify_run("local", out, *pytest_args, client=client, options=options, timeout_s=CERTIFY_TIMEOUT_S)


def check_name(result: CheckResult) -> str:
    return result.check.rsplit("/", 1)[-1]


@pytest.fixture(scope="module")
def certified(request, tmp_path_factory) -> dict[str, Future]:
    """Every selected row's certify run and its client's reference run, by row id (CONCURRENT_RUNS at a time)."""
    # Variant rows first: each waits out the timeouts of the checks it breaks, the reference runs are quicker.
    order = sorted(with_references(request, missing_toolchain), key=lambda case: not case.variant)

    def run(case, out):
        return certify(case.spelling, out, "-m", case.areas)

    with certified_rows(order, run, CONCURRENT_RUNS, tmp_path_factory) as futures:
        yield futures


@pytest.mark.filterwarnings("default::UserWarning")  # a client's flake is reported (recurring_changes)
@pytest.mark.parametrize("case", PROOFS, ids=lambda p: p.id)
def test_a_client_variant_breaks_exactly_its_rules(certified, tmp_path_factory, case):
    """The variant fails every check of the rules it breaks; every other check of its areas keeps its reference
    status."""
    if reason := missing_toolchain(case.client):
        pytest.skip(reason)
    status, results, stderr = certified[case.id].result()
    assert results, f"no checks ran: {stderr}"
    assert {r.client["name"] for r in results} == {case.spelling}
    odd = {r.check: f"{r.status}: {r.message[:300]}" for r in results if r.status not in ("pass", "fail", "na")}
    assert not odd, f"checks that neither passed, failed nor were na: {odd}"
    assert status == expected_exit(results)
    if not case.variant:
        return  # the reference run is the baseline the variants are compared with
    _, reference, _ = certified[ClientProof(case.client).id].result()
    baseline = {check_name(r): r.status for r in reference}

    def rerun(keyword: str) -> list[CheckResult]:
        return certify(case.spelling, tmp_path_factory.mktemp("again"), "-m", case.areas, "-k", keyword)[1]

    assert_client_row_broke_exactly(case, case.spelling, results, baseline, rerun, check_name)


def test_a_driver_row_without_its_toolchain_says_what_is_missing(monkeypatch):
    """Without node on PATH the nats.js rows are skipped with the driver build's own one-line reason."""
    monkeypatch.setenv("PATH", "")
    missing_toolchain.cache_clear()
    try:
        assert missing_toolchain("nats.js") == "the nats.js driver needs node, which is not on PATH " \
            "(install Node.js >= 20 with npm)"  # fmt: skip
        assert missing_toolchain("nats-py") == ""
    finally:
        missing_toolchain.cache_clear()


def test_every_client_variant_says_what_it_breaks():
    """Each variant the testing package offers has its row in one proof module's table, so no variant goes
    unproved: the consumer variants here, the others in the proof module of their area."""
    from .test_proofs_consumers_clients import VARIANT_BREAKS as CONSUMER_VARIANTS
    from .test_proofs_features_clients import VARIANT_BREAKS as FEATURE_VARIANTS
    from .test_proofs_kv_clients import VARIANT_BREAKS as KV_VARIANTS
    from .test_proofs_objectstore_clients import VARIANT_BREAKS as OBJECT_VARIANTS
    from .test_proofs_prefix_clients import VARIANT_BREAKS as PREFIX_VARIANTS
    from .test_proofs_publish_clients import VARIANT_BREAKS as PUBLISH_VARIANTS

    tables = (BREAKS, KV_VARIANTS, OBJECT_VARIANTS, FEATURE_VARIANTS, CONSUMER_VARIANTS, PUBLISH_VARIANTS)
    tables += (PREFIX_VARIANTS,)
    assert set().union(*tables) == set(CLIENT_VARIANTS)
