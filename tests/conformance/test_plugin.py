"""The pytest plugin: statuses, version gating, needs, results and run info (run in a fresh pytest)."""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import asdict

import pytest

from jetcheck.conformance.certify import CERTIFY_INI
from jetcheck.fixtures.cleanup import claim_prefix
from jetcheck.records import RESULTS_FILE, read_results

pytest_plugins = ["pytester"]


def check_module(*checks: tuple[str, str, str], imports: str = "") -> str:
    """The source of a module of checks, one per (rule id, function name, body line)."""
    written = [f'@pytest.mark.rule("{rule}")\ndef {name}():\n    {body}\n' for rule, name, body in checks]
    return "import pytest\n" + imports + "\n" + "\n".join(written)


CHECKS = """
import pytest
from jetcheck.conformance.plugin import documents_disagree, na

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

@pytest.mark.rule("purge.filter-keep")
def test_finds_the_documents_disagreeing():
    documents_disagree("ADR-x ('one')", "the errors table ('two')", "it answered 'one'")

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
    """pass, fail (assertion), error (connection), na (needs, na()), disagree (documents_disagree()) land in
    results.jsonl with the catalog's data."""
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
        "test_finds_the_documents_disagreeing": "disagree",
        "test_records_observations": "pass",
    }
    results = _results(out)
    assert "expected one, got two" in results["test_fails"]["message"]
    assert "connection lost" in results["test_errors"]["message"]
    assert "needs a managed server" in results["test_needs_managed"]["message"]
    assert results["test_says_na"]["message"] == "the target has no such feature"
    assert results["test_finds_the_documents_disagreeing"]["message"] == (
        "the target follows ADR-x ('one'), not the errors table ('two'): it answered 'one'"
    )
    assert results["test_passes"]["title"].startswith("A purge with keep N leaves the newest N")
    assert results["test_passes"]["level"] == "MUST"
    assert results["test_passes"]["server_version"]
    assert results["test_records_observations"]["observed"] == {
        "version_seen": results["test_passes"]["server_version"]
    }
    run = json.loads((out / "run.json").read_text())
    assert run["options"]["password"] == "***"
    assert "hunter2" not in (out / "run.json").read_text() + (out / "results.jsonl").read_text()
    assert run["counts"] == {"pass": 2, "fail": 1, "error": 1, "na": 2, "disagree": 1}
    result.assert_outcomes(passed=2, failed=2, skipped=3)


def test_rules_newer_than_the_servers_release_are_na_outside_its_profile(checks, embedded_server, monkeypatch):
    """A check whose rule is newer than the release the server reports is na: not in that release's profile."""
    checks.makepyfile(test_new=check_module(("purge.keep", "test_future", "pass")))
    future = checks.path / "catalog"
    future.mkdir()
    (future / "purge.toml").write_text(
        'area = "purge"\n[[rule]]\nid = "purge.keep"\nstatement = "s."\n'
        'level = "MUST"\nsource = "ADR-10"\nsince = "99.0.0"\n'
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
    version = json.loads((out / "run.json").read_text())["server"]["version"]
    assert result["message"] == f"not in profile {version}: purge.keep is a rule of nats-server 99.0.0 and later"


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


PLAIN_FAILURES = """
import pytest
from hypothesis import given, settings, strategies as st

class Reply:
    pass

@pytest.mark.rule("purge.keep")
def test_bare_get():
    info = {"state": {"messages": 3}}
    assert info.get("config")

@pytest.mark.rule("purge.filter")
def test_bare_compare():
    state = {"messages": 3, "first_seq": 4}
    assert state == {"messages": 2, "first_seq": 4}

@pytest.mark.rule("purge.seq")
def test_bare_compare_with_a_literal():
    messages = {"a": 1}.get("a")
    assert messages == 2

@pytest.mark.rule("purge.all")
def test_with_message():
    reply = Reply()
    assert reply is None, f"expected no reply, got {reply!r}"

@pytest.mark.rule("purge.unknown-stream")
@settings(database=None, derandomize=True)
@given(st.integers(min_value=0))
def test_property(n):
    assert n < 3, f"expected fewer than 3, got {n}"
"""


def test_failure_messages_are_plain_words_and_the_raw_assertion_is_kept_as_detail(checks, embedded_server):
    """A failing check's message says what was expected and what happened, without pytest's introspection (`where`
    lines, object addresses, "Use -v"); the raw assertion text is in `detail`."""
    checks.makepyfile(test_plain=PLAIN_FAILURES)
    checks.makeini(CERTIFY_INI.read_text())
    out = checks.path / "out"
    checks.runpytest_subprocess("test_plain.py", "--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out))
    results = _results(out)
    assert {r["status"] for r in results.values()} == {"fail"}
    for name, result in results.items():
        for noise in ("0x", "where", "Use -v", "AssertionError", "assert "):
            assert noise not in result["message"], f"{name}: {result['message']!r}"
        assert result["detail"].startswith("AssertionError"), f"{name}: {result['detail']!r}"
    assert "0x" in results["test_bare_get"]["detail"]
    assert results["test_bare_get"]["message"] == "expected info.get('config'), got None"
    assert results["test_bare_compare"]["message"] == (
        "expected state == {'messages': 2, 'first_seq': 4}, got state = {'messages': 3, 'first_seq': 4}"
    )
    assert results["test_bare_compare_with_a_literal"]["message"] == "expected messages == 2, got messages = 1"
    assert results["test_with_message"]["message"] == "expected no reply, got <test_plain.Reply object>"
    # a property's minimal failing example stays with the message
    assert results["test_property"]["message"].startswith("expected fewer than 3, got 3\n")
    assert "n=3" in results["test_property"]["message"]


TWO_AREAS = check_module(
    ("dedup.duplicate-acked", "test_dedup_passes", "pass"),
    ("dedup.by-id-not-payload", "test_dedup_fails", 'assert False, "expected x, got y"'),
    ("purge.keep", "test_purge_passes", "pass"),
)


def test_progress_is_a_plain_line_per_finished_area_when_not_on_a_terminal(checks, embedded_server):
    """Off a terminal (a log file) the run says, as each area ends, how many checks are done of how many, how that
    area went and how many failed so far; pytest's letters give way to it."""
    checks.makepyfile(test_two_areas=TWO_AREAS)
    out = checks.path / "out"
    result = checks.runpytest_subprocess(
        "test_two_areas.py", "-q", "--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out)
    )
    result.assert_outcomes(passed=2, failed=1)
    ours = [line for line in result.outlines if line.startswith("jetcheck: ") and "=" not in line]
    assert ours == [
        "jetcheck: 3 checks in 2 areas",
        "jetcheck: [2/3] dedup done: 1 pass, 1 fail; 1 failing so far",
        "jetcheck: [3/3] purge done: 1 pass; 1 failing so far",
    ]
    assert not [line for line in result.outlines if line and set(line) <= set(".FEs")], result.outlines


STOPPING = check_module(
    ("purge.keep", "test_first", "pass"),
    ("purge.filter", "test_second", "{second}"),
    ("purge.seq", "test_third", "pass"),
    imports="import os\n",
)


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
    prefix = "jcstop" + secrets.token_hex(3)
    run_args = ["--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out), "--jetcheck-run-prefix", prefix]
    try:
        pytester.runpytest_subprocess(*run_args, *args)
    finally:  # a killed run leaves its anchor stream, as on a vendor's server: deleted as --clean-previous does
        asyncio.run(clean_previous(embedded_server, prefix))
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


async def clean_previous(target, prefix: str) -> None:
    nc = await target.connect()
    try:
        await claim_prefix(nc, prefix, clean_previous=True)
    finally:
        await nc.close()


LAST_CHECK = """
import pytest

@pytest.mark.rule("purge.keep")
def test_first(target):
    pass

@pytest.mark.rule("purge.filter")
@pytest.mark.needs("managed")
def test_last(target):
    {last}
    assert False, "the last check failed"
"""


@pytest.mark.parametrize(
    ("last", "exit_code", "stopped", "cleanup_problems"),
    [
        ("target.process.restart()", 1, "", []),
        ("target.process.kill()", 75, "the target stopped answering", ["no cleanup: the target stopped answering"]),
    ],
    ids=["restarted", "killed"],
)
def test_a_failing_last_check_keeps_its_server_log_and_is_judged_while_the_server_runs(
    pytester, last, exit_code, stopped, cleanup_problems
):
    """The managed server stops with the last check's teardown; before that, the check's server log is read and
    whether the target still answers is asked: a last check that restarted the server leaves a finished run with
    its log, one that killed it ends the run as stopped (exit 75) with no cleanup tried."""
    pytester.makepyfile(test_last=LAST_CHECK.format(last=last))
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--jetcheck-out", str(out), "-p", "no:randomly")
    results = {r.check.split("::")[-1]: r for r in read_results(out / RESULTS_FILE)}
    run = json.loads((out / "run.json").read_text())
    assert {name: r.status for name, r in results.items()} == {"test_first": "pass", "test_last": "fail"}
    assert run["stopped_reason"].startswith(stopped)
    assert run["stopped_reason"].endswith("after check purge.filter" if stopped else "")
    assert run["cleanup_problems"][-1:] == cleanup_problems
    assert result.ret == exit_code
    if not stopped:
        assert "Server is ready" in results["test_last"].server_log


def test_a_check_that_meets_no_answer_is_an_error_never_a_fail_or_pass(checks, embedded_server):
    """A check expecting a refusal that gets a timeout instead, and one whose assertion is never reached, are
    `error` with the client's words; the same check given the refusal passes."""
    imports = "from jetcheck.conformance.clients.base import ClientError, refusal\n"
    imports += "from jetcheck.conformance.clients.driver_pipe import DriverTimeout\n"
    imports += "async def answer(exc):\n    raise exc\n"
    body = "assert asyncio.run(refusal(answer({}))).err_code == 10071"
    checks.makepyfile(
        test_refusals=check_module(
            ("purge.keep", "test_timeout", body.format('DriverTimeout("timeout", "create: no answer in 30 s")')),
            ("purge.filter", "test_refused", body.format('ClientError("api", "create: refused", 400, 10071)')),
            imports="import asyncio\n" + imports,
        )
    )
    out = checks.path / "out"
    checks.runpytest_subprocess(
        "test_refusals.py", "--jetcheck-server", embedded_server.url, "--jetcheck-out", str(out)
    )
    results = _results(out)
    assert (results["test_timeout"]["status"], results["test_refused"]["status"]) == ("error", "pass")
    assert "create: no answer in 30 s" in results["test_timeout"]["message"]
