"""jetcheck's source tree as the tests that read it see it: its folders, the packages they install as, and a search
of the product's modules for what only one place may do."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pyproject's package-dir, read from it: each source folder and the package it installs as
PACKAGES = {
    folder: package
    for package, folder in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-dir"
    ].items()
}
PRODUCT = tuple(PACKAGES)


def matches_outside(the_one_place: Path, patterns: Mapping[str, re.Pattern[str]]) -> list[str]:
    """`path:line: what` for every match of the patterns (what -> pattern; what "" names a match by its text) in
    the product's modules, but in `the_one_place`, the module that may do it."""
    found = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == the_one_place:
                continue
            text = path.read_text(encoding="utf-8")
            for what, pattern in patterns.items():
                for match in pattern.finditer(text):
                    line = text.count("\n", 0, match.start()) + 1
                    found.append(f"{path.relative_to(ROOT)}:{line}: {what or match[0]}")
    return found
