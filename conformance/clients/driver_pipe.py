"""The Python end of the pipe to a driver program (drivers/PROTOCOL.md): requests out over its stdin, answers,
deliveries and events in from its stdout, its death noticed and explained.

One driver process serves a whole certify run. pytest-asyncio gives every check its own event loop, so the process
belongs to no loop: a reader thread takes its stdout line by line and hands each answer, delivery and event to the
loop that asked for it (`call_soon_threadsafe`); requests are written from the asking loop's thread under a lock.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jetcheck.fixtures import children

from .base import (
    ERROR,
    MISSED_HEARTBEAT,
    RESET,
    SEQUENCE_MISMATCH,
    TERMINAL,
    ClientError,
    DigestMismatch,
    Indeterminate,
    NoStreamResponse,
    NotInRelease,
    ObjectExists,
    ObjectNotFound,
    Unsupported,
)

PROTOCOL = 3  # v3: watches (kv_watch, obj_watch)
NOT_IN_RELEASE = "not_in_release"  # an error kind: the client's release lacks the API the op needs (PROTOCOL.md)
REQUEST_TIMEOUT_S = 30.0  # an answer the driver owes (a fetch gets its own expiry on top)
HELLO_TIMEOUT_S = 30.0  # node's first start on a loaded machine
CLOCK_SAMPLES = 5  # hello round trips after the first, to map the driver's clock onto ours
SHUTDOWN_TIMEOUT_S = 5.0
EVENT_KINDS = {k: k for k in (MISSED_HEARTBEAT, SEQUENCE_MISMATCH, RESET, TERMINAL, ERROR)}
# The suite's own settings travel to pytest in JETCHECK_* variables, secrets included: never into a driver.
PRIVATE_ENV_PREFIX = "JETCHECK_"


class DriverGone(ConnectionError):
    """The driver process is not running (it exited, or never answered): nothing more can be asked of it."""


class DriverTimeout(Indeterminate, TimeoutError):
    """The client (or its driver) gave up on an operation in time: the outcome is unknown."""


class DriverConnectionError(Indeterminate, ConnectionError):
    """The client could not reach the server."""


def error_for(op: str, error: dict) -> ClientError | NotInRelease:
    kind = error.get("kind", "other")
    if kind == NOT_IN_RELEASE:  # the driver's message names the release and what it lacks
        return NotInRelease(error.get("message", "") or f"{op}: not in this release of the client")
    message = f"{op}: {kind}: {error.get('message', '')}"
    cls = {
        "unsupported": Unsupported,
        "timeout": DriverTimeout,
        "connection": DriverConnectionError,
        "not_found": ObjectNotFound,
        "exists": ObjectExists,
        "digest_mismatch": DigestMismatch,
        "no_responders": NoStreamResponse,
    }.get(kind, ClientError)
    return cls(kind, message, error.get("code"), error.get("err_code"))


Handler = Callable[[dict], None]


@dataclass
class Route:
    """Where records for one session or subscription go: a handler run on the loop that owns it."""

    loop: asyncio.AbstractEventLoop
    handler: Handler

    def send(self, record: dict) -> None:
        # RuntimeError: the check that owned it has ended and its loop is closed; nobody is listening
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.handler, record)


class DriverProcess:
    """A running driver: requests out, answers and streamed records in, its death noticed and explained."""

    def __init__(self, command: list[str], label: str, cwd: Path | None = None) -> None:
        self.label = label  # e.g. "nats.js driver", for messages
        self.dead = ""  # why it can no longer be used, once it cannot
        self._closing = ""  # why it is being shut down on purpose
        self.hello: dict = {}
        self.secrets: list[str] = []  # credential values sent to it, kept out of every message it causes
        self._ids = itertools.count(1)
        self._write_lock = threading.RLock()  # _died takes it too, also from within _send
        self._pending: dict[int, Callable[[dict], None]] = {}
        self._routes: dict[tuple[str, str], Route] = {}  # ("sub"|"session", id) -> route
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._clock_offset = 0.0  # time.monotonic() - driver monotonic seconds
        env = {k: v for k, v in os.environ.items() if not k.startswith(PRIVATE_ENV_PREFIX)}
        try:
            # in a session of its own: a Ctrl-C reaches pytest, which shuts the driver down in order
            self.proc = children.start(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
            )
        except OSError as exc:
            raise DriverGone(f"the {label} could not start: {exc.strerror or exc}") from None
        self._readers = [
            threading.Thread(target=self._read_stdout, name=f"{label} stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"{label} stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    # --- talking to it ------------------------------------------------------------------------------------------

    def start(self) -> dict:
        """Say hello (blocking); learn the client's name, version and the driver's clock."""
        hello = self.request_sync("hello", HELLO_TIMEOUT_S)
        if hello.get("protocol") != PROTOCOL:
            self.kill(f"the {self.label} speaks protocol {hello.get('protocol')!r}, not {PROTOCOL}")
            raise DriverGone(self.dead)
        self.hello = hello
        # mono_ns is read between our send and its answer, so the midpoint is within half a round trip of it. The
        # first answer waits for the runtime to start (node: ~0.1-0.2 s), so the clock comes from the quickest of a
        # few more round trips.
        samples = []
        for _ in range(CLOCK_SAMPLES):
            asked = time.monotonic()
            again = self.request_sync("hello", HELLO_TIMEOUT_S)
            answered = time.monotonic()
            samples.append((answered - asked, (asked + answered) / 2 - int(again.get("mono_ns", 0)) / 1e9))
        self._clock_offset = min(samples)[1]
        return hello

    def _send(self, op: str, args: dict, settle: Callable[[dict], None]) -> int:
        with self._write_lock:
            if self.dead:
                raise DriverGone(self.dead)
            request_id = next(self._ids)
            self._pending[request_id] = settle
            line = json.dumps({"id": request_id, "op": op, **args}, separators=(",", ":")) + "\n"
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line.encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._pending.pop(request_id, None)
                self._died()
                raise DriverGone(self.dead) from None
        return request_id

    def request_sync(self, op: str, timeout: float = REQUEST_TIMEOUT_S, **args) -> dict:
        """A request from outside any event loop (hello, shutdown)."""
        answer: concurrent.futures.Future[dict] = concurrent.futures.Future()
        request_id = self._send(op, args, answer.set_result)
        try:
            message = answer.result(timeout)
        except concurrent.futures.TimeoutError:
            raise DriverGone(f"the {self.label} did not answer {op} within {timeout:.0f} s") from None
        finally:
            self._pending.pop(request_id, None)
        return self._result(op, message)

    async def request(self, op: str, timeout: float = REQUEST_TIMEOUT_S, **args) -> dict:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict] = loop.create_future()

        def settle(message: dict) -> None:
            Route(loop, lambda m: answer.done() or answer.set_result(m)).send(message)

        request_id = self._send(op, args, settle)
        try:
            message = await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            raise DriverTimeout("timeout", f"the {self.label} did not answer {op} within {timeout:.0f} s") from None
        finally:
            self._pending.pop(request_id, None)
        return self._result(op, message)

    def _result(self, op: str, message: dict) -> dict:
        if message.get("gone"):
            raise DriverGone(self.dead)
        if message.get("ok"):
            return message.get("result") or {}
        raise error_for(op, message.get("error") or {})

    def route(self, kind: str, key: str, handler: Handler) -> None:
        self._routes[(kind, key)] = Route(asyncio.get_running_loop(), handler)

    def unroute(self, kind: str, key: str) -> None:
        self._routes.pop((kind, key), None)

    def loop_time(self, at_ns: int | None) -> float:
        """The driver's monotonic `at_ns` on the running loop's clock."""
        loop = asyncio.get_running_loop()
        if at_ns is None:
            return loop.time()
        return int(at_ns) / 1e9 + self._clock_offset + (loop.time() - time.monotonic())

    # --- what it says -------------------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            self._read_messages(self.proc.stdout)
        self._died()

    def _read_messages(self, stdout) -> None:
        for raw in stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                self._stderr_tail.append("(not JSON on stdout) " + raw.decode(errors="replace").strip()[:200])
                continue
            if not isinstance(message, dict):
                continue
            if "id" in message:
                settle = self._pending.pop(message["id"], None)
                if settle is not None:
                    settle(message)
            elif message.get("type") in ("delivery", "watch", "load"):
                self._dispatch(("sub", str(message.get("sub"))), message)
            elif message.get("type") == "event":
                self._dispatch(("session", str(message.get("session"))), message)

    def _dispatch(self, key: tuple[str, str], record: dict) -> None:
        route = self._routes.get(key)
        if route is not None:
            route.send(record)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                if line:
                    self._stderr_tail.append(line)

    def _died(self) -> None:
        if not self.dead and self._closing:
            self.dead = self._closing
        if not self.dead:
            try:
                status = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                status = None
            if self._readers[1] is not threading.current_thread():
                self._readers[1].join(1.0)  # its last words on stderr explain the exit
            said = self._redact(self._stderr_tail[-1]) if self._stderr_tail else "nothing on stderr"
            how = f"exited with status {status}" if status is not None else "closed its output"
            self.dead = f"the {self.label} {how} ({said}); client checks cannot run"
        with self._write_lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for settle in pending:
            settle({"gone": True})

    def _redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    @property
    def log_tail(self) -> list[str]:
        return [self._redact(line) for line in self._stderr_tail]

    # --- ending it ----------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Ask it to exit; kill it if it does not within a few seconds."""
        self._closing = f"the {self.label} was shut down at the end of the run"
        if self.proc.poll() is None and not self.dead:
            with contextlib.suppress(DriverGone, ClientError):  # it is killed below either way
                self.request_sync("shutdown", SHUTDOWN_TIMEOUT_S)
        self.kill(self._closing)

    def kill(self, reason: str) -> None:
        self.dead = self.dead or reason
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):  # a broken pipe: the driver is gone already
            self.proc.stdin.close()  # a driver exits when stdin closes
        children.stop(self.proc, SHUTDOWN_TIMEOUT_S, ask=None)
        for reader in self._readers:
            if reader is not threading.current_thread():
                reader.join(SHUTDOWN_TIMEOUT_S)  # each closes its pipe at the end of its output
