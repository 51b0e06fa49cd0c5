"""jetcheck's pytest plugin (entry point pytest11): the hooks that configure a run, collect its checks, gate and
record each one, and end a run whose target stopped answering; and around each check `jetcheck_check` (na, log
offset, per-check cleanup). Hooks only record: results, run.json, the progress line.

Its parts: check_fixtures (the fixtures checks use, offered from here), run_record (the run, results.jsonl and
run.json), check_results (a check's status and message, from failure_text), reachability, stash_keys, names and
hypothesis_profiles.

It stays inert for tests that carry no `rule` marker, so an installed jetcheck does not disturb other suites.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from jetcheck.errors import ConfigError
from jetcheck.fixtures import sticky_cancel, unraisable_interrupts, whole_loops
from jetcheck.fixtures.children import interrupt_on_sigterm
from jetcheck.fixtures.target import Target
from jetcheck.options import OPTIONS, add_pytest_options, resolve
from jetcheck.records import LEVELS, utc_now

from .catalog import CatalogError, Rule, load_catalog
from .certify import NOT_RUN_PREFIX, TARGET_STOPPED_EXIT
from .check_results import NA_PREFIX, classify, na, record, result_of
from .check_results import documents_disagree as documents_disagree  # for checks, as na
from .clients import adapter_for
from .clients.base import NotInRelease
from .progress import Progress
from .reachability import note_if_unreachable
from .run_record import RunRecord, append_result, write_run
from .stash_keys import (
    CONFIG_ERROR,
    LOG_OFFSET,
    NA_REASON,
    OBSERVED,
    PROBED,
    PROGRESS,
    REPORTS,
    RULE,
    RUN,
    SERVER_LOG,
    run_of,
)

# The fixtures checks use, registered with this plugin (imported by pytest itself, so no name here shadows them).
pytest_plugins = ["jetcheck.conformance.check_fixtures"]

CHECKS_PACKAGE = "jetcheck.conformance.checks"
NEEDS = {
    "managed": "needs a managed server (the suite must be able to restart it; the target is an external URL)",
    "cluster": "needs a clustered target (replicated streams); the target is a single server",
}


NOT_PORTED = NOT_RUN_PREFIX + "this check drives nats-py directly; not yet ported to the client adapter"


def _not_ported(rule: Rule, item: pytest.Item, run: RunRecord) -> bool:
    """A client rule whose check talks to nats-py itself cannot judge another client: its result would carry a
    client that never ran it."""
    return (
        rule.subject == "client"
        and run.config.client.name != "nats-py"
        and "client" not in getattr(item, "fixturenames", ())
    )


# --- options and configuration -----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rule(id): the catalog rule this check tests (required on every check)")
    config.addinivalue_line("markers", "needs(*capabilities): what the target must offer; " + ", ".join(NEEDS))
    for level in LEVELS:
        config.addinivalue_line("markers", f"{level.lower()}: checks of {level} rules")
    config.addinivalue_line("markers", "server: checks of rules the server alone decides")
    config.addinivalue_line("markers", "client: checks of rules the client under test takes part in")
    try:
        catalog = load_catalog()
    except CatalogError as exc:
        raise pytest.UsageError(f"jetcheck catalog: {exc}") from None
    for area in sorted({rule.area for rule in catalog.values()}):
        config.addinivalue_line("markers", f"{area}: checks of the {area} area")
    try:
        resolved = resolve(
            cli={o.name: config.getoption("jetcheck_" + o.name) for o in OPTIONS},
            env=os.environ,
            ini={o.name: config.getini(o.ini) or None for o in OPTIONS},
        )
        adapter_for(resolved.client)
    except ConfigError as exc:
        config.stash[CONFIG_ERROR] = f"jetcheck: {exc}"
        return
    config.stash[RUN] = RunRecord(
        config=resolved,
        catalog=catalog,
        run_id=f"{resolved.run_prefix}-{int(time.time())}",
        started_at=utc_now(),
    )


# --- collection: every check names a catalog rule ----------------------------------------------------------------


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if RUN not in config.stash and not any(_is_check(item) or item.get_closest_marker("rule") for item in items):
        return
    run = run_of(config)
    unknown = []
    for item in items:
        marker = item.get_closest_marker("rule")
        if marker is None:
            if _is_check(item):
                unknown.append(f"{item.nodeid}: no @pytest.mark.rule(...)")
            continue
        rule = run.catalog.get(marker.args[0] if marker.args else "")
        if rule is None:
            unknown.append(f"{item.nodeid}: rule {marker.args!r} is not in the catalog")
            continue
        item.stash[RULE] = rule
        item.add_marker(getattr(pytest.mark, rule.area))
        item.add_marker(getattr(pytest.mark, rule.level.lower()))
        item.add_marker(getattr(pytest.mark, rule.subject))
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(run.config.check_timeout))
        item.user_properties.append(("rule", rule.id))
    if unknown:
        raise pytest.UsageError("jetcheck: checks without a catalog rule:\n  " + "\n  ".join(unknown))


def _is_check(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return module is not None and module.__name__.startswith(CHECKS_PACKAGE)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(RULE in item.stash for item in session.items):
        return
    run = run_of(session.config)
    run.collected = sum(RULE in item.stash for item in session.items)
    # written now without finished_at, so a run that never reaches its end reads as unfinished (jetcheck.verdict)
    write_run(run)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        shown = " ".join(f"{k}={v}" for k, v in run_of(session.config).config.redacted().items() if v != "")
        reporter.write_line(f"jetcheck: {shown}")
        if session.config.get_verbosity() <= 0:  # -v lists every check itself
            checks = [item for item in session.items if RULE in item.stash]
            session.config.stash[PROGRESS] = Progress(reporter, len(checks))
            reporter.showfspath = False  # the progress replaces pytest's file names and letters
            areas = {item.stash[RULE].area for item in checks}
            reporter.write_line(f"jetcheck: {len(checks)} checks in {len(areas)} areas")


@pytest.hookimpl(wrapper=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    category, letter, word = yield
    if PROGRESS in config.stash and ("rule", _rule_id(report)) in report.user_properties:
        return category, "", word  # no letter: the progress line shows the check; the word still names it
    return category, letter, word


def _rule_id(report: pytest.TestReport) -> str:
    return next((value for key, value in report.user_properties if key == "rule"), "")


# --- running a check ---------------------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """SIGTERM ends a run of checks as Ctrl-C does (pytest turns only SIGINT into KeyboardInterrupt), so the session
    finish still tears the fixtures down: the run's streams deleted, a managed server stopped. Kept until pytest
    unconfigures: a second signal during that teardown still leaves the server to the factories' own last resort
    (fixtures.factories stops what is left running when pytest unconfigures)."""
    if any(RULE in item.stash for item in session.items):
        previous = interrupt_on_sigterm()
        session.config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))
        # every check makes and closes a loop: an interrupt must not leave one half made (fixtures.whole_loops)
        session.config.add_cleanup(whole_loops.install())
        # nor a timeout a check waits on lost, its cancellation swallowed by a reply (fixtures.sticky_cancel)
        session.config.add_cleanup(sticky_cancel.install())
        # nor an interrupt landing in a finalizer or weakref callback printed and lost (fixtures.unraisable_interrupts)
        session.config.add_cleanup(unraisable_interrupts.install())


def _na_reason(rule: Rule, item: pytest.Item, run: RunRecord) -> str:
    assert run.server is not None and run.target is not None and run.profile is not None
    if not run.profile.holds(rule.since):
        return run.profile.na_reason(rule.id, rule.since)
    for marker in item.iter_markers("needs"):
        for need in marker.args:
            if need not in NEEDS:
                raise pytest.UsageError(f"{item.nodeid}: unknown need {need!r}; known: {', '.join(NEEDS)}")
            if need == "managed" and not run.target.managed:
                return NEEDS[need]
            if need == "cluster" and not run.server.cluster:
                return NEEDS[need]
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and call.excinfo is not None and call.excinfo.errisinstance(NotInRelease):
        # the release lacks the call: the check is na, so pytest's own summary says skipped, not failed
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"{NA_PREFIX}{call.excinfo.value}")
    if RULE in item.stash:
        reports = item.stash.setdefault(REPORTS, {})
        reports[report.when] = (report, call.excinfo)
        if report.when == "teardown":
            record(item, reports)
    return report


# --- a target that stopped answering ends the run -----------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """After a check that did not pass, make sure the target still answered (jetcheck_check asks at the check's
    teardown, before the last check's teardown stops the server); if it did not, the remaining checks would only
    pile up errors for minutes: record them as not run and end the session.

    Checked after the check, so a check that restarts or kills a managed server on purpose has brought it back.
    The run's progress is shown around each check."""
    progress = item.config.stash.get(PROGRESS, None)
    rule = item.stash.get(RULE, None)
    if progress is not None and rule is not None:
        progress.start(rule.area, rule.id)
    outcome = yield
    run = item.config.stash.get(RUN, None)
    if run is None or rule is None or not run.results or run.results[-1].check != item.nodeid:
        return outcome
    last = run.results[-1]
    if last.status in ("fail", "error"):
        if PROBED not in item.stash and run.target is not None:  # only its teardown failed
            note_if_unreachable(run, last.id)
        if run.stopped_reason:
            _stop_run(item, run)
    if progress is not None:
        following = nextitem.stash.get(RULE, None) if nextitem is not None else None
        progress.finish(last, following.area if following is not None else None)
    return outcome


def _stop_run(item: pytest.Item, run: RunRecord) -> None:
    items = item.session.items
    for later in items[items.index(item) + 1 :]:
        if RULE in later.stash:
            append_result(run, result_of(later, run, "skip", NOT_RUN_PREFIX + run.stopped_reason))
    pytest.exit(f"jetcheck: {run.stopped_reason}", returncode=TARGET_STOPPED_EXIT)


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    """run.json once pytest's own session finish has torn the fixtures down (an interrupted run's cleanup is in it)."""
    try:
        return (yield)
    finally:
        run = session.config.stash.get(RUN, None)
        if run is not None and (run.collected is not None or run.results):
            write_run(
                run,
                finished_at=utc_now(),
                interrupted=exitstatus == pytest.ExitCode.INTERRUPTED,
                stopped_reason=run.stopped_reason or run.failure,
            )


# --- around each check ------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def jetcheck_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """Around each check (nothing for any other test): the server under test; `na` when the server is older than
    the rule or the target lacks what the check needs; the server log's offset; before and after the check, the
    deletion of what checks created. Its teardown reads the check's server log and, after a check that did not
    pass, whether the target still answers, while the server still runs (the last check's teardown stops it)."""
    item = request.node
    rule = item.stash.get(RULE, None)
    if rule is None:
        yield
        return
    run = run_of(item.config)
    target: Target = request.getfixturevalue("jetcheck_run_target")
    item.stash.setdefault(OBSERVED, {})  # the check's `observe` fixture records into the same dict
    if target.process is not None:
        item.stash[LOG_OFFSET] = target.process.log_offset()
    reason = _na_reason(rule, item, run)
    if reason:
        item.stash[NA_REASON] = reason
        na(reason)
    if _not_ported(rule, item, run):
        pytest.skip(NOT_PORTED)
    run.cleanup()
    yield
    run.cleanup()
    if target.process is not None:
        item.stash[SERVER_LOG] = target.process.log_since(item.stash.get(LOG_OFFSET, 0))
    status, _, _ = classify(item, item.stash.get(REPORTS, {}))
    if status in ("fail", "error"):
        asked = time.monotonic()
        note_if_unreachable(run, rule.id)
        item.stash[PROBED] = time.monotonic() - asked
