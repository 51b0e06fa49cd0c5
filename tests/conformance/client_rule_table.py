"""Proofs for a table of client rules whose misbehave modes each break whole rules, the same for every client that
has the call: certify each client plainly (its reference run) and as `<client>+<mode>`.

A row must fail every check of the rules its mode breaks, while every other check keeps the status it has in the
client's reference run. A call a client lacks is `na` for it: no mode can break that, so the row leaves the rule out,
and the reference run must show the check `na` (`lacks` says why; the check's na reason cites the client's API).

A proof module states its table (`ClientRuleTable`), takes its rows from it (`PROOFS`, read by the proof gate) and its
fixture and tests from `ClientRuleProofs`, through one test class named for the table's rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

from jetcheck.conformance.catalog import load_catalog
from jetcheck.records import CheckResult

from .proofs import (
    Breaks,
    ClientRow,
    assert_client_row_broke_exactly,
    certified_rows,
    certify_run,
    with_references,
)
from .test_proofs_client import check_name, missing_toolchain

CLIENTS = ("nats-py", "nats.js", "nats.go")
CONCURRENT_RUNS = 2


@dataclass(frozen=True)
class ClientRuleTable:
    """`select` (a -m expression) runs exactly the checks of `rules`; `variant_breaks` maps each mode to the rules
    it breaks; `lacks` maps a client to the rules it has no API for, with where its API shows it; `area`, when the
    table is a whole catalog area, names it."""

    select: str
    rules: frozenset[str]
    variant_breaks: Mapping[str, Breaks]
    lacks: Mapping[str, Mapping[str, str]]
    area: str = ""

    @cached_property
    def row(self) -> type[ClientRow]:
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

    def rows(self) -> list[ClientRow]:
        """A row for each client and mode that breaks something the client has."""
        return [
            self.row(client, variant=variant)
            for client in CLIENTS
            for variant, breaks in self.variant_breaks.items()
            if breaks.must - set(self.lacks.get(client, {}))
        ]

    def references(self) -> list[ClientRow]:
        """Each client's reference row."""
        return [self.row(client) for client in CLIENTS]

    def certify(self, server: str, client: str, out: Path, *pytest_args: str) -> tuple[int, list[CheckResult], str]:
        return certify_run(server, out, "-m", self.select, *pytest_args, client=client)

    def assert_covers_its_area(self) -> None:
        """Every rule is a client rule some mode breaks and every lacking one is one of them; with `area`, the
        area's rules are exactly the table's."""
        catalog = load_catalog()
        if self.area:
            assert {rule for rule in catalog if rule.startswith(self.area + ".")} == self.rules
        assert all(catalog[rule].subject == "client" for rule in self.rules)
        assert set().union(*(row.must for row in self.variant_breaks.values())) == self.rules
        assert all(set(lacks) <= self.rules for lacks in self.lacks.values())


class ClientRuleProofs:
    """The proofs of one table, inherited by a proof module's one test class, which names the table (`table`): the
    ids read `<module>::<class>::<test>[<row>]`, and the class is one xdist unit (loadscope), as the module was."""

    table: ClientRuleTable

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Each test's `case`: the reference rows for the reference test, the table's rows for the mode test."""
        if "case" in metafunc.fixturenames:
            reference = metafunc.function is ClientRuleProofs.test_a_lacking_call_is_na_in_the_reference_run
            cases = self.table.references() if reference else self.table.rows()
            metafunc.parametrize("case", cases, ids=lambda case: case.id)

    @pytest.fixture(scope="class")
    @classmethod
    def certified(cls, request, embedded_server, tmp_path_factory) -> Iterator[dict[str, Future]]:
        """Every selected row's run and its client's reference run, by row id."""

        def run(case: ClientRow, out: Path):
            return cls.table.certify(embedded_server.url, case.spelling, out)

        with certified_rows(
            with_references(request, missing_toolchain), run, CONCURRENT_RUNS, tmp_path_factory
        ) as futures:
            yield futures

    def test_the_table_covers_its_rules(self):
        """Every rule of the table is a client rule some mode breaks; every lacking call is one of them."""
        self.table.assert_covers_its_area()

    def test_a_lacking_call_is_na_in_the_reference_run(self, certified, case):
        """The client's reference run has each check `na` exactly where the table says it lacks the call."""
        if reason := missing_toolchain(case.client):
            pytest.skip(reason)
        _, results, stderr = certified[case.id].result()
        assert {r.id for r in results} == self.table.rules, stderr
        na = {r.id for r in results if r.status == "na"}
        assert na == set(self.table.lacks.get(case.client, {})), {
            r.id: f"{r.status}: {r.message[:200]}" for r in results
        }

    @pytest.mark.filterwarnings("default::UserWarning")  # a client's flake is reported (recurring_changes)
    def test_a_mode_fails_exactly_its_rules(self, embedded_server, certified, tmp_path, case):
        """With the mode, the client fails every check of the rules it breaks; its other checks keep their
        reference status."""
        if reason := missing_toolchain(case.client):
            pytest.skip(reason)
        _, reference, stderr = certified[self.table.row(case.client).id].result()
        assert reference, f"the {case.client} reference run ran no checks: {stderr}"
        baseline = {check_name(r): r.status for r in reference}
        _, results, stderr = certified[case.id].result()
        assert results, f"no checks ran: {stderr}"

        def rerun(keyword: str) -> list[CheckResult]:
            return self.table.certify(embedded_server.url, case.spelling, tmp_path / "again", "-k", keyword)[1]

        assert_client_row_broke_exactly(case, case.id, results, baseline, rerun, check_name)
