"""Breakers for the oracle area: deviations no example check was written for, each of a kind an oracle must catch
(a refusal that stored its message, a storage or replica count that changes behaviour, an update that is not a
create, consumers that mis-select by filter or start sequence)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from jetcheck.fixtures.nats_protocol import Frame
from jetcheck.fixtures.proxy import Breaker, HookResult

from .api_subjects import CONSUMER_CREATE, CREATE_SUBJECT, UPDATE_SUBJECT
from .breakers import RepliesWatched, dropping, headers_remover, request_rewriting

EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
MSG_ID = "Nats-Msg-Id"
WRONG_LAST_SEQUENCE = {"error": {"code": 400, "err_code": 10071, "description": "wrong last sequence: 0"}}


class _StoreThenRefuse:
    """A publish expecting a last sequence reaches the server without the expectation (so it is stored), and its
    PubAck reaches the client as the refusal 10071."""

    def __init__(self) -> None:
        self.acks = RepliesWatched()

    def requests(self, frame: Frame) -> HookResult:
        headers = frame.header_block() if frame.op == "HPUB" else None
        if headers is None or headers.get(EXPECTED_LAST_SEQUENCE) is None or not frame.reply:
            return frame
        headers.remove(EXPECTED_LAST_SEQUENCE)
        self.acks.watch(frame)
        return frame.with_headers(headers if headers.items else None)

    def replies(self, frame: Frame) -> HookResult:
        if not self.acks.is_watched_reply(frame):
            return frame
        return replace(frame, payload=json.dumps(WRONG_LAST_SEQUENCE).encode())


def _store_then_refuse() -> Breaker:
    state = _StoreThenRefuse()
    return Breaker("store-then-refuse", state.requests, state.replies)


def _losing_dedup_where(name: str, field: str, value: object) -> Callable[[], Breaker]:
    """Streams created with `field` = `value` lose Nats-Msg-Id on every publish to their subjects (so they never
    dedup), as a storage or replication layer that dropped it would."""

    def make() -> Breaker:
        prefixes: list[str] = []

        def hook(frame: Frame) -> HookResult:
            if frame.is_publish and CREATE_SUBJECT.match(frame.subject):
                body = json.loads(frame.payload or b"{}")
                if body.get(field) == value:
                    prefixes.extend(s[:-1] for s in body.get("subjects", []) if s.endswith(">"))
                return frame
            headers = frame.header_block() if frame.op == "HPUB" else None
            if headers is None or not any(frame.subject.startswith(p) for p in prefixes) or not headers.remove(MSG_ID):
                return frame
            return frame.with_headers(headers if headers.items or headers.status else None)

        return Breaker(name, hook)

    return make


def _drop_last_filter(body: dict) -> bool:
    filters = (body.get("config") or {}).get("filter_subjects")
    if not isinstance(filters, list) or len(filters) < 2:
        return False
    filters.pop()
    return True


def _start_one_later(body: dict) -> bool:
    config = body.get("config") or {}
    if "opt_start_seq" not in config:
        return False
    config["opt_start_seq"] += 1
    return True


BREAKERS: dict[str, Callable[[], Breaker]] = {
    "store-then-refuse": _store_then_refuse,
    "strip-expected-last-msg-id": lambda: Breaker("strip-expected-last-msg-id", headers_remover(EXPECTED_LAST_MSG_ID)),
    "memory-streams-lose-dedup": _losing_dedup_where("memory-streams-lose-dedup", "storage", "memory"),
    "replicated-streams-lose-dedup": _losing_dedup_where("replicated-streams-lose-dedup", "num_replicas", 3),
    "consumer-drop-last-filter": request_rewriting("consumer-drop-last-filter", CONSUMER_CREATE, _drop_last_filter),
    "consumer-start-one-later": request_rewriting("consumer-start-one-later", CONSUMER_CREATE, _start_one_later),
    "update-drop-per-subject-limit": request_rewriting(
        "update-drop-per-subject-limit", UPDATE_SUBJECT, dropping("max_msgs_per_subject")
    ),
}
