"""jetcheck's pytest plugin (entry point pytest11): options, target, gating, prefixes, cleanup, results.

It stays inert for tests that carry no `rule` marker, so an installed jetcheck does not disturb other suites.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import os
import platform
import signal
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

import jetcheck
from jetcheck.config import OPTIONS, Config, ConfigError, resolve
from jetcheck.fixtures.children import interrupt_on_sigterm
from jetcheck.fixtures.cleanup import create_anchor, delete_owned_streams
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.providers import ServerProvider, provider_for
from jetcheck.fixtures.proxy import NatsProxy
from jetcheck.fixtures.target import ServerInfo, Target, probe, version_tuple
from jetcheck.records import LEVELS, RESULTS_FILE, RUN_FILE, CheckResult
from jetcheck.redact import redact_text

from .catalog import CatalogError, Rule, load_catalog
from .clients import adapter_for

CHECKS_PACKAGE = "jetcheck.conformance.checks"
NEEDS = {
    "managed": "needs a managed server (the suite must be able to restart it; the target is an external URL)",
    "cluster": "needs a clustered target (replicated streams); the target is a single server",
}
NA_PREFIX = "na: "

# One bug per failing check keeps the result's message to one minimal program; no example database is written
# into the user's working directory.
_COMMON = {
    "deadline": None,
    "database": None,
    "report_multiple_bugs": False,
    "suppress_health_check": [HealthCheck.too_slow],
}
settings.register_profile("jetcheck-fast", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("jetcheck-thorough", max_examples=300, **_COMMON)


def na(reason: str) -> None:
    """End the running check as `na`: the target cannot support what the rule needs."""
    pytest.skip(NA_PREFIX + reason)


def _client_info(config: Config) -> dict[str, str]:
    """The client under test as results record it (a proof variant keeps its `+variant` in the name)."""
    try:
        adapter = adapter_for(config.client)
    except ConfigError:
        return {"name": config.client, "version": ""}
    return {"name": config.client, "version": adapter.version}


# --- run state ---------------------------------------------------------------------------------------------------


@dataclass
class RunState:
    config: Config
    catalog: dict[str, Rule]
    run_id: str
    started_at: str
    provider: ServerProvider | None = None
    target: Target | None = None
    server: ServerInfo | None = None
    failure: str = ""  # why the target could not be reached, once it failed
    results: list[CheckResult] = field(default_factory=list)
    cleanup_problems: list[str] = field(default_factory=list)
    names: itertools.count = field(default_factory=itertools.count)

    @property
    def out_dir(self) -> Path:
        return Path(self.config.out)

    @property
    def secrets(self) -> list[str]:
        return [self.config.password, self.config.token]

    def ensure_target(self) -> Target:
        """Start or reach the target once per run and probe it."""
        if self.target is not None:
            return self.target
        if self.failure:
            pytest.exit(f"jetcheck: {self.failure}", returncode=3)
        cfg = self.config
        try:
            self.provider = provider_for(
                cfg.server, cfg.server_version, cfg.credentials(), Path(cfg.server_cache) if cfg.server_cache else None
            )
            target = self.provider.start()
            self.server = asyncio.run(_probe_and_anchor(target, cfg.run_prefix))
        except TargetError as exc:
            self.failure = redact_text(str(exc), self.secrets)
            self.stop()
            pytest.exit(f"jetcheck: {self.failure}", returncode=3)
        self.target = target
        return target

    def cleanup(self, keep_anchor: bool = True) -> None:
        if self.target is None:
            return
        problems = asyncio.run(_cleanup(self.target, self.config.run_prefix, keep_anchor))
        self.cleanup_problems.extend(problems)

    def stop(self) -> None:
        if self.target is not None and not self.failure:
            self.cleanup(keep_anchor=False)
            self.target = None
        if self.provider is not None:
            self.provider.stop()
            self.provider = None


async def _probe_and_anchor(target: Target, prefix: str) -> ServerInfo:
    nc = await target.connect()
    try:
        info = await probe(nc)
        await delete_owned_streams(nc, prefix)  # what a crashed run with the same prefix left behind
        await create_anchor(nc, prefix)
        return info
    finally:
        await nc.close()


async def _cleanup(target: Target, prefix: str, keep_anchor: bool) -> list[str]:
    try:
        nc = await target.connect()
    except TargetError as exc:
        return [f"cleanup could not connect: {exc}"]
    try:
        return await delete_owned_streams(nc, prefix, keep_anchor)
    finally:
        await nc.close()


STATE = pytest.StashKey[RunState]()
RULE = pytest.StashKey[Rule]()
NA_REASON = pytest.StashKey[str]()
OBSERVED = pytest.StashKey[dict]()
LOG_OFFSET = pytest.StashKey[int]()
REPORTS = pytest.StashKey[dict]()


def _state(config: pytest.Config) -> RunState:
    return config.stash[STATE]


# --- options and configuration -----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jetcheck", "jetcheck conformance")
    for option in OPTIONS:
        env = f" [env {option.env}, ini {option.ini}]"
        group.addoption(option.flag, dest="jetcheck_" + option.name, default=None, help=option.help + env)
        parser.addini(option.ini, option.help)


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
        raise pytest.UsageError(f"jetcheck: {exc}") from None
    config.stash[STATE] = RunState(
        config=resolved,
        catalog=catalog,
        run_id=f"{resolved.run_prefix}-{int(time.time())}",
        started_at=_now(),
    )


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _hypothesis_settings(config: pytest.Config) -> settings:
    return settings.get_profile("jetcheck-" + _state(config).config.profile)


# --- collection: every check names a catalog rule ----------------------------------------------------------------


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    unknown = []
    for item in items:
        marker = item.get_closest_marker("rule")
        if marker is None:
            if _is_check(item):
                unknown.append(f"{item.nodeid}: no @pytest.mark.rule(...)")
            continue
        rule = state.catalog.get(marker.args[0] if marker.args else "")
        if rule is None:
            unknown.append(f"{item.nodeid}: rule {marker.args!r} is not in the catalog")
            continue
        item.stash[RULE] = rule
        item.add_marker(getattr(pytest.mark, rule.area))
        item.add_marker(getattr(pytest.mark, rule.level.lower()))
        item.add_marker(getattr(pytest.mark, rule.subject))
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(state.config.check_timeout))
        item.user_properties.append(("rule", rule.id))
    if unknown:
        raise pytest.UsageError("jetcheck: checks without a catalog rule:\n  " + "\n  ".join(unknown))


def _is_check(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return module is not None and module.__name__.startswith(CHECKS_PACKAGE)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(RULE in item.stash for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        shown = " ".join(f"{k}={v}" for k, v in _state(session.config).config.redacted().items() if v != "")
        reporter.write_line(f"jetcheck: {shown}")


# --- running a check ---------------------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """SIGTERM ends a run of checks as Ctrl-C does (pytest turns only SIGINT into KeyboardInterrupt), so the session
    finish still deletes the run's streams and stops a managed server. Kept until pytest unconfigures: a second
    signal during that cleanup still leaves pytest_unconfigure to stop the server."""
    if any(RULE in item.stash for item in session.items):
        previous = interrupt_on_sigterm()
        session.config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    rule = item.stash.get(RULE, None)
    if rule is None:
        return
    state = _state(item.config)
    target = state.ensure_target()
    item.stash[OBSERVED] = {}
    if target.process is not None:
        item.stash[LOG_OFFSET] = target.process.log_offset()
    reason = _na_reason(rule, item, state)
    if reason:
        item.stash[NA_REASON] = reason
        na(reason)
    state.cleanup()


def _na_reason(rule: Rule, item: pytest.Item, state: RunState) -> str:
    assert state.server is not None and state.target is not None
    if version_tuple(state.server.version) < rule.since_tuple:
        return f"{rule.id} needs nats-server >= {rule.since}; the target runs {state.server.version}"
    for marker in item.iter_markers("needs"):
        for need in marker.args:
            if need not in NEEDS:
                raise pytest.UsageError(f"{item.nodeid}: unknown need {need!r}; known: {', '.join(NEEDS)}")
            if need == "managed" and not state.target.managed:
                return NEEDS[need]
            if need == "cluster" and not state.server.cluster:
                return NEEDS[need]
    return ""


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if RULE in item.stash and NA_REASON not in item.stash:
        _state(item.config).cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if RULE in item.stash:
        reports = item.stash.setdefault(REPORTS, {})
        reports[report.when] = (report, call.excinfo)
        if report.when == "teardown":
            _record(item, reports)
    return report


# Failures of these kinds leave the outcome unknown (the suite could not finish asking), not a server deviation.
INDETERMINATE = (
    TargetError,
    ConnectionError,
    nats.errors.ConnectionClosedError,
    nats.errors.NoServersError,
    nats.errors.TimeoutError,
    asyncio.TimeoutError,
)


def _classify(item: pytest.Item, reports: dict) -> tuple[str, str]:
    setup, setup_exc = reports.get("setup", (None, None))
    if NA_REASON in item.stash:
        return "na", item.stash[NA_REASON]
    if setup is not None and setup.skipped:
        reason = setup_exc.value.msg if setup_exc is not None else "skipped"
        return ("na", reason[len(NA_PREFIX) :]) if reason.startswith(NA_PREFIX) else ("skip", reason)
    if setup is not None and setup.failed:
        return "error", f"setup failed: {_describe(setup_exc)}"
    call, call_exc = reports.get("call", (None, None))
    if call is not None and call.skipped:
        reason = call_exc.value.msg if call_exc is not None else "skipped"
        return ("na", reason[len(NA_PREFIX) :]) if reason.startswith(NA_PREFIX) else ("skip", reason)
    if call is not None and call.failed:
        text = _describe(call_exc)
        if call_exc is not None and (call_exc.errisinstance(INDETERMINATE) or text.startswith("Failed: Timeout")):
            return "error", text
        return "fail", text
    teardown, teardown_exc = reports.get("teardown", (None, None))
    if teardown is not None and teardown.failed:
        return "error", f"teardown failed: {_describe(teardown_exc)}"
    return "pass", ""


def _describe(excinfo: pytest.ExceptionInfo | None, limit: int = 4000) -> str:
    if excinfo is None:
        return ""
    text = excinfo.exconly().strip()
    if isinstance(excinfo.value, BaseExceptionGroup):  # e.g. Hypothesis' FlakyFailure: show what it groups
        inner = "\n".join(f"  - {type(e).__name__}: {e}" for e in excinfo.value.exceptions)
        text = f"{text}\n{inner}"
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"


def _record(item: pytest.Item, reports: dict) -> None:
    state = _state(item.config)
    rule = item.stash[RULE]
    status, message = _classify(item, reports)
    duration = sum(rep.duration for rep, _ in reports.values())
    server_log = ""
    if status in ("fail", "error") and state.target is not None and state.target.process is not None:
        server_log = state.target.process.log_since(item.stash.get(LOG_OFFSET, 0))
    result = CheckResult(
        id=rule.id,
        status=status,
        area=rule.area,
        title=rule.statement,
        level=rule.level,
        source=rule.source,
        min_version=rule.since,
        server_version=state.server.version if state.server else "",
        client=_client_info(state.config),
        duration_s=round(duration, 4),
        message=redact_text(message, state.secrets),
        check=item.nodeid,
        run_id=state.run_id,
        observed=item.stash.get(OBSERVED, {}),
        server_log=redact_text(server_log, state.secrets),
        subject=rule.subject,
    )
    _append_result(state, result)


def _append_result(state: RunState, result: CheckResult) -> None:
    if not state.results:
        state.out_dir.mkdir(parents=True, exist_ok=True)
        (state.out_dir / RESULTS_FILE).write_text("")
    state.results.append(result)
    with open(state.out_dir / RESULTS_FILE, "a", encoding="utf-8") as fh:
        fh.write(result.to_json() + "\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    state.stop()
    if not state.results:
        return
    counts: dict[str, int] = {}
    for result in state.results:
        counts[result.status] = counts.get(result.status, 0) + 1
    run = {
        "run_id": state.run_id,
        "jetcheck_version": jetcheck.__version__,
        "started_at": state.started_at,
        "finished_at": _now(),
        "options": state.config.redacted(),
        "server": state.server.as_dict() if state.server else {},
        "target": "managed" if state.config.managed else "url",
        "client": _client_info(state.config),
        "python": platform.python_version(),
        "counts": counts,
        "cleanup_problems": state.cleanup_problems,
    }
    (state.out_dir / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.stop()


# --- fixtures for checks -----------------------------------------------------------------------------------------


class Names:
    """Names for what one check creates; all carry the run prefix, so cleanup finds them and nothing else."""

    def __init__(self, prefix: str, counter: itertools.count) -> None:
        self.prefix = prefix
        self._counter = counter

    def _next(self) -> int:
        return next(self._counter)

    def stream(self, tag: str = "S") -> str:
        return f"{self.prefix}_{tag}{self._next()}"

    def subject(self, tag: str = "s") -> str:
        """A subject root unique to this run and call; streams bind `<root>.>`."""
        return f"{self.prefix}.{tag}{self._next()}"

    def consumer(self, tag: str = "C") -> str:
        return f"{self.prefix}_{tag}{self._next()}"

    def bucket(self, tag: str = "b") -> str:
        return f"{self.prefix}_{tag}{self._next()}"


@pytest.fixture(scope="session")
def jetcheck_config(pytestconfig: pytest.Config) -> Config:
    return _state(pytestconfig).config


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    """The server under test (started and probed once per run)."""
    return _state(request.config).ensure_target()


@pytest.fixture
def server_info(request: pytest.FixtureRequest, target: Target) -> ServerInfo:
    state = _state(request.config)
    assert state.server is not None
    return state.server


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    state = _state(request.config)
    return Names(state.config.run_prefix, state.names)


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


@pytest.fixture
def client(jetcheck_config: Config):
    """The client under test (`--jetcheck-client`), as a conformance.clients adapter."""
    return adapter_for(jetcheck_config.client)


@pytest_asyncio.fixture
async def proxied(target: Target):
    """A fault-injection NatsProxy in front of the target (managed or URL), stopped after the check; it speaks the
    target's TLS itself, with the context the client would use, so faults reach TLS targets too."""
    tls = target.credentials.tls_context() or ssl.create_default_context()
    proxy = await NatsProxy.for_url(target.url, upstream_tls=tls).start()
    yield proxy
    await proxy.stop()
