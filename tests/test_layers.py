"""The layers: the application (`jetcheck/`: the command line and the run job) on top; fixtures, conformance, load,
reports and durability below it. Nothing below imports the application, except the shared leaf modules (record
shapes, the verdict, the options, the specs, the errors, redaction); a shared leaf imports only other shared leaves
(and the standard library and third-party packages); and no module imports itself through others (no import cycle).

Read from the source with `ast`, so an import inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .source_tree import PACKAGES, ROOT

LOWER = tuple(name for name in PACKAGES.values() if name != "jetcheck")
SHARED_LEAVES = {
    "jetcheck",  # the package itself: its __init__ holds only the version
    "jetcheck.config",
    "jetcheck.credentials",
    "jetcheck.errors",
    "jetcheck.fault_kinds",
    "jetcheck.option",
    "jetcheck.option_parsers",
    "jetcheck.option_resolution",
    "jetcheck.option_table",
    "jetcheck.option_values",
    "jetcheck.options",
    "jetcheck.records",
    "jetcheck.redact",
    "jetcheck.specs",
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


@pytest.mark.parametrize("leaf", sorted(SHARED_LEAVES))
def test_a_shared_leaf_imports_only_shared_leaves(leaf):
    """A shared leaf imports no module of fixtures, conformance, load or reports, nor the application: only other
    leaves, the standard library and third-party packages."""
    known = modules()
    wrong = sorted(name for name in imported(leaf, known[leaf]) if name in known and name not in SHARED_LEAVES)
    assert not wrong, f"{leaf} (a shared leaf) imports {', '.join(wrong)}"


def import_graph() -> dict[str, set[str]]:
    """Each product module and the product modules it imports (not itself)."""
    known = modules()
    return {
        name: {other for other in imported(name, path) if other in known and other != name}
        for name, path in known.items()
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph`, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def shortest_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path from `start` back to itself through the modules `within` (breadth first)."""
    paths = {other: [start, other] for other in sorted(graph[start] & within)}
    queue = list(paths)
    while start not in paths:
        node = queue.pop(0)
        for other in sorted(graph[node] & within):
            if other not in paths:
                paths[other] = [*paths[node], other]
                queue.append(other)
    return paths[start]


def test_no_module_imports_itself_through_others():
    """No import cycle among the product's modules, function-level imports included: each is named `a -> b -> a`,
    until every module that imports itself through others is in one."""
    graph = import_graph()
    cycles = []
    for component in strongly_connected(graph):
        named: set[str] = set()
        for module in component if len(component) > 1 else ():
            if module not in named:
                cycle = shortest_cycle(graph, module, set(component))
                named.update(cycle)
                cycles.append(" -> ".join(cycle))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
