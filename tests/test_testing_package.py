"""The test doubles live in the public testing package, and the product never reaches them (issue 16).

The product is everything under jetcheck/ but jetcheck/testing/, and fixtures/, conformance/, load/, reports/.
It offers extension points (breakers a proxy applies, client variants a plugin registers); the testing package
uses them. No module swaps `__class__`, and none reads another library's private attributes, but for the documented
exceptions of one class (jetcheck's nats-py connection).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .source_tree import PACKAGES, ROOT

TESTING = "jetcheck.testing"
# The one place a product module may touch nats-py's internals, and why. nats-py writes CONNECT (credentials
# included) in plain text whenever the server's INFO lacks tls_required (nats/aio/client.py
# Client._process_connect_init: `if "tls_required" in self._server_info and self._server_info["tls_required"]`,
# then `_process_info` and `_connect_command` with no public hook in between), and it has no public way to tell
# whether its connection is TLS. So fixtures/target.py's TlsEnforcingClient overrides `_process_info` and
# `_connect_command`, and reads the transport's writers (`_io_writer`, and `_bare_io_writer` to abort a failed
# handshake's socket), to keep a tls:// or --tls-* connection from ever sending a byte in plain text (issue 12).
# tls_handshake_first=True is public but needs a server configured for it.
# The same class extends `_close`: nats-py leaves a request (`_resp_map`) or a flush (`_pongs`) whose connection
# closed waiting out its whole timeout, and offers no hook to end them, so a check against a target killed mid-run
# held certify for up to 10 s more (the CI run that went red); TlsEnforcingClient fails them at once.
# fixtures/unraisable_interrupts.py reads `sys._current_frames` (in the sys docs, "for internal and specialized
# purposes"): the only way another thread can see that the main thread has left the unraisable hook, so that a
# signal sent again is not handled, and printed, inside it.
DOCUMENTED_EXCEPTIONS = {
    "fixtures/unraisable_interrupts.py": {"_current_frames"},
    "fixtures/target.py": {
        "_process_info",
        "_connect_command",
        "_transport",
        "_io_writer",
        "_close",
        "_resp_map",
        "_pongs",
    },
}


def product_modules() -> dict[str, Path]:
    """Every product module by its import name."""
    modules = {}
    for directory, package in PACKAGES.items():
        for path in sorted((ROOT / directory).rglob("*.py")):
            relative = path.relative_to(ROOT / directory).with_suffix("")
            if directory == "jetcheck" and relative.parts[0] == "testing":
                continue
            parts = [p for p in relative.parts if p != "__init__"]
            modules[".".join([package, *parts])] = path
    return modules


def doubles_package_modules() -> dict[str, Path]:
    return {
        ".".join(["jetcheck", *path.relative_to(ROOT / "jetcheck").with_suffix("").parts]).removesuffix(
            ".__init__"
        ): path
        for path in sorted((ROOT / "jetcheck" / "testing").rglob("*.py"))
    }


def imported_names(module: str, path: Path, tree: ast.AST) -> list[tuple[int, str]]:
    """Every module `module` imports (relative imports resolved), with the line that imports it."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found += [(node.lineno, name)] + [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def parsed(paths: dict[str, Path]) -> dict[str, tuple[Path, ast.AST]]:
    return {module: (path, ast.parse(path.read_text(encoding="utf-8"))) for module, path in paths.items()}


def own_private_names(trees) -> set[str]:
    """Every `_name` the project itself defines: functions, classes, attributes and variables it assigns."""
    names: set[str] = set()
    for _path, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.rpartition(".")[2])
    return {name for name in names if name.startswith("_")}


def own_class_names(trees) -> set[str]:
    return {node.name for _path, tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def private_reads(path: Path, tree: ast.AST, own: set[str], own_classes: set[str]) -> list[tuple[int, str]]:
    """`x._name` (or getattr(x, "_name")) for a `_name` the project does not define, and `super()._name` in a class
    that extends another library's class."""
    found = []
    annotations = {id(n) for a in _annotations(tree) for n in ast.walk(a)}  # never evaluated: names, not reads
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        if all(ast.unparse(base) in own_classes for base in cls.bases):
            continue
        for node in ast.walk(cls):  # extending another library's private method
            if isinstance(node, ast.Attribute) and _private(node.attr) and _is_super(node.value):
                found.append((node.lineno, node.attr))
    for node in ast.walk(tree):
        if id(node) in annotations:
            continue
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            found.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in own
        ):
            found.append((node.lineno, node.args[1].value))
    return found


def _annotations(tree: ast.AST) -> list[ast.AST]:
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
    return found


def _is_super(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", "") == "super"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_product_module_imports_the_testing_package():
    """The product's code paths never import jetcheck.testing: the testing package builds on the product."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for module, (path, tree) in parsed(product_modules()).items()
        for line, name in imported_names(module, path, tree)
        if name == TESTING or name.startswith(TESTING + ".")
    ]
    assert not offenders, offenders


def test_the_product_resolves_no_client_variant_without_the_testing_plugin():
    """Without a plugin registering them, `nats-py+<variant>` is an unknown variant: the product knows none."""
    code = (
        "from jetcheck.errors import ConfigError\n"
        "from jetcheck.conformance.clients import adapter_for\n"
        "try:\n"
        "    adapter_for('nats-py+duplicate-delivery')\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.startswith("unknown client variant 'duplicate-delivery'"), out.stdout + out.stderr
    imports = "import sys, jetcheck.fixtures.proxy, jetcheck.conformance.clients, jetcheck.reports.build"
    assert (
        "jetcheck.testing"
        not in subprocess.run(
            [sys.executable, "-c", f"{imports}; print(sorted(sys.modules))"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    )


def test_the_testing_package_offers_the_doubles_the_proofs_use():
    """Breakers by name, client variants and synthetic runs are public in jetcheck.testing."""
    from jetcheck import testing

    assert {"strip-msg-id", "kv-stream-config", "drop-heartbeats"} <= set(testing.BREAKERS)
    (breaker,) = testing.breakers_named("strip-msg-id")
    assert breaker.name == "strip-msg-id"
    with pytest.raises(ValueError, match="unknown breaker"):
        testing.breakers_named("no-such-breaker")
    assert {"duplicate-delivery", "never-reset", "adr37-heartbeats"} <= set(testing.CLIENT_VARIANTS)
    assert callable(testing.write_load_run)
    assert callable(testing.write_certify_run)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert TESTING in packages  # shipped, so a user's tests can import it


def test_nothing_assigns_class():
    """No module changes an object's class: misbehaving clients wrap an adapter instead."""
    offenders = []
    for _module, (path, tree) in parsed(product_modules() | doubles_package_modules()).items():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in targets):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "setattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "__class__"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def test_no_module_reads_another_librarys_private_attributes():
    """Product and testing modules use public APIs (or read the protocol themselves); the connection class's TLS
    enforcement and its failing of what waits on a closed connection are the documented exceptions."""
    trees = parsed(product_modules() | doubles_package_modules())
    own = own_private_names(trees.values())
    own_classes = own_class_names(trees.values())
    offenders, excepted = [], set()
    for _module, (path, tree) in trees.items():
        relative = str(path.relative_to(ROOT))
        for line, name in private_reads(path, tree, own, own_classes):
            if name in DOCUMENTED_EXCEPTIONS.get(relative, set()):
                excepted.add((relative, name))
            else:
                offenders.append(f"{relative}:{line} .{name}")
    assert not offenders, offenders
    documented = {(path, name) for path, names in DOCUMENTED_EXCEPTIONS.items() for name in names}
    assert excepted == documented, f"documented exceptions no longer needed: {sorted(documented - excepted)}"


@pytest.mark.parametrize(
    ("pytest_args", "line"),
    [
        ((), "jetcheck: unknown client variant 'duplicate-delivery'; known: none are registered"),
        (("-p", "jetcheck.no_such_plugin"), "jetcheck: cannot load pytest plugin 'jetcheck.no_such_plugin'"),
    ],
)
def test_certify_offers_a_variant_only_from_a_plugin_the_run_loads(tmp_path, pytest_args, line):
    """certify's preflight knows the variants the run's plugins register (`-- -p NAME`), and no others; a plugin
    that cannot be imported is one line and exit 2, before anything starts."""
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "certify", "--client", "nats-py+duplicate-delivery",
         "--out", str(tmp_path), "--", *pytest_args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr.splitlines()[0][: len(line)]) == (2, line), proc.stderr
    assert not list(tmp_path.iterdir())


SHRINKABLE = """
from hypothesis import given, settings, strategies as st

from jetcheck.conformance.hypothesis_profiles import HYPOTHESIS_PROFILES


@settings(settings.get_profile(HYPOTHESIS_PROFILES["fast"]))
@given(st.integers(min_value=0))
def test_below_a_thousand(n):
    assert n < 1000
"""


@pytest.mark.parametrize(("flags", "shrunk"), [((), True), (("--no-shrink",), False)])
def test_no_shrink_reports_the_first_failing_example_as_found(tmp_path, flags, shrunk):
    """With --no-shrink, a property check under jetcheck's profile fails on the example it found, not a minimal one."""
    (tmp_path / "test_property.py").write_text(SHRINKABLE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "/dev/null", "--rootdir", str(tmp_path), "-p", "no:cacheprovider",
         "-p", f"{TESTING}.plugin", *flags, "test_property.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("n=1000," in proc.stdout) == shrunk, proc.stdout
