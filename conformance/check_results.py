"""A check's result from pytest's reports of its setup, call and teardown: its status (pass, fail, error, disagree, na,
skip), its message in plain words, and the CheckResult written to results.jsonl."""

from __future__ import annotations

import asyncio

import nats
import pytest

from jetcheck.fixtures.errors import TargetError
from jetcheck.records import CheckResult
from jetcheck.redact import redact_text

from .clients.base import Indeterminate, NotInRelease
from .clients.deviations import deviation_for
from .failure_text import describe, plain
from .run_record import RunRecord, append_result, client_info
from .stash_keys import NA_REASON, OBSERVED, PROBED, RULE, SERVER_LOG, run_of

NA_PREFIX = "na: "
DISAGREE_PREFIX = "documents disagree: "


def na(reason: str) -> None:
    """End the running check as `na`: the target cannot support what the rule needs."""
    pytest.skip(NA_PREFIX + reason)


def documents_disagree(followed: str, departed: str, did: str) -> None:
    """End the running check as `disagree`: two documents say different things about its rule, and the target did
    what one says. `followed` is that document with its words, `departed` the other with its own, `did` what the
    target did. Not a failure of the rule (jetcheck.verdict): a target cannot be held to both."""
    pytest.skip(f"{DISAGREE_PREFIX}the target follows {followed}, not {departed}: {did}")


def _skipped(reason: str) -> tuple[str, str, None]:
    """The status and message of a check that ended by pytest.skip: na(), documents_disagree() or a plain skip."""
    for prefix, status in ((NA_PREFIX, "na"), (DISAGREE_PREFIX, "disagree")):
        if reason.startswith(prefix):
            return status, reason.removeprefix(prefix), None
    return "skip", reason, None


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


def classify(item: pytest.Item, reports: dict) -> tuple[str, str, pytest.ExceptionInfo | None]:
    """The check's status, its message, and the exception behind a fail or error."""
    setup, setup_exc = reports.get("setup", (None, None))
    if NA_REASON in item.stash:
        return "na", item.stash[NA_REASON], None
    for _, excinfo in reports.values():
        if excinfo is not None and excinfo.errisinstance(NotInRelease):
            return "na", str(excinfo.value), None
    if setup is not None and setup.skipped:
        return _skipped(setup_exc.value.msg if setup_exc is not None else "skipped")
    if setup is not None and setup.failed:
        return "error", f"setup failed: {plain(setup_exc)}", setup_exc
    call, call_exc = reports.get("call", (None, None))
    if call is not None and call.skipped:
        return _skipped(call_exc.value.msg if call_exc is not None else "skipped")
    if call is not None and call.failed:
        indeterminate = call_exc is not None and (
            call_exc.errisinstance(INDETERMINATE) or describe(call_exc).startswith("Failed: Timeout")
        )
        return "error" if indeterminate else "fail", plain(call_exc), call_exc
    teardown, teardown_exc = reports.get("teardown", (None, None))
    if teardown is not None and teardown.failed:
        return "error", f"teardown failed: {plain(teardown_exc)}", teardown_exc
    return "pass", "", None


def record(item: pytest.Item, reports: dict) -> None:
    run = run_of(item.config)
    status, message, excinfo = classify(item, reports)
    raw = describe(excinfo)
    detail = "" if not raw or raw in message or raw.endswith(message) else raw
    duration = sum(rep.duration for rep, _ in reports.values()) - item.stash.get(PROBED, 0.0)
    server_log = item.stash.get(SERVER_LOG, "") if status in ("fail", "error") else ""
    deviation = deviation_for(client_info(run.config)["name"], item.stash[RULE].id) if status == "fail" else None
    if deviation is not None:
        message = f"{deviation.label()}. {message}"
    append_result(run, result_of(item, run, status, message, duration, server_log, detail))


def result_of(
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
        client=client_info(run.config),
        duration_s=round(duration, 4),
        message=redact_text(message, run.secrets),
        check=item.nodeid,
        run_id=run.run_id,
        observed=item.stash.get(OBSERVED, {}),
        server_log=redact_text(server_log, run.secrets),
        detail=redact_text(detail, run.secrets),
    )
