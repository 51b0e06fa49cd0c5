"""Every catalog rule has been shown to fail: some proof row breaks it on purpose."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from jetcheck.conformance import checks
from jetcheck.conformance.catalog import load_catalog

from . import __path__ as here
from .test_catalog import check_rule_ids


def _proof_rows() -> list:
    """Every proof row of the proof modules; a row wrapped in pytest.param with marks (an expected failure) proves
    nothing and is left out."""
    rows = []
    for info in pkgutil.iter_modules(here):
        if info.name.startswith("test_proofs_") or info.name == "test_checks_fail_when_rules_break":
            for row in importlib.import_module(f"{__package__}.{info.name}").PROOFS:
                if hasattr(row, "marks") and hasattr(row, "values"):  # pytest.param(row, marks=...)
                    if row.marks:
                        continue
                    (row,) = row.values
                rows.append(row)
    return rows


def _adapter_rules() -> set[str]:
    """The client rules whose checks talk to the client under test through the adapter (the `client` fixture)."""
    rules: set[str] = set()
    catalog = load_catalog()
    for module_info in pkgutil.iter_modules(checks.__path__):
        module = importlib.import_module(f"{checks.__name__}.{module_info.name}")
        for attr, function in vars(module).items():
            if not attr.startswith("test_") or "client" not in inspect.signature(function).parameters:
                continue
            for mark in getattr(function, "pytestmark", []):
                if mark.name == "rule" and catalog[mark.args[0]].subject == "client":
                    rules.add(mark.args[0])
    return rules


def _broken_rules() -> set[str]:
    """Rule ids some proof row expects to fail: by rule (server breakers, client variants) or by check."""
    by_check = check_rule_ids()
    broken: set[str] = set()
    for row in _proof_rows():
        broken |= set(getattr(row, "breaks", ()))
        for check in getattr(row, "fails", ()):
            module, function = check.split("::")
            broken |= by_check[f"{module.removesuffix('.py')}.{function.split('[')[0]}"]
    return broken


# Rules no proof can break yet, and why. A rule the client under test fails on its own is no proof: it fails with no
# breaker too (test_proofs_kv takes such failures from its reference run, not from a list).
NO_PROOF_YET: dict[str, str] = {}


def test_every_catalog_rule_is_broken_by_some_proof():
    """No rule is left without a proof that its checks fail when the rule is broken, but those NO_PROOF_YET says."""
    unproven = set(load_catalog()) - _broken_rules()
    assert sorted(unproven - NO_PROOF_YET.keys()) == [], "rules no proof row breaks"
    assert sorted(NO_PROOF_YET.keys() - unproven) == [], "rules proved now: remove them from NO_PROOF_YET"


def test_every_adapter_rule_is_broken_for_every_client():
    """Each client's proof rows break every client rule that goes through the client adapter (issue 11)."""
    from .test_proofs_client import NOT_APPLICABLE, REFERENCE

    adapter_rules = _adapter_rules()
    rows = _proof_rows()  # client variants and wire breakers alike: a row breaks its client's rules
    for client in REFERENCE:
        broken = set().union(*(row.breaks for row in rows if getattr(row, "client", "nats-py") == client))
        missing = adapter_rules - broken - set(NOT_APPLICABLE.get(client, {}))
        assert not missing, f"{client}: rules no proof row breaks: {sorted(missing)}"
