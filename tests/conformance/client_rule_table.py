"""Proofs for a table of client rules whose misbehave modes each break whole rules, the same for every client that
has the call: certify each client plainly (its reference run) and as `<client>+<mode>`.

A row must fail every check of the rules its mode breaks, while every other check keeps the status it has in the
client's reference run. A call a client lacks is `na` for it: no mode can break that, so the row leaves the rule out,
and the reference run must show the check `na` (`lacks` says why; the check's na reason cites the client's API).

A proof module states its table (`ClientRuleTable`) and takes its rows, fixture and tests from it, naming each test
for its rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from jetcheck.conformance.catalog import load_catalog
from jetcheck.records import CheckResult

from .proofs import (
    Breaks,
    ClientRow,
    assert_client_row_broke_exactly,
    certified_fixture,
    certify_run,
)
from .test_proofs_client import check_name, missing_toolchain

CLIENTS = ("nats-py", "nats.js", "nats.go")
CONCURRENT_RUNS = 2


@dataclass(frozen=True)
class ClientRuleTable:
    """`select` (a -m expression) runs exactly the checks of `rules`; `variant_breaks` maps each mode to the rules
    it breaks; `lacks` maps a client to the rules it has no API for, with where its API shows it."""

    select: str
    rules: frozenset[str]
    variant_breaks: Mapping[str, Breaks]
    lacks: Mapping[str, Mapping[str, str]]

    def row_class(self) -> type[ClientRow]:
        """The proof row class of this table (constructible from a client alone, as `with_references` needs)."""
        table = self

        @dataclass(frozen=True)
        class TableRow(ClientRow):
            @property
            def breaks(self) -> frozenset[str]:
                broken = table.variant_breaks[self.variant].must if self.variant else frozenset()
                return frozenset(broken - set(table.lacks.get(self.client, {})))

            may = property(lambda self: frozenset())
            spared = property(lambda self: {})
            reasons = property(lambda self: {})

        return TableRow

    def rows(self, row: type[ClientRow]) -> list[ClientRow]:
        """A row for each client and mode that breaks something the client has."""
        return [
            row(client, variant=variant)
            for client in CLIENTS
            for variant, breaks in self.variant_breaks.items()
            if breaks.must - set(self.lacks.get(client, {}))
        ]

    def certify(self, server: str, client: str, out: Path, *pytest_args: str) -> tuple[int, list[CheckResult], str]:
        return certify_run(server, out, "-m", self.select, *pytest_args, client=client)

    def certified_fixture(self) -> Callable:
        """The module's `certified` fixture: every selected row's run and its client's reference run, by row id."""

        return certified_fixture(
            lambda url, case, out: self.certify(url, case.spelling, out), missing_toolchain, CONCURRENT_RUNS
        )

    def assert_covers_its_area(self, area: str = "") -> None:
        """Every rule is a client rule some mode breaks and every lacking one is one of them; with `area`, the
        area's rules are exactly the table's."""
        catalog = load_catalog()
        if area:
            assert {rule for rule in catalog if rule.startswith(area + ".")} == self.rules
        assert all(catalog[rule].subject == "client" for rule in self.rules)
        assert set().union(*(row.must for row in self.variant_breaks.values())) == self.rules
        assert all(set(lacks) <= self.rules for lacks in self.lacks.values())

    def reference_test(self, row: type[ClientRow]) -> Callable:
        """The test that each client's reference run has a check `na` exactly where `lacks` says."""

        @pytest.mark.parametrize("case", [row(client) for client in CLIENTS], ids=lambda case: case.id)
        def test(certified, case):
            """The client's reference run has each check `na` exactly where the table says it lacks the call."""
            if reason := missing_toolchain(case.client):
                pytest.skip(reason)
            _, results, stderr = certified[case.id].result()
            assert {r.id for r in results} == self.rules, stderr
            na = {r.id for r in results if r.status == "na"}
            assert na == set(self.lacks.get(case.client, {})), {r.id: f"{r.status}: {r.message[:200]}" for r in results}

        return test

    def mode_test(self, row: type[ClientRow]) -> Callable:
        """The test that with a mode the client fails every check of the rules it breaks, for their reasons, and its
        other checks keep their reference status."""

        @pytest.mark.filterwarnings("default::UserWarning")  # a client's flake is reported (recurring_changes)
        @pytest.mark.parametrize("case", self.rows(row), ids=lambda case: case.id)
        def test(embedded_server, certified, tmp_path, case):
            """With the mode, the client fails every check of the rules it breaks; its other checks keep their
            reference status."""
            if reason := missing_toolchain(case.client):
                pytest.skip(reason)
            _, reference, stderr = certified[row(case.client).id].result()
            assert reference, f"the {case.client} reference run ran no checks: {stderr}"
            baseline = {check_name(r): r.status for r in reference}
            _, results, stderr = certified[case.id].result()
            assert results, f"no checks ran: {stderr}"

            def rerun(keyword: str) -> list[CheckResult]:
                return self.certify(embedded_server.url, case.spelling, tmp_path / "again", "-k", keyword)[1]

            assert_client_row_broke_exactly(case, case.id, results, baseline, rerun, check_name)

        return test
