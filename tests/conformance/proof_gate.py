"""The gate on the proofs: every check certify collects, every parameter instance, is failed on purpose by some
proof row, and for every client every check that goes through the client adapter is; every row names the reason
each rule it breaks fails for. conftest runs it when the
proof modules are collected; test_proof_coverage tests it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable, Mapping

from jetcheck.conformance import checks as checks_package
from jetcheck.conformance.catalog import load_catalog

from . import __path__ as here
from .proofs import certify_checks, checks_of, declared_failures, reason_for

ROW_MODULES = ("test_proofs_", "test_checks_fail_when_rules_break")  # the modules that hold proof rows
ROW_LISTS = ("PROOFS", "CLUSTER_PROOFS")  # their lists of rows


def is_proof_module(name: str) -> bool:
    return name.startswith(ROW_MODULES)


def proof_rows() -> list:
    """Every proof row of the proof modules; a row wrapped in pytest.param with marks (an expected failure) proves
    nothing and is left out."""
    rows = []
    for info in pkgutil.iter_modules(here):
        if is_proof_module(info.name):
            module = importlib.import_module(f"{__package__}.{info.name}")
            for row in (row for name in ROW_LISTS for row in getattr(module, name, ())):
                if hasattr(row, "marks") and hasattr(row, "values"):  # pytest.param(row, marks=...)
                    if row.marks:
                        continue
                    (row,) = row.values
                rows.append(row)
    return rows


def adapter_rules() -> set[str]:
    """The client rules whose checks talk to the client under test through the adapter (the `client` fixture)."""
    rules: set[str] = set()
    catalog = load_catalog()
    for module_info in pkgutil.iter_modules(checks_package.__path__):
        module = importlib.import_module(f"{checks_package.__name__}.{module_info.name}")
        for attr, function in vars(module).items():
            if not attr.startswith("test_") or "client" not in inspect.signature(function).parameters:
                continue
            for mark in getattr(function, "pytestmark", []):
                if mark.name == "rule" and catalog[mark.args[0]].subject == "client":
                    rules.add(mark.args[0])
    return rules


def unproven_checks(rows: list, checks: Mapping[str, str], by_releases: Iterable[str] = ()) -> list[str]:
    """The checks (of `checks`: check name -> rule id) no row declares it fails, nor a real release with a bug
    (`by_releases`: the checks test_release_pairs sees fail on one)."""
    proven = set().union(*(declared_failures(row, checks) for row in rows), by_releases)
    return sorted(set(checks) - proven)


def stale_spares(rows: list, checks: Mapping[str, str]) -> list[str]:
    """Spared checks that are not checks of the rules their row breaks (renamed, or a typo): they spare nothing."""
    return sorted(
        f"{getattr(row, 'id', row)}: {name}"
        for row in rows
        for name in getattr(row, "spared", {})
        if name not in checks_of(row.breaks, checks)
    )


def unproven_client_checks(
    rows: list, checks: Mapping[str, str], clients: list[str], rules: set[str], excused: Mapping[str, Mapping]
) -> dict[str, list[str]]:
    """By client, the checks of `rules` (the adapter's) no row for that client declares it fails; the checks of the
    rules `excused[client]` names (with why) are left out."""
    missing = {}
    for client in clients:
        proven = set().union(*(declared_failures(row, checks) for row in rows if getattr(row, "client", "") == client))
        wanted = checks_of(rules - set(excused.get(client, {})), checks)
        if gaps := sorted(wanted - proven):
            missing[client] = gaps
    return missing


def unreasoned(rows: list) -> list[str]:
    """`row: rule` for every rule a row breaks without naming the reason its checks' failures carry."""
    return sorted(
        f"{getattr(row, 'id', row)}: {rule}" for row in rows for rule in row.breaks if not reason_for(row, rule)
    )


def excused_client_rules() -> dict[str, dict[str, str]]:
    """By client, the adapter rules no row can break for it (na for that client), with why."""
    from .test_proofs_client import NOT_APPLICABLE
    from .test_proofs_consumers_clients import LACKS as CALLS_LACKED  # consumer calls a client has no API for
    from .test_proofs_features_clients import LACKS as FEATURES_LACKED  # features a client has no API for
    from .test_proofs_kv_clients import LACKS as KV_LACKED  # KV calls a client has no API for
    from .test_proofs_prefix_clients import LACKS as PREFIX_LACKED  # API prefixes a client cannot take (ADR-19)
    from .test_proofs_publish_clients import LACKS as RETRIES_LACKED  # publish retries a client has not

    tables = (NOT_APPLICABLE, FEATURES_LACKED, CALLS_LACKED, KV_LACKED, RETRIES_LACKED, PREFIX_LACKED)
    clients = set().union(*tables)
    return {client: {rule: why for table in tables for rule, why in table.get(client, {}).items()}
            for client in clients}  # fmt: skip


def gaps() -> list[str]:
    """Every way the proof rows fall short, one line each; [] when every check is proven."""
    from .test_proofs_client import REFERENCE
    from .test_release_pairs import PAIRS

    rows, checks = proof_rows(), certify_checks()
    by_releases = {pair.check for pair in PAIRS}
    lines = [f"no proof row or release pair fails {name}" for name in unproven_checks(rows, checks, by_releases)]
    lines += [f"a release pair's check is not certify's: {name}" for name in sorted(by_releases - set(checks))]
    lines += [f"spared check is no check of the rules the row breaks: {spare}" for spare in stale_spares(rows, checks)]
    lines += [f"no reason names why its checks fail: {row_rule}" for row_rule in unreasoned(rows)]
    by_client = unproven_client_checks(rows, checks, list(REFERENCE), adapter_rules(), excused_client_rules())
    lines += [f"{client}: no proof row fails {name}" for client, names in by_client.items() for name in names]
    return lines
