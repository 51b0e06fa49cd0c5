"""A client rule whose check still drives nats-py is not run for any other client (in a fresh pytest)."""

from __future__ import annotations

from pathlib import Path

from jetcheck.conformance.clients.build import js_pinned_version
from jetcheck.records import RESULTS_FILE, read_results

pytest_plugins = ["pytester"]
FAKE = Path(__file__).with_name("fake_driver.py")

CHECKS = """
import pytest

@pytest.mark.asyncio
@pytest.mark.rule("kv.history-kept")
async def test_client_rule_on_nats_py(js):
    pass

@pytest.mark.asyncio
@pytest.mark.rule("purge.keep")
async def test_server_rule(js):
    pass
"""
NOT_PORTED = "not run: this check drives nats-py directly; not yet ported to the client adapter"


def _run(pytester, server, client: str) -> dict:
    pytester.makepyfile(test_checks=CHECKS)
    pytester.makeini("[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n")
    out = pytester.path / "out"
    pytester.runpytest_subprocess(
        "--jetcheck-server", server.url, "--jetcheck-out", str(out), "--jetcheck-client", client
    )
    return {r.check.split("::")[-1]: r for r in read_results(out / RESULTS_FILE)}


def test_a_check_driving_nats_py_is_not_run_for_another_client(pytester, embedded_server):
    """With --client nats.js the nats-py-only client check is `skip` saying why; a server rule runs; every result
    names the client and its pinned version, and no driver was needed for either."""
    results = _run(pytester, embedded_server, "nats.js")
    assert (results["test_client_rule_on_nats_py"].status, results["test_client_rule_on_nats_py"].message) == (
        "skip",
        NOT_PORTED,
    )
    assert results["test_server_rule"].status == "pass"
    assert {r.client["name"] for r in results.values()} == {"nats.js"}
    assert {r.client["version"] for r in results.values()} == {js_pinned_version()}


def test_the_same_check_runs_for_nats_py(pytester, embedded_server):
    results = _run(pytester, embedded_server, "nats-py")
    assert results["test_client_rule_on_nats_py"].status == "pass"


DRIVER_CONFTEST = f"""
import sys
from jetcheck.conformance.clients import driven_clients

# nats.js played by the fake driver: the plugin's own wiring, no node needed
documented = driven_clients.DRIVEN["nats.js"][0]
driven_clients.DRIVEN["nats.js"] = (documented, lambda version: [sys.executable, {str(FAKE)!r}], lambda: "9.9.9")
"""
DRIVER_CHECKS = """
import pytest

@pytest.mark.asyncio
@pytest.mark.rule("heartbeat.client-reports-missed")
async def test_driver_dies(client):
    await client.process().request("crash")

@pytest.mark.asyncio
@pytest.mark.rule("heartbeat.client-not-terminal")
async def test_after_the_driver_died(client):
    pass
"""


def test_a_dead_driver_makes_this_and_later_client_checks_errors_with_its_reason(pytester, embedded_server):
    """The driver exiting mid-check: that check and each later client check are `error` (not `fail`) naming the
    exit status and its last stderr line; results carry the driver's name and reported version."""
    pytester.makeconftest(DRIVER_CONFTEST)
    pytester.makepyfile(test_checks=DRIVER_CHECKS)
    pytester.makeini("[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n")
    out = pytester.path / "out"
    pytester.runpytest_subprocess(
        "--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out), "--jetcheck-client", "nats.js"
    )
    results = {r.check.split("::")[-1]: r for r in read_results(out / RESULTS_FILE)}
    reason = "the nats.js driver exited with status 3 (fake driver: boom); client checks cannot run"
    assert [(r.status, reason in r.message) for r in results.values()] == [("error", True), ("error", True)]
    assert results["test_after_the_driver_died"].message.startswith("setup failed: ")
    assert {(r.client["name"], r.client["version"]) for r in results.values()} == {("nats.js", "9.9.9")}


UNBUILDABLE_CONFTEST = """
from jetcheck.errors import ConfigError
from jetcheck.conformance.clients import driven_clients

def no_go(version):
    raise ConfigError("the nats.go driver needs Go >= 1.26.0: no go on PATH or in /usr/local/go/bin")

driven_clients.DRIVEN["nats.go"] = (driven_clients.DRIVEN["nats.go"][0], no_go, lambda: "v1.55.0")
"""


def test_a_driver_that_cannot_be_built_ends_the_run_with_its_line_and_exit_2(pytester, embedded_server):
    """Run through pytest directly (no certify preflight): the first client check's build failure stops the run with
    one `jetcheck:` line and exit status 2, not an error per check."""
    pytester.makeconftest(UNBUILDABLE_CONFTEST)
    pytester.makepyfile(test_checks=DRIVER_CHECKS)
    pytester.makeini("[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_subprocess("--jetcheck-server", embedded_server.url, "--jetcheck-client", "nats.go")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*jetcheck: the nats.go driver needs Go >= 1.26.0: no go on PATH*"])
