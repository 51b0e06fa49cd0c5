"""How the project's tests are spread over xdist's two workers: by module and class (pyproject's `--dist loadscope`),
except that the report test modules using the session's Spark session go to one worker as one unit.

Each worker that runs one of them starts a Spark JVM of its own, and a cold session with its first aggregation is
the costliest setup of the tests: about 60 CPU-s (14.5 to start, 46 for the first job, 12 for the same job warm),
and 200 s or more of a busy machine's wall clock, the largest share of the fast tier (`pytest -m "not slow"`) when
both workers paid it. The unit is large, and loadscope hands out the largest units first, so it does not trail."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

REPORT_TESTS = Path(__file__).parent / "reports"
# tests/reports/conftest.py's session fixtures: the session, and what is built on it
ON_THE_SESSION = frozenset({"spark", "load_tables", "built_report"})
SPARK_UNIT = "tests/reports: the modules on the Spark session"


def asks_for_the_session(source: str) -> bool:
    """Whether a test module's functions (its tests and fixtures) take one of the session's fixtures."""
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(arg.arg in ON_THE_SESSION for arg in node.args.args)
        for node in ast.walk(ast.parse(source))
    )


@cache
def spark_modules(root: Path) -> frozenset[str]:
    """The node-id paths (relative to `root`) of the report test modules on the Spark session."""
    return frozenset(
        path.relative_to(root).as_posix()
        for path in REPORT_TESTS.glob("test_*.py")
        if asks_for_the_session(path.read_text(encoding="utf-8"))
    )


def scope_of(nodeid: str, root: Path, default: str) -> str:
    return SPARK_UNIT if nodeid.split("::", 1)[0] in spark_modules(root) else default


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, a development dependency
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # xdist documents a scheduler of one's own through this hook, and LoadScopeScheduling's scope is its
    # `_split_scope`; `--dist loadgroup`, the public way to pin tests to a worker, spreads every other test one by
    # one, where a module's servers and proof pools need the module in one process
    class SparkOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid, config.rootpath, super()._split_scope(nodeid))

    return SparkOnOneWorker(config, log)
