"""No check passes or fails on a silence it cannot explain: every helper that waits for something (a delivery, a
watch update, a status, a reply) is driven here through each outcome class, and the checks' source is read so that
no wait escapes the probe (conformance.silence).

Outcome classes: `answered` (what was awaited came), `silent` (nothing came, and the silent party answers a ping right
after: the check may judge the silence), `no-answer` (nothing came and the party does not answer the ping either) and
`lost` (the wait or the ping ends with a lost connection). The last two are never a pass and never a fail: the check
ends in `error`.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import nats.errors
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from jetcheck.conformance import jsapi, watching
from jetcheck.conformance.check_results import INDETERMINATE
from jetcheck.conformance.checks import kv_read_paths, test_heartbeat, test_push, test_reads
from jetcheck.conformance.clients.base import Delivery, Inbox, Watch
from jetcheck.conformance.clients.driver_pipe import DriverConnectionError, DriverTimeout
from jetcheck.conformance.silence import answering, deliveries

KINDS = ("answered", "silent", "no-answer", "lost")
CONFORMANCE = Path(jsapi.__file__).parent
SHORT_S = 0.01


class Session:
    """A client session whose ping is answered, not answered, or ends with a lost connection."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.pinged = 0

    async def ping(self, timeout: float) -> None:
        self.pinged += 1
        if self.kind == "no-answer":
            raise DriverTimeout("timeout", "the nats.go driver did not answer ping within 5 s")
        if self.kind == "lost":
            raise DriverConnectionError("connection", "ping: nats: connection closed")


class Subscription:
    """A nats-py subscription that hands out `messages`, then times out (or loses its connection)."""

    def __init__(self, messages: list[Msg], lost: bool) -> None:
        self.messages, self.lost = list(messages), lost

    async def next_msg(self, timeout: float = 1.0) -> Msg:
        if self.messages:
            return self.messages.pop(0)
        if self.lost:
            raise nats.errors.ConnectionClosedError
        await asyncio.sleep(0)
        raise nats.errors.TimeoutError

    async def unsubscribe(self) -> None:
        pass


class Connection(Client):
    """A nats-py connection whose subscriptions deliver `messages` and whose round trip (flush) is answered, or not,
    as `kind` says."""

    def __init__(self, kind: str, messages: list[Msg]) -> None:
        super().__init__()
        self.kind = kind
        self.sub = Subscription(messages if kind == "answered" else [], lost=kind == "lost")
        self.flushed = 0

    async def flush(self, timeout: int = 10) -> None:
        self.flushed += 1
        if self.kind == "no-answer":
            raise nats.errors.TimeoutError
        if self.kind == "lost":
            raise nats.errors.ConnectionClosedError

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, subject: str, *args, **kwargs) -> Subscription:
        return self.sub

    async def publish(self, subject: str, payload: bytes = b"", reply: str = "", headers=None) -> None:
        pass


def message(data: bytes = b"m", headers: dict[str, str] | None = None) -> Msg:
    return Msg(_client=None, subject="s", data=data, headers=headers)  # type: ignore[arg-type]


def delivery(n: int) -> Delivery:
    return Delivery(stream_seq=n, consumer_seq=n, subject="s", payload=str(n).encode(), consumer="c", at=0.0)


@dataclass
class FakeSub:
    inbox: Inbox


def client_sub(kind: str, count: int) -> FakeSub:
    sub = FakeSub(Inbox())
    for n in range(1, count + 1 if kind == "answered" else 1):
        sub.inbox.put(delivery(n))
    return sub


class Named:
    name, version = "nats.go", "v1.48.0"


# Each helper, run as a check would run it in a given outcome class, with what it must do when its party answers:
# "returned" (it hands what it saw to the check) or "fail" (the silence breaks the rule it was written for).
HELPERS: dict[str, tuple[Callable[[str], Awaitable], str]] = {}


def helper(name: str, on_silence: str):
    def register(run: Callable[[str], Awaitable]):
        HELPERS[name] = (run, on_silence)
        return run

    return register


@helper("watching.watched", "fail")
async def _watched(kind: str):
    watch = Watch(lambda: asyncio.sleep(0), Session(kind))
    if kind == "answered":
        watch.inbox.put("a")
        watch.inbox.put(None)
    return await watching.watched(watch, str, expected="ADR-8 Watch")


@helper("watching.within", "fail")
async def _within(kind: str):
    async def history():
        if kind == "answered":
            return ["a"]
        await asyncio.Event().wait()

    return await watching.within(Session(kind), history(), "history()")


@helper("silence.deliveries", "returned")
async def _deliveries(kind: str):
    return await deliveries(client_sub(kind, 3), 3, SHORT_S, Session(kind))


@helper("test_push.received", "fail")
async def _received(kind: str):
    nc = Connection(kind, [message(b"1"), message(b"2")])
    return await test_push.received(nc, nc.sub, 2)


@helper("test_push.quiet", "returned")
async def _quiet(kind: str):
    return await test_push.quiet(Session(kind), client_sub(kind, 2))


@helper("test_push.delivered", "fail")
async def _delivered(kind: str):
    return await test_push.delivered(Named(), Session(kind), client_sub(kind, 2), 2)


@helper("test_heartbeat.statuses_until_done", "returned")
async def _statuses(kind: str):
    ended = message(b"", {"Status": "408", "Description": "Request Timeout"})
    nc = Connection(kind, [message(b"", {"Status": "100", "Description": "Idle Heartbeat"}), ended])
    return await test_heartbeat.statuses_until_done(nc, nc.sub, 1.0)


@helper("test_reads._direct_replies", "returned")
async def _direct_replies(kind: str):
    nc = Connection(kind, [message(b"v", {"Nats-Sequence": "1"})])

    @dataclass
    class Stream:
        name: str = "S"

    return await test_reads._direct_replies(nc, Stream(), {"seq": 1})


@helper("jsapi.held_within", "returned")
async def _held_within(kind: str):
    async def condition() -> bool:
        return kind == "answered"

    return await jsapi.held_within(condition, SHORT_S, Connection(kind, []))


@helper("jsapi.collect", "returned")
async def _collect(kind: str):
    nc = Connection(kind, [message(b"m")])
    pull = jsapi.RawPull(nc, "S", "C")
    pull._sub = nc.sub
    return await pull.collect(1.0, messages=1)


@helper("kv_read_paths.consumer_read", "fail")
async def _consumer_read(kind: str):
    delivered = Msg(_client=None, subject="$KV.b.k", reply="$JS.ACK.KV_b.c.1.1.1.0.0", data=b"v")  # type: ignore[arg-type]
    nc = Connection(kind, [delivered])
    created = {"name": "c", "delivered": {"consumer_seq": 0}, "num_pending": 1}  # the create reply counts one

    async def create_consumer(nc, stream, **config):
        return created

    async def api(nc, subject, body=None):  # the consumer's delete
        return {}

    with (
        mock.patch.object(kv_read_paths, "create_consumer", create_consumer),
        mock.patch.object(kv_read_paths, "api", api),
    ):
        return await kv_read_paths.consumer_read(nc, "b", ">", "last_per_subject")


async def outcome_of(run: Callable[[str], Awaitable], kind: str) -> str:
    """What a check meeting this helper's outcome ends in: "returned" (the check judges what it got), "fail" or
    "error" (as the plugin classes the exception), or "crash: ..." for anything else."""
    try:
        await run(kind)
    except INDETERMINATE:
        return "error"
    except (AssertionError, pytest.fail.Exception):
        return "fail"
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {exc}"
    return "returned"


@pytest.fixture
def short_waits(monkeypatch):
    """The helpers' own waits shortened: a silence is a silence however long it lasts."""
    monkeypatch.setattr(watching, "WATCH_TIMEOUT_S", SHORT_S)
    monkeypatch.setattr(test_push, "RECEIVE_TIMEOUT_S", SHORT_S)
    monkeypatch.setattr(test_push, "QUIET_S", SHORT_S)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(HELPERS))
async def test_every_waiting_helper_ends_in_its_outcome_class(short_waits, name, kind):
    """An answer is returned; a silence from a party that still answers is judged (returned to the check, or failed
    by a helper that waits for what the rule promises); no answer and a lost connection are `error`."""
    run, on_silence = HELPERS[name]
    wanted = {"answered": "returned", "silent": on_silence, "no-answer": "error", "lost": "error"}[kind]
    assert await outcome_of(run, kind) == wanted


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["no-answer", "lost"])
async def test_a_party_that_does_not_answer_makes_the_outcome_indeterminate(kind):
    """answering() raises Indeterminate (the plugin's `error`) for a session or connection that does not answer."""
    for party in (Session(kind), Connection(kind, [])):
        with pytest.raises(INDETERMINATE) as raised:
            await answering(party)
        assert "did not answer a ping" in str(raised.value)


@pytest.mark.asyncio
async def test_answering_asks_every_party():
    """Both the server (the suite's connection) and the client (its session) are asked."""
    session, nc = Session("silent"), Connection("silent", [])
    await answering(nc, session)
    assert (nc.flushed, session.pinged) == (1, 1)


# --- the source: no wait escapes the probe ---------------------------------------------------------------------

# Where the checks and their helpers wait: the modules read for unprobed silences.
CHECK_SOURCES = sorted([*CONFORMANCE.glob("checks/*.py"), CONFORMANCE / "watching.py", CONFORMANCE / "jsapi.py"])
PROBES = {"answering", "deliveries"}  # conformance.silence's: a call to one of them in the function is the probe


def _names(node: ast.AST) -> set[str]:
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))}  # fmt: skip


def _waits_on_silence(node: ast.AST) -> bool:
    """A handler of a timeout, a pytest.raises of one, or a client inbox's until() (which returns on a timeout)."""
    if isinstance(node, ast.ExceptHandler) and node.type is not None:
        return "TimeoutError" in _names(node.type)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "raises" and any("TimeoutError" in _names(arg) for arg in node.args):
            return True
        return node.func.attr == "until"
    return False


def _functions(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def unprobed_silences(source: str) -> list[str]:
    """The functions of `source` that wait on a silence without calling a probe, each as `name:line`."""
    found = []
    for function in _functions(source):
        waits = [n for n in ast.walk(function) if _waits_on_silence(n)]
        calls = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                 for n in ast.walk(function) if isinstance(n, ast.Call)}  # fmt: skip
        if waits and not calls & PROBES:
            found.append(f"{function.name}:{waits[0].lineno}")
    return found


@pytest.mark.parametrize("path", CHECK_SOURCES, ids=lambda p: p.name)
def test_no_check_waits_on_a_silence_without_asking_whether_the_party_answers(path):
    """Every function of the checks and their helpers that takes a timeout as an outcome calls a probe."""
    assert unprobed_silences(path.read_text()) == []


def test_the_source_reader_finds_an_unprobed_silence():
    """The reader flags a timeout taken as the rule's answer with no probe, and accepts it with one."""
    unprobed = "async def f(sub):\n    try:\n        await sub.next_msg(1)\n    except TimeoutError:\n        return\n"
    probed = unprobed.replace("        return\n", "        await answering(sub)\n")
    assert unprobed_silences(unprobed) == ["f:4"]
    assert unprobed_silences(probed) == []
    assert unprobed_silences("async def g(s):\n    return await s.inbox.until(3, 1.0)\n") == ["g:2"]


def test_the_helpers_table_names_every_helper_that_waits():
    """Each function of the checks' modules that waits on a silence, but the checks themselves (read by the source
    test), has its row in HELPERS, so it is driven through every outcome class."""
    waiting = {f"{path.stem}.{function.name}" for path in CHECK_SOURCES for function in _functions(path.read_text())
               if not function.name.startswith("test_")
               and any(map(_waits_on_silence, ast.walk(function)))}  # fmt: skip
    assert waiting - set(HELPERS) == set()
