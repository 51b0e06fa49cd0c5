"""Breakers of the stream and consumer features: mirrors and sources (ADR-59), republish (ADR-28), metadata (ADR-33),
compression (ADR-35), and what nats-server added from 2.11: priority groups (ADR-42), per-message TTL (ADR-43),
consumer pause, API levels and asset metadata (ADR-44), counters (ADR-49), atomic batch publish (ADR-50), message
schedules (ADR-51)."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from jetcheck.fixtures.nats_protocol import Frame, NatsHeaders
from jetcheck.fixtures.proxy import Breaker, Hook, HookResult

from .api_subjects import (
    ACCOUNT_INFO,
    ASSET_CREATE,
    CONSUMER_CREATE,
    CREATE_SUBJECT,
    MSG_GET_SUBJECT,
    PAUSE_SUBJECT,
    PULL_NEXT,
    RESET_SUBJECT,
    UPDATE_SUBJECT,
)
from .breakers import ReplyRewriter, compose, dropping, headers_remover, json_request_rewriter, request_rewriting

TTL = "Nats-TTL"
WHOLE_SECONDS = re.compile(r"^(\d+)s?$")
FOREVER_S = 3600.0  # a pause that outlasts any check
REQUIRED_LEVEL = "Nats-Required-Api-Level"
ANY_REQUEST = re.compile("")  # replies to any request: API calls, and publishes whose ack is the reply
# the documented refusals of priority group configs (10159, 10162, 10178), counter increments (10169, 10171) and
# schedules (10189, 10190, and 10166 for a schedule TTL on a stream without TTLs)
FEATURE_REFUSALS = frozenset({10159, 10162, 10178, 10169, 10171, 10189, 10190, 10166})
INCR = "Nats-Incr"
STREAM_SOURCE = "Nats-Stream-Source"
COUNTER_SOURCES = "Nats-Counter-Sources"
SCHEDULE, SCHEDULE_TARGET, SCHEDULER, NEXT = (
    "Nats-Schedule",
    "Nats-Schedule-Target",
    "Nats-Scheduler",
    "Nats-Schedule-Next",
)
AT = re.compile(r"^@at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z$")
EARLY_S = 2
BATCH_HEADERS = ("Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit")
INTEGER = re.compile(r"^[+-]?\d+$")


def header_rewriter(name: str, rewrite: Callable[[str], str | None]) -> Hook:
    """A hook that gives publishes' header `name` the value `rewrite` makes of it (None leaves it as it is)."""
    raw = name.encode()

    def hook(frame: Frame) -> HookResult:
        if frame.op != "HPUB" or frame.headers is None or raw not in frame.headers:
            return frame
        headers = NatsHeaders.parse(frame.headers)
        value = rewrite(headers.get(name) or "")
        if value is None:
            return frame
        headers.remove(name)
        headers.items.append((name, value))
        return frame.with_headers(headers)

    return hook


def _halved_ttl(ttl: str) -> str | None:
    """A TTL of whole seconds, halved: its message expires too early."""
    found = WHOLE_SECONDS.match(ttl)
    return f"{int(found.group(1)) // 2}s" if found and int(found.group(1)) >= 2 else None


def _valid_increment(increment: str) -> str | None:
    """An increment that is no integer becomes +1: a counter stream takes what it must reject."""
    return None if INTEGER.match(increment) else "+1"


def _as_bad_request(body: dict) -> bool:
    """A refusal with one of FEATURE_REFUSALS is answered as the general 400/10003 'bad request': the server still
    refuses, but not with the code the errors table documents for the case."""
    error = body.get("error")
    if not isinstance(error, dict) or error.get("err_code") not in FEATURE_REFUSALS:
        return False
    body["error"] = {"code": 400, "err_code": 10003, "description": "bad request"}
    return True


def _earlier_schedule(schedule: str) -> str | None:
    """An '@at' schedule EARLY_S seconds earlier: it fires before its time."""
    found = AT.match(schedule)
    if found is None:
        return None
    at = datetime.fromisoformat(found.group(1)).replace(tzinfo=UTC).timestamp() - EARLY_S
    return "@at " + datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def _pause_forever(body: dict) -> bool:
    """A pause until some time becomes a pause for an hour: the consumer does not resume by itself."""
    if not body.get("pause_until"):
        return False
    body["pause_until"] = _rfc3339(time.time() + FOREVER_S)
    return True


def _pause_on_resume(body: dict) -> bool:
    """A resume (no pause_until) becomes a pause for an hour."""
    if body.get("pause_until"):
        return False
    body["pause_until"] = _rfc3339(time.time() + FOREVER_S)
    return True


def _strip_message_header(body: dict, header: str) -> bool:
    """A MSG.GET reply's message loses `header`; False where it had none."""
    message = body.get("message") or {}
    if not message.get("hdrs"):
        return False
    headers = NatsHeaders.parse(base64.b64decode(message["hdrs"]))
    if not headers.remove(header):
        return False
    message["hdrs"] = base64.b64encode(headers.serialize()).decode()
    return True


def _strip_stream_source(body: dict) -> bool:
    """A MSG.GET reply's message loses its Nats-Stream-Source header."""
    return _strip_message_header(body, STREAM_SOURCE)


def _strip_counter_sources(body: dict) -> bool:
    """A MSG.GET reply's message loses its Nats-Counter-Sources header: an aggregate counter's sources unrecorded."""
    return _strip_message_header(body, COUNTER_SOURCES)


def _origins(body: dict) -> list[dict]:
    """The sources and the mirror of a stream create."""
    return [o for o in [*(body.get("sources") or []), body.get("mirror")] if isinstance(o, dict)]


def _drop_source_transforms(body: dict) -> bool:
    """A stream create's sources and mirror lose their subject_transforms."""
    origins = [o for o in _origins(body) if "subject_transforms" in o]
    for origin in origins:
        del origin["subject_transforms"]
    return bool(origins)


def _drop_source_filters(body: dict) -> bool:
    """A stream create's sources and mirror lose their filter_subject."""
    origins = [o for o in _origins(body) if "filter_subject" in o]
    for origin in origins:
        del origin["filter_subject"]
    return bool(origins)


def _group_jobs(body: dict) -> bool:
    """Every pull request names the group `jobs`, whatever it named: a pull outside a valid group is served."""
    if body.get("group") == "jobs":
        return False
    body["group"] = "jobs"
    return True


def _create_dropping_metadata() -> Breaker:
    """Stream and consumer creates lose the metadata they ask for."""
    return Breaker(
        "create-drop-metadata",
        compose(
            json_request_rewriter(CREATE_SUBJECT, dropping("metadata")),
            json_request_rewriter(CONSUMER_CREATE, dropping("metadata", within="config")),
        ),
    )


def _pause_ignored() -> Breaker:
    """The server never pauses: pause requests resume, and consumer creates lose their pause_until."""
    return Breaker(
        "pause-ignored",
        compose(
            json_request_rewriter(PAUSE_SUBJECT, dropping("pause_until")),  # a resume
            json_request_rewriter(CONSUMER_CREATE, dropping("pause_until", within="config")),
        ),
    )


def _strip_server_metadata(body: dict) -> bool:
    """A create reply's config loses the _nats.* metadata the server sets."""
    metadata = (body.get("config") or {}).get("metadata")
    if not isinstance(metadata, dict):
        return False
    server_set = [key for key in metadata if key.startswith("_nats.")]
    for key in server_set:
        del metadata[key]
    return bool(server_set)


# reliable sourcing and consumer reset (ADR-60), persist modes (ADR-56)


def _drop_source_consumer(body: dict) -> bool:
    """A stream create's sources and mirror lose the pre-created consumer they name: the server makes its own."""
    origins = [o for o in [*(body.get("sources") or []), body.get("mirror")] if isinstance(o, dict) and "consumer" in o]
    for origin in origins:
        del origin["consumer"]
    return bool(origins)


def _reset_to_first(body: dict) -> bool:
    """A reset without a sequence (to the ack floor) becomes a reset to sequence 1."""
    if body.get("seq"):
        return False
    body["seq"] = 1
    return True


def _async_persist(body: dict) -> bool:
    """A stream create without persist_mode (or with default) asks for async."""
    if body.get("persist_mode") not in (None, "", "default"):
        return False
    body["persist_mode"] = "async"
    return True


class _UpdateKeepsSources:
    """Updates of a stream created with sources carry those sources again: removing a source is lost."""

    def __init__(self) -> None:
        self.sources: dict[str, list] = {}
        self.remember_creates = json_request_rewriter(CREATE_SUBJECT, self.remember)
        self.keep_on_update = json_request_rewriter(UPDATE_SUBJECT, self.keep)

    def remember(self, body: dict) -> bool:
        if body.get("sources"):
            self.sources[body.get("name")] = body["sources"]
        return False

    def keep(self, body: dict) -> bool:
        created = self.sources.get(body.get("name"))
        if not created or body.get("sources"):
            return False
        body["sources"] = created
        return True

    def breaker(self) -> Breaker:
        return Breaker("update-keeps-sources", lambda frame: self.keep_on_update(self.remember_creates(frame)))


BREAKERS: dict[str, Callable[[], Breaker]] = {
    "strip-ttl": lambda: Breaker("strip-ttl", headers_remover(TTL)),
    "ttl-halved": lambda: Breaker("ttl-halved", header_rewriter(TTL, _halved_ttl)),
    "create-drop-marker-ttl": request_rewriting(
        "create-drop-marker-ttl", CREATE_SUBJECT, dropping("subject_delete_marker_ttl")
    ),
    "pause-ignored": _pause_ignored,
    "pause-forever": request_rewriting("pause-forever", PAUSE_SUBJECT, _pause_forever),
    "pause-on-resume": request_rewriting("pause-on-resume", PAUSE_SUBJECT, _pause_on_resume),
    "info-drop-api-level": lambda: ReplyRewriter(ACCOUNT_INFO, dropping("api")).breaker("info-drop-api-level"),
    "strip-asset-metadata": lambda: ReplyRewriter(ASSET_CREATE, _strip_server_metadata).breaker("strip-asset-metadata"),
    "strip-required-level": lambda: Breaker("strip-required-level", headers_remover(REQUIRED_LEVEL)),
    "refusals-as-bad-request": lambda: ReplyRewriter(ANY_REQUEST, _as_bad_request).breaker("refusals-as-bad-request"),
    "create-drop-republish": request_rewriting("create-drop-republish", CREATE_SUBJECT, dropping("republish")),
    "create-drop-metadata": _create_dropping_metadata,
    "create-drop-compression": request_rewriting("create-drop-compression", CREATE_SUBJECT, dropping("compression")),
    "strip-incr": lambda: Breaker("strip-incr", headers_remover(INCR)),
    "incr-made-valid": lambda: Breaker("incr-made-valid", header_rewriter(INCR, _valid_increment)),
    "create-drop-counter": request_rewriting("create-drop-counter", CREATE_SUBJECT, dropping("allow_msg_counter")),
    "create-drop-mirror": request_rewriting("create-drop-mirror", CREATE_SUBJECT, dropping("mirror")),
    "create-drop-sources": request_rewriting("create-drop-sources", CREATE_SUBJECT, dropping("sources")),
    "source-drop-transforms": request_rewriting("source-drop-transforms", CREATE_SUBJECT, _drop_source_transforms),
    "source-drop-filters": request_rewriting("source-drop-filters", CREATE_SUBJECT, _drop_source_filters),
    "create-drop-stream-transform": request_rewriting(
        "create-drop-stream-transform", CREATE_SUBJECT, dropping("subject_transform")
    ),
    "strip-stream-source": lambda: ReplyRewriter(MSG_GET_SUBJECT, _strip_stream_source).breaker("strip-stream-source"),
    "strip-counter-sources": lambda: ReplyRewriter(MSG_GET_SUBJECT, _strip_counter_sources).breaker(
        "strip-counter-sources"
    ),
    "strip-schedule-headers": lambda: Breaker("strip-schedule-headers", headers_remover(SCHEDULE, SCHEDULE_TARGET)),
    "schedule-at-early": lambda: Breaker("schedule-at-early", header_rewriter(SCHEDULE, _earlier_schedule)),
    "strip-schedule-next": lambda: Breaker("strip-schedule-next", headers_remover(SCHEDULER, NEXT)),
    "create-drop-schedules": request_rewriting(
        "create-drop-schedules", CREATE_SUBJECT, dropping("allow_msg_schedules")
    ),
    "strip-batch-headers": lambda: Breaker("strip-batch-headers", headers_remover(*BATCH_HEADERS)),
    "create-drop-atomic": request_rewriting("create-drop-atomic", CREATE_SUBJECT, dropping("allow_atomic")),
    "create-drop-priority": request_rewriting(
        "create-drop-priority",
        CONSUMER_CREATE,
        dropping("priority_policy", "priority_groups", "priority_timeout", within="config"),
    ),
    "pull-group-jobs": request_rewriting("pull-group-jobs", PULL_NEXT, _group_jobs),
    "pull-drop-pin-id": request_rewriting("pull-drop-pin-id", PULL_NEXT, dropping("id")),
    "pull-drop-min-pending": request_rewriting("pull-drop-min-pending", PULL_NEXT, dropping("min_pending")),
    "pull-drop-min-ack-pending": request_rewriting("pull-drop-min-ack-pending", PULL_NEXT, dropping("min_ack_pending")),
    "pull-drop-priority": request_rewriting("pull-drop-priority", PULL_NEXT, dropping("priority")),
    "create-drop-priority-timeout": request_rewriting(
        "create-drop-priority-timeout", CONSUMER_CREATE, dropping("priority_timeout", within="config")
    ),
    "source-drop-consumer": request_rewriting("source-drop-consumer", CREATE_SUBJECT, _drop_source_consumer),
    "update-keeps-sources": lambda: _UpdateKeepsSources().breaker(),
    "consumer-drop-redelivery": request_rewriting(
        "consumer-drop-redelivery", CONSUMER_CREATE, dropping("ack_wait", "backoff", "max_deliver", within="config")
    ),
    "reset-drop-seq": request_rewriting("reset-drop-seq", RESET_SUBJECT, dropping("seq")),
    "reset-to-first": request_rewriting("reset-to-first", RESET_SUBJECT, _reset_to_first),
    "create-drop-persist-mode": request_rewriting("create-drop-persist-mode", CREATE_SUBJECT, dropping("persist_mode")),
    "create-async-persist": request_rewriting("create-async-persist", CREATE_SUBJECT, _async_persist),
}
