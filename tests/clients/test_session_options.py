"""The options objects of a session's calls (base.py: OrderedOptions, PushOptions, ConsumeOptions, ConnectOptions,
KvWatchOptions) reach each client as it takes them: a driver as PROTOCOL.md's request fields, nats-py as its own
keywords, a variant as the options the application gave."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from jetcheck.conformance.clients.base import (
    ConnectOptions,
    ConsumeOptions,
    Documented,
    OrderedOptions,
    PushOptions,
    StartPolicy,
)
from jetcheck.conformance.clients.driver_adapter import DriverAdapter, DriverKeyValue, DriverSession
from jetcheck.conformance.clients.natspy import NatsPySession
from jetcheck.credentials import Credentials
from jetcheck.testing import variants

MIDDLE = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


class RecordingProcess:
    """A driver process that answers every request with `{}` and keeps each one's op and fields."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []
        self.secrets: list[str] = []
        self.dead = ""

    async def request(self, op: str, **fields) -> dict:
        self.requests.append((op, fields))
        return {}

    def route(self, kind: str, key: str, handler) -> None:
        pass

    def unroute(self, kind: str, key: str) -> None:
        pass


@pytest.fixture
def process() -> RecordingProcess:
    return RecordingProcess()


@pytest.fixture
def driver_session(process) -> DriverSession:
    return DriverSession(process, "s1", itertools.count(1))


CONSUMPTION = [
    pytest.param(
        "ordered",
        OrderedOptions(idle_heartbeat=0.5, start=StartPolicy("by_start_time", time=MIDDLE), inactive_threshold=2.0),
        {
            "subject": "s.>",
            "idle_heartbeat_s": 0.5,
            "inactive_threshold_s": 2.0,
            "start": {"deliver_policy": "by_start_time", "seq": None, "time": MIDDLE.isoformat()},
        },
        id="ordered",
    ),
    pytest.param(
        "ordered",
        OrderedOptions(),
        {"subject": "s.>", "idle_heartbeat_s": None, "start": None, "inactive_threshold_s": None},
        id="ordered-defaults",
    ),
    pytest.param(
        "push",
        PushOptions(idle_heartbeat=0.5, durable="D", queue="Q", inactive_threshold=3.0),
        {"subject": "s.>", "idle_heartbeat_s": 0.5, "durable": "D", "queue": "Q", "inactive_threshold_s": 3.0},
        id="push",
    ),
    pytest.param(
        "consume",
        ConsumeOptions(idle_heartbeat=1.0, expires=4.0, max_messages=10),
        {"consumer": "s.>", "idle_heartbeat_s": 1.0, "expires_s": 4.0, "max_messages": 10},
        id="consume",
    ),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("call", "options", "fields"), CONSUMPTION)
async def test_a_consumption_request_reaches_the_driver_with_the_protocols_field_names(
    driver_session, process, call, options, fields
):
    """Durations in seconds carry `_s`, a start policy goes as its JSON, every other setting keeps its name; a
    setting left unset is sent as null (PROTOCOL.md: the client's default)."""
    await getattr(driver_session, call)("S", "s.>", options)
    ((op, sent),) = process.requests
    assert op == call
    assert sent == {"session": "s1", "sub": sent["sub"], "stream": "S", **fields}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("options", "fields"),
    [
        (ConnectOptions(), {"reconnect_wait_s": 0.1}),
        (
            ConnectOptions(reconnect_wait=0.5, api_prefix="fromA", inbox_prefix="forI"),
            {"reconnect_wait_s": 0.5, "api_prefix": "fromA", "inbox_prefix": "forI"},
        ),
    ],
)
async def test_connect_sends_the_prefixes_only_when_set(process, monkeypatch, options, fields):
    adapter = DriverAdapter("fake", Documented(ordered_idle_heartbeat_s=5.0, missed_heartbeats=""), lambda: ([], None))
    monkeypatch.setattr(adapter, "process", lambda: process)
    await adapter.connect("nats://127.0.0.1:1", Credentials(user="u"), options)
    ((op, sent),) = process.requests
    assert (op, sent) == (
        "connect",
        {"session": "s1", "url": "nats://127.0.0.1:1", "credentials": {"user": "u"}, **fields},
    )


@pytest.mark.asyncio
async def test_a_kv_watch_sends_its_keys_and_every_option(driver_session, process):
    kv = DriverKeyValue(driver_session, "B")
    await kv.watch("a.>", meta_only=True)
    ((op, sent),) = process.requests
    assert op == "kv_watch"
    assert {k: v for k, v in sent.items() if k != "sub"} == {
        "session": "s1",
        "bucket": "B",
        "keys": ["a.>"],
        "include_history": False,
        "updates_only": False,
        "ignore_deletes": False,
        "meta_only": True,
    }


@pytest.mark.asyncio
async def test_a_kv_watch_refuses_an_option_adr8_does_not_have(driver_session, process):
    with pytest.raises(TypeError, match="unexpected keyword argument 'headers_only'"):
        await DriverKeyValue(driver_session, "B").watch("a.>", headers_only=True)
    assert process.requests == []


@pytest.mark.asyncio
async def test_natspy_push_passes_each_setting_as_js_subscribes_keyword(monkeypatch):
    session = NatsPySession()
    asked: list[dict] = []

    async def subscribe(stream: str, subject: str, **options):
        asked.append(options)

    monkeypatch.setattr(session, "subscribe", subscribe)
    await session.push("S", "s.>", PushOptions(idle_heartbeat=0.5, durable="D", queue="Q"))
    (options,) = asked
    assert {k: v for k, v in options.items() if k != "config"} == {
        "idle_heartbeat": 0.5,
        "durable": "D",
        "queue": "Q",
        "inactive_threshold": None,
    }


class RecordingSession:
    """The session an adr37-heartbeats wrapper is around: it keeps the options of each push it is asked for."""

    def __init__(self) -> None:
        self.pushed: list[PushOptions] = []

    async def push(self, stream: str, subject: str, options: PushOptions) -> str:
        self.pushed.append(options)
        return "the client's own"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "options",
    [PushOptions(), PushOptions(idle_heartbeat=0.5, durable="D"), PushOptions(idle_heartbeat=0.5, queue="Q")],
    ids=["no-heartbeat", "durable", "queue"],
)
async def test_adr37_heartbeats_leaves_a_push_without_a_heartbeat_or_with_more_to_the_client(options):
    """Only an ephemeral push with a heartbeat and nothing else is watched by the variant; any other is nats-py's
    own, with the options as given."""
    inner = RecordingSession()
    assert await variants.Adr37Heartbeats(inner).push("S", "s.>", options) == "the client's own"
    assert inner.pushed == [options]
