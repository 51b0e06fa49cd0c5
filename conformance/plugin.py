"""jetcheck's pytest plugin (entry point pytest11): options, target, gating, prefixes, cleanup, results.

The server under test comes from fixtures, as in anyone's suite: `jetcheck_server_under_test` (by default the
server jetcheck's options name, fixtures.factories.jetcheck_server; a conftest.py may replace it), probed and
anchored by `jetcheck_run_target`, and around each check `jetcheck_check` (na, log offset, per-check cleanup). Hooks
only record: results, run.json, the progress line, the end of a run whose target stopped answering.

It stays inert for tests that carry no `rule` marker, so an installed jetcheck does not disturb other suites.
"""

from __future__ import annotations

import ast
import asyncio
import itertools
import json
import os
import platform
import re
import signal
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

import jetcheck
from jetcheck.errors import ConfigError
from jetcheck.fixtures import sticky_cancel, whole_loops
from jetcheck.fixtures.children import interrupt_on_sigterm
from jetcheck.fixtures.cleanup import RunLedger, claim_prefix, create_anchor, delete_created_streams, run_marker
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.factories import Server, jetcheck_server
from jetcheck.fixtures.proxy import NatsProxy
from jetcheck.fixtures.target import ServerInfo, Target, probe
from jetcheck.options import OPTIONS, Config, add_pytest_options, resolve
from jetcheck.records import LEVELS, RESULTS_FILE, RUN_FILE, CheckResult, utc_now
from jetcheck.redact import redact_text

from .catalog import CatalogError, Rule, load_catalog
from .certify import NOT_RUN_PREFIX, TARGET_STOPPED_EXIT
from .clients import adapter_for
from .clients.base import Indeterminate, NotInRelease
from .clients.deviations import deviation_for
from .clients.driven_clients import shutdown_drivers
from .clients.driver_adapter import DriverAdapter
from .profiles import Profile, profile_for
from .progress import Progress

CHECKS_PACKAGE = "jetcheck.conformance.checks"
NEEDS = {
    "managed": "needs a managed server (the suite must be able to restart it; the target is an external URL)",
    "cluster": "needs a clustered target (replicated streams); the target is a single server",
}
NA_PREFIX = "na: "
# how long a target that failed a check may take to answer again before the run stops
REACHABLE_BOUND_S = 3.0

# One bug per failing check keeps the result's message to one minimal program; no example database is written
# into the user's working directory.
_COMMON = {
    "deadline": None,
    "database": None,
    "report_multiple_bugs": False,
    "suppress_health_check": [HealthCheck.too_slow],
}
HYPOTHESIS_PROFILES = {"fast": "jetcheck-fast", "thorough": "jetcheck-thorough"}  # --profile -> Hypothesis profile
settings.register_profile(HYPOTHESIS_PROFILES["fast"], max_examples=40, derandomize=True, **_COMMON)
settings.register_profile(HYPOTHESIS_PROFILES["thorough"], max_examples=300, **_COMMON)


def na(reason: str) -> None:
    """End the running check as `na`: the target cannot support what the rule needs."""
    pytest.skip(NA_PREFIX + reason)


def _client_info(config: Config) -> dict[str, str]:
    """The client under test as results record it (a proof variant keeps its `+variant` in the name); a driven
    client's exact version is the one its driver reports."""
    try:
        adapter = adapter_for(config.client)
    except ConfigError:
        return {"name": config.client, "version": ""}
    return {"name": adapter.name, "version": adapter.version}


NOT_PORTED = NOT_RUN_PREFIX + "this check drives nats-py directly; not yet ported to the client adapter"


def _not_ported(rule: Rule, item: pytest.Item, run: RunRecord) -> bool:
    """A client rule whose check talks to nats-py itself cannot judge another client: its result would carry a
    client that never ran it."""
    chosen = run.config.client.partition("+")[0].partition("@")[0]
    return rule.subject == "client" and chosen != "nats-py" and "client" not in getattr(item, "fixturenames", ())


# --- what the run records ---------------------------------------------------------------------------------------


@dataclass
class RunRecord:
    """What the hooks record about the run (results, run.json). The fixtures below set `target` and `server` once
    the server under test answers; nothing here starts or stops a server."""

    config: Config
    catalog: dict[str, Rule]
    run_id: str
    started_at: str
    target: Target | None = None  # the server under test, from its probe until the run's final cleanup
    server: ServerInfo | None = None
    profile: Profile | None = None  # the rules the run holds the target to, from --rules-of and the server's probe
    failure: str = ""  # why the target could not be started or reached, once it failed
    stopped_reason: str = ""  # why the run stopped before its last check (the target died), "" when it did not
    collected: int | None = None  # checks collected (after deselection), once collection finished
    results: list[CheckResult] = field(default_factory=list)
    cleanup_problems: list[str] = field(default_factory=list)
    names: itertools.count = field(default_factory=itertools.count)
    ledger: RunLedger = field(init=False)  # every stream name this run handed out: all its cleanup may delete

    def __post_init__(self) -> None:
        self.ledger = RunLedger(self.config.run_prefix)

    @property
    def out_dir(self) -> Path:
        return Path(self.config.out)

    @property
    def secrets(self) -> list[str]:
        return [self.config.password, self.config.token]

    def cleanup(self, keep_anchor: bool = True) -> None:
        if self.target is None:
            return
        problems = asyncio.run(_cleanup(self.target, self.ledger, keep_anchor))
        self.cleanup_problems.extend(problems)

    def release_target(self) -> None:
        """The run's end: delete its streams and anchor (not on a target that stopped answering)."""
        if self.target is None:
            return
        if self.stopped_reason:
            self.cleanup_problems.append("no cleanup: the target stopped answering")
        else:
            self.cleanup(keep_anchor=False)
        self.target = None


async def _probe_and_anchor(target: Target, prefix: str, run_id: str, clean_previous: bool) -> ServerInfo:
    nc = await target.connect()
    try:
        info = await probe(nc)
        await claim_prefix(nc, prefix, clean_previous)  # refuses a prefix the target already uses
        await create_anchor(nc, prefix, run_marker(run_id, info.version))
        return info
    finally:
        await nc.close()


async def _cleanup(target: Target, ledger: RunLedger, keep_anchor: bool) -> list[str]:
    try:
        nc = await target.connect()
    except TargetError as exc:
        return [f"cleanup could not connect: {exc}"]
    try:
        return await delete_created_streams(nc, ledger, keep_anchor)
    finally:
        await nc.close()


RUN = pytest.StashKey[RunRecord]()
RULE = pytest.StashKey[Rule]()
NA_REASON = pytest.StashKey[str]()
OBSERVED = pytest.StashKey[dict]()
LOG_OFFSET = pytest.StashKey[int]()
SERVER_LOG = pytest.StashKey[str]()  # the server's log while the check ran, read before the server may stop
# the seconds the check's teardown spent asking whether the target still answers: the run's time, not the check's
PROBED = pytest.StashKey[float]()
REPORTS = pytest.StashKey[dict]()
PROGRESS = pytest.StashKey[Progress]()
# a bad JETCHECK_* setting, kept until jetcheck's fixtures or checks are used: someone else's run stays unharmed
CONFIG_ERROR = pytest.StashKey[str]()


def _run(config: pytest.Config) -> RunRecord:
    if RUN not in config.stash:
        raise pytest.UsageError(config.stash[CONFIG_ERROR])
    return config.stash[RUN]


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


def _hypothesis_settings(config: pytest.Config) -> settings:
    return settings.get_profile(HYPOTHESIS_PROFILES[_run(config).config.profile])


# --- collection: every check names a catalog rule ----------------------------------------------------------------


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if RUN not in config.stash and not any(_is_check(item) or item.get_closest_marker("rule") for item in items):
        return
    run = _run(config)
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
    run = _run(session.config)
    run.collected = sum(RULE in item.stash for item in session.items)
    # written now without finished_at, so a run that never reaches its end reads as unfinished (jetcheck.verdict)
    _write_run(run)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        shown = " ".join(f"{k}={v}" for k, v in _run(session.config).config.redacted().items() if v != "")
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
            _record(item, reports)
    return report


# Failures of these kinds leave the outcome unknown (the suite could not finish asking), not a server deviation.
INDETERMINATE = (
    Indeterminate,
    TargetError,
    ConnectionError,
    nats.errors.ConnectionClosedError,
    nats.errors.NoServersError,
    nats.errors.TimeoutError,
    asyncio.TimeoutError,
)


def _classify(item: pytest.Item, reports: dict) -> tuple[str, str, pytest.ExceptionInfo | None]:
    """The check's status, its message, and the exception behind a fail or error."""
    setup, setup_exc = reports.get("setup", (None, None))
    if NA_REASON in item.stash:
        return "na", item.stash[NA_REASON], None
    for _, excinfo in reports.values():
        if excinfo is not None and excinfo.errisinstance(NotInRelease):
            return "na", str(excinfo.value), None
    if setup is not None and setup.skipped:
        reason = setup_exc.value.msg if setup_exc is not None else "skipped"
        return ("na" if reason.startswith(NA_PREFIX) else "skip", reason.removeprefix(NA_PREFIX), None)
    if setup is not None and setup.failed:
        return "error", f"setup failed: {_plain(setup_exc)}", setup_exc
    call, call_exc = reports.get("call", (None, None))
    if call is not None and call.skipped:
        reason = call_exc.value.msg if call_exc is not None else "skipped"
        return ("na" if reason.startswith(NA_PREFIX) else "skip", reason.removeprefix(NA_PREFIX), None)
    if call is not None and call.failed:
        indeterminate = call_exc is not None and (
            call_exc.errisinstance(INDETERMINATE) or _describe(call_exc).startswith("Failed: Timeout")
        )
        return "error" if indeterminate else "fail", _plain(call_exc), call_exc
    teardown, teardown_exc = reports.get("teardown", (None, None))
    if teardown is not None and teardown.failed:
        return "error", f"teardown failed: {_plain(teardown_exc)}", teardown_exc
    return "pass", "", None


def _describe(excinfo: pytest.ExceptionInfo | None, limit: int = 4000) -> str:
    if excinfo is None:
        return ""
    text = excinfo.exconly().strip()
    if isinstance(excinfo.value, BaseExceptionGroup):  # e.g. Hypothesis' FlakyFailure: show what it groups
        inner = "\n".join(f"  - {type(e).__name__}: {e}" for e in excinfo.value.exceptions)
        text = f"{text}\n{inner}"
    return _limit(text, limit)


def _limit(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"


# Object addresses in reprs (`<X object at 0x7f...>`) differ on every run and mean nothing to a reader.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _plain(excinfo: pytest.ExceptionInfo | None) -> str:
    """What a failure means in plain words: an assertion's own message, or for a bare assert what was expected and
    the values seen; pytest's introspection (`where` lines, diffs, "Use -v") stays in the raw detail."""
    if excinfo is None:
        return ""
    if excinfo.errisinstance(pytest.fail.Exception):  # pytest.fail("...") in a check: its words, without "Failed: "
        return _ADDRESS.sub("", excinfo.value.msg)
    if not excinfo.errisinstance(AssertionError):
        return _ADDRESS.sub("", _describe(excinfo))
    said, values = _split_assertion(str(excinfo.value))
    text = said or _expected_and_got(_statement(excinfo), values)
    notes = getattr(excinfo.value, "__notes__", [])  # Hypothesis' falsifying example
    return _ADDRESS.sub("", _limit("\n".join([text, *notes]).strip()))


def _statement(excinfo: pytest.ExceptionInfo) -> str:
    """The source of the statement that raised, or "" when its source is not available."""
    try:
        return str(excinfo.traceback[-1].statement).strip()
    except (AssertionError, IndexError):  # pytest asserts that the frame has source
        return ""


def _split_assertion(text: str) -> tuple[str, str]:
    """A rewritten assertion's text is `<message>\\nassert <values>\\n  <introspection>`: (message, values)."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("assert ")]
    if not starts:  # not rewritten by pytest: the text is the message
        return text.strip(), ""
    said = lines[: starts[-1]]
    said = said[:1] + [line.removeprefix("  ") for line in said[1:]]  # pytest indents a message's further lines
    return "\n".join(said).strip(), lines[starts[-1]].removeprefix("assert ")


def _expected_and_got(statement: str, values: str) -> str:
    """`expected <the asserted expression>, got <its values>` for an assert without a message."""
    try:
        test = ast.parse(statement).body[0].test  # type: ignore[attr-defined]
    except (SyntaxError, IndexError, AttributeError):
        expected = statement.removeprefix("assert ") or "the assertion to hold"
        return f"expected {expected}, got {values}" if values else f"expected {expected}"
    expected = ast.unparse(test)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op = _COMPARE_OPS.get(type(test.ops[0]))
        sides = values.split(f" {op} ") if op else []
        if len(sides) == 2:  # the values split unambiguously into left and right
            left, right = ast.unparse(test.left), test.comparators[0]
            got = [f"{left} = {sides[0]}"]
            if not _is_literal(right):
                got.append(f"{ast.unparse(right)} = {sides[1]}")
            return f"expected {expected}, got {', '.join(got)}"
    return f"expected {expected}, got {values}" if values else f"expected {expected}"


_COMPARE_OPS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _record(item: pytest.Item, reports: dict) -> None:
    run = _run(item.config)
    status, message, excinfo = _classify(item, reports)
    raw = _describe(excinfo)
    detail = "" if not raw or raw in message or raw.endswith(message) else raw
    duration = sum(rep.duration for rep, _ in reports.values()) - item.stash.get(PROBED, 0.0)
    server_log = item.stash.get(SERVER_LOG, "") if status in ("fail", "error") else ""
    deviation = deviation_for(_client_info(run.config)["name"], item.stash[RULE].id) if status == "fail" else None
    if deviation is not None:
        message = f"{deviation.label()}. {message}"
    _append_result(run, _result(item, run, status, message, duration, server_log, detail))


def _result(
    item: pytest.Item,
    run: RunRecord,
    status: str,
    message: str,
    duration: float = 0.0,
    server_log: str = "",
    detail: str = "",
) -> CheckResult:
    return CheckResult(
        **item.stash[RULE].result_fields(),
        status=status,
        server_version=run.server.version if run.server else "",
        client=_client_info(run.config),
        duration_s=round(duration, 4),
        message=redact_text(message, run.secrets),
        check=item.nodeid,
        run_id=run.run_id,
        observed=item.stash.get(OBSERVED, {}),
        server_log=redact_text(server_log, run.secrets),
        detail=redact_text(detail, run.secrets),
    )


def _append_result(run: RunRecord, result: CheckResult) -> None:
    if not run.results:
        run.out_dir.mkdir(parents=True, exist_ok=True)
        (run.out_dir / RESULTS_FILE).write_text("")
    run.results.append(result)
    with open(run.out_dir / RESULTS_FILE, "a", encoding="utf-8") as fh:
        fh.write(result.to_json() + "\n")


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
            _note_if_unreachable(run, last.id)
        if run.stopped_reason:
            _stop_run(item, run)
    if progress is not None:
        following = nextitem.stash.get(RULE, None) if nextitem is not None else None
        progress.finish(last, following.area if following is not None else None)
    return outcome


def _unreachable(url: str, bound_s: float = REACHABLE_BOUND_S) -> str:
    """Why no NATS server at `url` sends its INFO within `bound_s` (tried again until then), or "" if one does.

    A bare TCP exchange: no credentials are sent, and a server that accepts but hangs counts as not answering."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 4222
    where = f"{host}:{port}"
    deadline = time.monotonic() + bound_s
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(left, 0.1)) as sock:
                greeting = b""
                while len(greeting) < 5 and (chunk := sock.recv(5 - len(greeting))):
                    greeting += chunk
                if greeting == b"INFO ":
                    return ""
                why = f"{where} accepted a connection but sent no INFO"
        except ConnectionRefusedError:
            why = f"connection refused at {where}"
        except TimeoutError:
            why = f"no answer from {where} within {bound_s:.0f} s"
        except OSError as exc:
            why = f"{exc.strerror or type(exc).__name__} at {where}"
        if time.monotonic() + 0.2 >= deadline:
            return why
        time.sleep(0.2)  # a bounded retry: the server may be restarting


def _note_if_unreachable(run: RunRecord, rule_id: str) -> None:
    assert run.target is not None
    unreachable = _unreachable(run.target.url)
    if unreachable:
        run.stopped_reason = f"the target stopped answering ({unreachable}) after check {rule_id}"


def _stop_run(item: pytest.Item, run: RunRecord) -> None:
    items = item.session.items
    for later in items[items.index(item) + 1 :]:
        if RULE in later.stash:
            _append_result(run, _result(later, run, "skip", NOT_RUN_PREFIX + run.stopped_reason))
    pytest.exit(f"jetcheck: {run.stopped_reason}", returncode=TARGET_STOPPED_EXIT)


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    """run.json once pytest's own session finish has torn the fixtures down (an interrupted run's cleanup is in it)."""
    try:
        return (yield)
    finally:
        run = session.config.stash.get(RUN, None)
        if run is not None and (run.collected is not None or run.results):
            _write_run(
                run,
                finished_at=utc_now(),
                interrupted=exitstatus == pytest.ExitCode.INTERRUPTED,
                stopped_reason=run.stopped_reason or run.failure,
            )


def _write_run(run: RunRecord, **end: Any) -> None:
    """run.json: once when collection finished (no finished_at yet), again at the session's end."""
    counts: dict[str, int] = {}
    for result in run.results:
        counts[result.status] = counts.get(result.status, 0) + 1
    info = {
        "run_id": run.run_id,
        "jetcheck_version": jetcheck.__version__,
        "started_at": run.started_at,
        "collected": run.collected,
        "options": run.config.redacted(),
        "server": run.server.as_dict() if run.server else {},
        "profile": run.profile.as_dict() if run.profile else {},
        "target": "managed" if run.config.managed else "url",
        "client": _client_info(run.config),
        "python": platform.python_version(),
        "counts": counts,
        "cleanup_problems": run.cleanup_problems,
        **end,
    }
    run.out_dir.mkdir(parents=True, exist_ok=True)
    (run.out_dir / RUN_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


# --- fixtures for checks -----------------------------------------------------------------------------------------


class Names:
    """Names for what one check creates: `<prefix>_<tag><n>`, the tag letters only. Stream and bucket names go
    into the run's ledger as they are handed out, so cleanup deletes them and nothing else."""

    def __init__(self, prefix: str, counter: itertools.count, ledger: RunLedger) -> None:
        self.prefix = prefix
        self._counter = counter
        self._ledger = ledger

    def _name(self, tag: str, separator: str = "_") -> str:
        if not re.fullmatch(r"[A-Za-z]+", tag):
            raise ValueError(f"a name's tag is letters only (the generated names cleanup knows), not {tag!r}")
        return f"{self.prefix}{separator}{tag}{next(self._counter)}"

    def stream(self, tag: str = "S") -> str:
        return self._ledger.record_stream(self._name(tag))

    def subject(self, tag: str = "s") -> str:
        """A subject root unique to this run and call; streams bind `<root>.>`."""
        return self._name(tag, ".")

    def consumer(self, tag: str = "C") -> str:
        return self._name(tag)

    def bucket(self, tag: str = "b") -> str:
        return self._ledger.record_bucket(self._name(tag))


@pytest.fixture(scope="session")
def jetcheck_config(pytestconfig: pytest.Config) -> Config:
    return _run(pytestconfig).config


# The server the checks run against: by default the one jetcheck's options name. A conftest.py may override it with
# any fixture yielding a fixtures.factories.Server, e.g. `jetcheck_server_under_test = jetcheck_proc("2.12.8")`.
jetcheck_server_under_test = jetcheck_server()


@pytest.fixture(scope="session")
def jetcheck_run_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """The server under test as the checks reach it: probed once (JetStream usable, its version and cluster), this
    run's prefix claimed and its anchor created; after the run, the streams it created are deleted. A server that
    cannot be started or reached ends the run with one line and exit 3."""
    run = _run(request.config)
    cfg = run.config
    try:
        server: Server = request.getfixturevalue("jetcheck_server_under_test")
        target = server.target
        run.server = asyncio.run(_probe_and_anchor(target, cfg.run_prefix, run.run_id, cfg.clean_previous))
        run.profile = profile_for(cfg.rules_of, run.server.version, run.server.api_level)
    except TargetError as exc:
        run.failure = redact_text(str(exc), run.secrets)
        pytest.exit(f"jetcheck: {run.failure}", returncode=3)
    run.target = target
    try:
        yield target
    finally:
        run.release_target()


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
    run = _run(item.config)
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
    status, _, _ = _classify(item, item.stash.get(REPORTS, {}))
    if status in ("fail", "error"):
        asked = time.monotonic()
        _note_if_unreachable(run, rule.id)
        item.stash[PROBED] = time.monotonic() - asked


@pytest.fixture
def target(jetcheck_run_target: Target) -> Target:
    """The server under test (started and probed once per run)."""
    return jetcheck_run_target


@pytest.fixture
def server_info(request: pytest.FixtureRequest, target: Target) -> ServerInfo:
    run = _run(request.config)
    assert run.server is not None
    return run.server


@pytest.fixture
def expected_release(request: pytest.FixtureRequest, target: Target) -> str:
    """The release whose documented behaviour a check expects where it changed between releases: the profile's
    (the server's own release when it reports a real one; never what an unknown version string implies)."""
    run = _run(request.config)
    assert run.profile is not None
    return run.profile.behaviour


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    run = _run(request.config)
    return Names(run.config.run_prefix, run.names, run.ledger)


@pytest.fixture
def observe(request: pytest.FixtureRequest):
    """Record a behaviour seen (a variant, a timing) into this check's result under `observed`."""
    observed = request.node.stash.setdefault(OBSERVED, {})

    def record(key: str, value: Any) -> None:
        observed[key] = value

    return record


@pytest.fixture
def hypothesis_settings(request: pytest.FixtureRequest) -> settings:
    """The Hypothesis profile this run uses (fast for CI, thorough for certification)."""
    return _hypothesis_settings(request.config)


@pytest_asyncio.fixture
async def nc(target: Target):
    """A nats-py connection to the target, closed after the check."""
    client = await target.connect()
    yield client
    await client.close()


@pytest_asyncio.fixture
async def js(nc):
    """nats-py's JetStream context on `nc`."""
    return nc.jetstream()


@pytest.fixture(scope="session")
def jetcheck_client_drivers(jetcheck_run_target: Target) -> Iterator[None]:
    """The driven clients' driver processes, shared by the run's checks: shut down at the run's end, before the
    target's cleanup and its server's stop."""
    yield
    shutdown_drivers()


@pytest.fixture
def client(jetcheck_config: Config, jetcheck_client_drivers: None):
    """The client under test (`--jetcheck-client`), as a conformance.clients adapter. A driven client's driver is
    built and started by the first check that asks (then shared by the run); a missing tool or a failed build ends
    the run with its one line and exit 2; a driver that died fails this check's setup with why."""
    adapter = adapter_for(jetcheck_config.client)
    if isinstance(adapter, DriverAdapter):
        try:
            adapter.process()
        except ConfigError as exc:
            pytest.exit(f"jetcheck: {exc}", returncode=2)
    return adapter


@pytest_asyncio.fixture
async def proxied(target: Target):
    """A fault-injection NatsProxy in front of the target (managed or URL), stopped after the check; it speaks the
    target's TLS itself, with the context the client would use, so faults reach TLS targets too."""
    tls = target.credentials.tls_context() or ssl.create_default_context()
    proxy = await NatsProxy.for_url(target.url, upstream_tls=tls, require_tls=target.tls_required).start()
    yield proxy
    await proxy.stop()
