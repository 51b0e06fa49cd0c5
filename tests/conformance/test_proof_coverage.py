"""Every catalog rule has been shown to fail: some proof row breaks it on purpose."""

from __future__ import annotations

import importlib
import pkgutil

from jetcheck.conformance.catalog import load_catalog

from . import __path__ as here
from .test_catalog import check_rule_ids


def _proof_rows() -> list:
    rows = []
    for info in pkgutil.iter_modules(here):
        if info.name.startswith("test_proofs_") or info.name == "test_checks_fail_when_rules_break":
            rows += importlib.import_module(f"{__package__}.{info.name}").PROOFS
    return rows


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


def test_every_catalog_rule_is_broken_by_some_proof():
    """No rule is left without a proof that its checks fail when the rule is broken."""
    unproven = sorted(set(load_catalog()) - _broken_rules())
    assert not unproven, f"rules no proof row breaks: {unproven}"


def test_every_adapter_rule_is_broken_for_every_client():
    """Each client's proof rows break every client rule that goes through the client adapter (issue 11)."""
    from .test_proofs_client import AREAS, NOT_APPLICABLE, REFERENCE

    areas = {area for area in ("ordered", "heartbeat", "push") if area in AREAS}
    adapter_rules = {rule.id for rule in load_catalog().values() if rule.subject == "client" and rule.area in areas}
    rows = _proof_rows()  # client variants and wire breakers alike: a row breaks its client's rules
    for client in REFERENCE:
        broken = set().union(*(row.breaks for row in rows if getattr(row, "client", "nats-py") == client))
        missing = adapter_rules - broken - set(NOT_APPLICABLE.get(client, {}))
        assert not missing, f"{client}: rules no proof row breaks: {sorted(missing)}"
