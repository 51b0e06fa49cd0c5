"""A wheel of jetcheck builds without setuptools' warnings and ships what an installed jetcheck reads: the catalog,
the report templates, certify's ini and the client drivers' sources (built into the cache on first use)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from .source_tree import PRODUCT, ROOT

SHIPPED = (
    "jetcheck/conformance/certify.ini",
    "jetcheck/conformance/catalog/kv.toml",
    "jetcheck/conformance/clients/drivers/PROTOCOL.md",
    "jetcheck/conformance/clients/drivers/go/go.mod",
    "jetcheck/conformance/clients/drivers/go/go.sum",
    "jetcheck/conformance/clients/drivers/go/main.go",
    "jetcheck/conformance/clients/drivers/js/package.json",
    "jetcheck/conformance/clients/drivers/js/package-lock.json",
    "jetcheck/conformance/clients/drivers/js/driver.mjs",
    "jetcheck/conformance/clients/drivers/rust/Cargo.toml",
    "jetcheck/conformance/clients/drivers/rust/Cargo.lock",
    "jetcheck/conformance/clients/drivers/rust/src/main.rs",
    "jetcheck/conformance/clients/drivers/java/pom.xml",
    "jetcheck/conformance/clients/drivers/java/src/main/java/io/jetcheck/jnats/Main.java",
    "jetcheck/conformance/clients/drivers/java/src/main/resources/jnats-driver.properties",
)


def test_the_wheel_builds_without_warnings_and_ships_the_drivers_sources(tmp_path):
    """Built from a copy of the tree (a build writes build/ and egg-info where it runs)."""
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    skip = shutil.ignore_patterns("__pycache__", "node_modules", "*.egg-info", "driver")
    for folder in PRODUCT:
        shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    for name in ("pyproject.toml", "README.md", "MANIFEST.in", "scripts/build_backend.py"):
        (source / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(wheels)]
    proc = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=600)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "Warning" not in said, said
    (wheel,) = wheels.glob("jetcheck-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [name for name in SHIPPED if name not in names] == []
    sources = [f"jetcheck/{path.relative_to(ROOT).as_posix()}" for path in _driver_sources()]
    assert [name for name in sources if name not in names] == [], "a driver source the wheel leaves out"
    assert not [name for name in names if "/node_modules/" in name or name.endswith("/go/driver")]


def _driver_sources():
    """Every driver source in the tree: what a build of a driver reads (not what it makes or downloads)."""
    drivers = ROOT / "conformance" / "clients" / "drivers"
    made = {"node_modules", "target", "__pycache__"}
    suffixes = {".go", ".mod", ".sum", ".mjs", ".json", ".rs", ".toml", ".lock", ".java", ".xml", ".properties", ".md"}
    for path in sorted(drivers.rglob("*")):
        if path.is_file() and path.suffix in suffixes and not made & set(path.relative_to(drivers).parts):
            yield path
