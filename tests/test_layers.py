"""The layers: the application (`jetcheck/`: the command line and the run job) on top; fixtures, conformance, load,
reports and durability below it. Nothing below imports the application, except the shared leaf modules (record
shapes, the verdict, the option table, the errors, redaction), and a shared leaf imports nothing from the
application.

Read from the source with `ast`, so an import inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .source_tree import PACKAGES, ROOT

LOWER = tuple(name for name in PACKAGES.values() if name != "jetcheck")
SHARED_LEAVES = {
    "jetcheck",  # the package itself: its __init__ holds only the version
    "jetcheck.errors",
    "jetcheck.options",
    "jetcheck.records",
    "jetcheck.redact",
    "jetcheck.verdict",
    "jetcheck.versions",
}


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [PACKAGES[folder], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for folder in PACKAGES
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "node_modules" not in path.parts
    }


def imported(name: str, path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved; `from a import b` counts as a.b and a."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def layer(name: str) -> str:
    if name in SHARED_LEAVES:
        return "shared leaf"
    if name.startswith(tuple(f"{package}." for package in LOWER)) or name in LOWER:
        return "below"
    return "application"


def application_modules(known: set[str]) -> set[str]:
    return {name for name in known if name.startswith("jetcheck") and layer(name) == "application"}


def test_the_application_layer_holds_the_command_line_and_the_run_job():
    """`jetcheck run` (certify, load, report) is the application's, not one of the reports' modules."""
    known = set(modules())
    assert {"jetcheck.cli", "jetcheck.run"} <= application_modules(known)
    assert "jetcheck.reports.runjob" not in known


@pytest.mark.parametrize("importer", sorted(name for name in modules() if layer(name) != "application"))
def test_nothing_below_the_application_imports_it(importer):
    """A module of a layer below (fixtures, conformance, load, reports, durability) or a shared leaf imports no
    application module."""
    path = modules()[importer]
    application = application_modules(set(modules()))
    wrong = sorted(name for name in imported(importer, path) if name in application)
    assert not wrong, f"{importer} ({layer(importer)}) imports the application layer: {', '.join(wrong)}"
