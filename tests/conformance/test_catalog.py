"""The rule catalog and its tie to the checks: every rule has a check, every check names a rule."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from jetcheck.conformance import checks
from jetcheck.conformance.catalog import CatalogError, certify_rules, load_catalog, parse_area


def check_rule_ids() -> dict[str, set[str]]:
    """Rule ids named by the shipped checks, by check function."""
    named: dict[str, set[str]] = {}
    for module_info in pkgutil.iter_modules(checks.__path__):
        if not module_info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{checks.__name__}.{module_info.name}")
        for attr, value in vars(module).items():
            if attr.startswith("test_") and callable(value):
                marks = [m for m in getattr(value, "pytestmark", []) if m.name == "rule"]
                named[f"{module_info.name}.{attr}"] = {m.args[0] for m in marks}
    return named


def test_every_check_names_exactly_one_catalog_rule():
    """Each check function carries one rule marker whose id is in the catalog."""
    catalog = load_catalog()
    problems = {check: ids for check, ids in check_rule_ids().items() if len(ids) != 1 or not ids <= catalog.keys()}
    assert not problems, f"checks without exactly one known rule: {problems}"


def test_every_catalog_rule_has_a_check():
    """No rule in the catalog is left without a check, but those another command judges (checked_by)."""
    covered = set().union(*check_rule_ids().values())
    missing = sorted(set(certify_rules()) - covered)
    assert not missing, f"catalog rules without a check: {missing}"


def test_no_certify_check_tests_a_rule_another_command_judges():
    """A rule with checked_by (e.g. the durability rules) has no certify check: one judge per rule."""
    judged_elsewhere = set(load_catalog()) - set(certify_rules())
    assert judged_elsewhere, "the durability area is in the catalog"
    assert not judged_elsewhere & set().union(*check_rule_ids().values())


def test_catalog_entries_are_complete():
    """Every rule has a statement, a level, a source and a minimum version."""
    for rule in load_catalog().values():
        assert rule.statement.endswith(".")
        assert rule.level in ("MUST", "SHOULD")
        assert rule.source
        assert all(part.isdigit() for part in rule.since.split("."))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[[rule]]\nid = "x.y"', "missing top-level 'area'"),
        (
            'area = "x"\n[[rule]]\nid = "y.z"\nstatement = "s."\nlevel = "MUST"\nsource = "s"\nsince = "2.2.0"',
            "must look like 'x.some-rule'",
        ),
        (
            'area = "x"\n[[rule]]\nid = "x.z"\nstatement = "s."\nlevel = "MAY"\nsource = "s"\nsince = "2.2.0"',
            "level 'MAY'",
        ),
        (
            'area = "x"\n[[rule]]\nid = "x.z"\nstatement = "s."\nlevel = "MUST"\nsource = "s"\nsince = "2.2"',
            "since '2.2' is not X.Y.Z",
        ),
        (
            'area = "x"\n[[rule]]\nid = "x.z"\nstatement = "s."\nlevel = "MUST"\nsource = "s"\nsince = "2.2.0"\n'
            'checked_by = "nobody"',
            "checked_by 'nobody'",
        ),
        (
            'area = "x"\n[[rule]]\nid = "x.z"\nstatement = "s."\nlevel = "MUST"\nsource = "server/stream.go"\n'
            'since = "2.2.0"',
            "a MUST rule's source names a document",
        ),
    ],
)
def test_malformed_catalog_entries_are_refused(text, problem):
    """A catalog entry missing its area, id form, level or version is a CatalogError."""
    with pytest.raises(CatalogError, match=problem):
        parse_area(text, "x.toml")
