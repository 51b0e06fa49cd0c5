"""The pytest plugin: statuses, version gating, needs, results and run info (run in a fresh pytest)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from jetcheck.records import RESULTS_FILE, read_results

pytest_plugins = ["pytester"]

CHECKS = """
import pytest
from jetcheck.conformance.plugin import na

@pytest.mark.asyncio
@pytest.mark.rule("purge.keep")
async def test_passes(js, make_stream_here):
    pass

@pytest.mark.asyncio
@pytest.mark.rule("purge.filter")
async def test_fails():
    assert 1 == 2, "expected one, got two"

@pytest.mark.asyncio
@pytest.mark.rule("purge.seq")
async def test_errors():
    raise ConnectionError("connection lost")

@pytest.mark.rule("purge.all")
@pytest.mark.needs("managed")
def test_needs_managed():
    pass

@pytest.mark.rule("purge.unknown-stream")
def test_says_na():
    na("the target has no such feature")

@pytest.mark.rule("purge.keep-at-least-count")
def test_records_observations(observe, server_info):
    observe("version_seen", server_info.version)
"""
CONFTEST = """
import pytest

@pytest.fixture
def make_stream_here(names):
    return names.stream()
"""


def _results(out) -> dict[str, dict]:
    return {r.check.split("::")[-1]: asdict(r) for r in read_results(out / RESULTS_FILE)}


@pytest.fixture
def checks(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_statuses_follow_the_outcome_of_each_check(checks, embedded_server):
    """pass, fail (assertion), error (connection), na (needs, na()) land in results.jsonl with the catalog's data."""
    out = checks.path / "out"
    result = checks.runpytest_subprocess(
        "--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out), "--jetcheck-password", "hunter2"
    )
    statuses = {name: r["status"] for name, r in _results(out).items()}
    assert statuses == {
        "test_passes": "pass",
        "test_fails": "fail",
        "test_errors": "error",
        "test_needs_managed": "na",
        "test_says_na": "na",
        "test_records_observations": "pass",
    }
    results = _results(out)
    assert "expected one, got two" in results["test_fails"]["message"]
    assert "connection lost" in results["test_errors"]["message"]
    assert "needs a managed server" in results["test_needs_managed"]["message"]
    assert results["test_says_na"]["message"] == "the target has no such feature"
    assert results["test_passes"]["title"].startswith("A purge with keep N leaves the newest N")
    assert results["test_passes"]["level"] == "MUST"
    assert results["test_passes"]["server_version"]
    assert results["test_records_observations"]["observed"] == {
        "version_seen": results["test_passes"]["server_version"]
    }
    run = json.loads((out / "run.json").read_text())
    assert run["options"]["password"] == "***"
    assert "hunter2" not in (out / "run.json").read_text() + (out / "results.jsonl").read_text()
    assert run["counts"] == {"pass": 2, "fail": 1, "error": 1, "na": 2}
    result.assert_outcomes(passed=2, failed=2, skipped=2)


def test_rules_newer_than_the_server_are_na(checks, embedded_server, monkeypatch):
    """A check whose rule needs a newer server than the target's is na, naming both versions."""
    checks.makepyfile(
        test_new="""
import pytest

@pytest.mark.rule("purge.keep")
def test_future():
    pass
"""
    )
    future = checks.path / "catalog"
    future.mkdir()
    (future / "purge.toml").write_text(
        'area = "purge"\n[[rule]]\nid = "purge.keep"\nstatement = "s."\n'
        'level = "MUST"\nsource = "s"\nsince = "99.0.0"\n'
    )
    checks.makeconftest(
        CONFTEST
        + f"""
from jetcheck.conformance import catalog
catalog.CATALOG_DIR = __import__("pathlib").Path({str(future)!r})
catalog.load_catalog.cache_clear()
"""
    )
    out = checks.path / "out"
    checks.runpytest_subprocess("test_new.py", "--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out))
    (result,) = _results(out).values()
    assert result["status"] == "na"
    assert "needs nats-server >= 99.0.0; the target runs" in result["message"]


def test_checks_without_a_known_rule_are_refused(pytester, embedded_server):
    """A rule marker naming no catalog rule stops the run with a usage error."""
    pytester.makepyfile(test_bad='import pytest\n@pytest.mark.rule("nope.nothing")\ndef test_x():\n    pass\n')
    result = pytester.runpytest_subprocess("--jetcheck-server", embedded_server.url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rule ('nope.nothing',) is not in the catalog*"])


def test_plugin_is_inert_for_tests_without_rules(pytester):
    """Ordinary tests in an environment with jetcheck installed start no server and write no results."""
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("--jetcheck-server", "nats://127.0.0.1:1")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "jetcheck-results").exists()


STOPPING = """
import os
import pytest

@pytest.mark.rule("purge.keep")
def test_first():
    pass

@pytest.mark.rule("purge.filter")
def test_second():
    {second}

@pytest.mark.rule("purge.seq")
def test_third():
    pass
"""


@pytest.mark.parametrize(
    ("second", "args", "expected"),
    [
        ("pass", ["-k", "not third"], {"collected": 2, "results": 2, "finished": True, "interrupted": False}),
        ("assert False", ["-x"], {"collected": 3, "results": 2, "finished": True, "interrupted": False}),
        ("raise KeyboardInterrupt", [], {"collected": 3, "results": 1, "finished": True, "interrupted": True}),
        ("os._exit(3)", [], {"collected": 3, "results": 1, "finished": False, "interrupted": False}),
    ],
    ids=["deselected", "stopped-at-first-failure", "interrupted", "killed"],
)
def test_run_json_tells_a_finished_run_from_an_unfinished_one(pytester, embedded_server, second, args, expected):
    """run.json is written when collection finishes (with the number of checks collected after deselection) and
    again at the end (finished_at, interrupted): a run that was cut short is never read as complete."""
    from jetcheck.verdict import judge

    pytester.makepyfile(test_stopping=STOPPING.format(second=second))
    out = pytester.path / "out"
    pytester.runpytest_subprocess("--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out), *args)
    run = json.loads((out / "run.json").read_text())
    results = list(read_results(out / RESULTS_FILE))
    seen = {
        "collected": run["collected"],
        "results": len(results),
        "finished": "finished_at" in run,
        "interrupted": run.get("interrupted", False),
    }
    assert seen == expected
    verdict = judge(results, run)
    assert verdict.complete == (expected["results"] == expected["collected"] and expected["finished"])
    assert verdict.complete == (not verdict.incomplete_reason)
