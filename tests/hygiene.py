"""The suite's own hygiene: no test module leaves a process, a stream or a temp file behind past its end, and no
test deletes a stream another module created.

Checked where one module's work meets the next's: pytest-xdist's loadscope hands a worker whole modules, one after
another, on one session-scoped server. A module whose Locust outlived it once deleted its stream in the middle of
the next module's assertion that nothing else changed on that server (issue 31); here the module that left it fails.

- Processes: every process a module starts carries ``JETCHECK_TEST_SCOPE=<worker>-<pid>:<module>`` in its environment
  (inherited from this process, so also once it is orphaned), or descends from this process. Those of session
  fixtures carry the session's scope and live on.
- Streams: each session server (`watch`) is audited through its JetStream API advisories, which name the client
  (jetcheck's connections are named ``jetcheck pid N``). A module's end fences on its own request's advisory, so
  every create and delete sent before is counted in the module that sent it.
- Temp files: each worker has a temp folder of its own (TMPDIR, inherited by everything it starts).

What a module left is named in an error at its last test's teardown, then removed, so the next module starts clean.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from jetcheck.fixtures.cleanup import stream_names
from jetcheck.fixtures.target import Target

SCOPE_VARIABLE = "JETCHECK_TEST_SCOPE"
AUDIT_SUBJECT = "$JS.EVENT.ADVISORY.API"
FENCE_SUBJECT = "$JS.API.INFO"
FENCE_NAME = "jetcheck-tests hygiene"
EXIT_WAIT_S = 10.0  # for what a module stopped to finish exiting
API_TIMEOUT_S = 10.0
HYGIENE = pytest.StashKey["Hygiene"]()


def scope_of(process: psutil.Process) -> str | None:
    try:
        return process.environ().get(SCOPE_VARIABLE)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def describe(pid: int) -> str:
    """A process and the two above it, by command line: who sent a request, and on whose behalf."""
    chain = []
    with contextlib.suppress(psutil.Error):
        process: psutil.Process | None = psutil.Process(pid)
        while process is not None and len(chain) < 3:
            chain.append(f"pid {process.pid} `{' '.join(process.cmdline()[:8])[:160]}`")
            process = process.parent()
    return " <- ".join(chain) or f"pid {pid} (exited)"


@dataclass
class StreamEvent:
    action: str  # CREATE or DELETE
    stream: str
    client: str  # the connection's name (or its id), and the processes behind it when still there
    test: str  # the test running when the server announced it


@dataclass
class Watched:
    target: Target
    nc: Any = None
    fences: int = 0
    fenced: asyncio.Event = field(default_factory=asyncio.Event)
    events: list[StreamEvent] = field(default_factory=list)
    streams_at_start: set[str] = field(default_factory=set)


class Auditor:
    """A thread of its own with an event loop, connected to every watched server, taking its API advisories."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="hygiene-audit", daemon=True)
        self.thread.start()
        self.watched: list[Watched] = []
        self.test = ""

    def call(self, coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=API_TIMEOUT_S * 3)

    def watch(self, target: Target) -> None:
        self.call(self._watch(target))

    async def _watch(self, target: Target) -> None:
        watched = Watched(target)
        watched.nc = await target.connect(name=FENCE_NAME)

        async def take(msg) -> None:
            audit = json.loads(msg.data)
            client = audit.get("client") or {}
            if client.get("name") == FENCE_NAME:
                if audit.get("subject") == FENCE_SUBJECT:
                    watched.fences -= 1
                    if watched.fences == 0:
                        watched.fenced.set()
                return
            action, _, stream = audit.get("subject", "").removeprefix("$JS.API.STREAM.").partition(".")
            if action not in ("CREATE", "DELETE") or "error" in json.loads(audit.get("response") or "{}"):
                return
            name = client.get("name") or f"an unnamed connection (cid {client.get('id')})"
            if name.startswith("jetcheck pid "):
                name = describe(int(name.rsplit(" ", 1)[1]))
            watched.events.append(StreamEvent(action, stream, name, self.test))

        await watched.nc.subscribe(AUDIT_SUBJECT, cb=take)
        await watched.nc.flush()
        watched.streams_at_start = await self._streams(watched)
        self.watched.append(watched)

    @staticmethod
    async def _streams(watched: Watched) -> set[str]:
        return set(await stream_names(watched.nc))

    async def _fence(self, watched: Watched) -> None:
        """Wait until the server has announced every request sent before this one (it sends advisories in order)."""
        watched.fenced.clear()
        watched.fences += 1
        await watched.nc.request(FENCE_SUBJECT, b"", timeout=API_TIMEOUT_S)
        await asyncio.wait_for(watched.fenced.wait(), API_TIMEOUT_S)

    def start_module(self) -> None:
        for watched in list(self.watched):
            if watched.nc.is_closed:
                self.watched.remove(watched)
            else:
                watched.streams_at_start = self.call(self._streams(watched))
                watched.events.clear()

    def end_module(self) -> list[str]:
        return [problem for watched in list(self.watched) for problem in self.call(self._end(watched))]

    def fence(self) -> None:
        for watched in self.watched:
            if self._alive(watched):
                self.call(self._fence(watched))

    def adopt_since(self, marks: dict[int, int]) -> None:
        """The streams created since `marks` (a session fixture's) live as long as the session."""
        self.fence()
        for watched in self.watched:
            since = watched.events[marks.get(id(watched), 0) :]
            watched.streams_at_start |= {e.stream for e in since if e.action == "CREATE"}
            watched.events[marks.get(id(watched), 0) :] = [e for e in since if e.action != "CREATE"]

    def marks(self) -> dict[int, int]:
        return {id(watched): len(watched.events) for watched in self.watched}

    @staticmethod
    def _alive(watched: Watched) -> bool:
        process = watched.target.process
        return not watched.nc.is_closed and process is not None and process.running

    async def _end(self, watched: Watched) -> list[str]:
        alive = self._alive(watched)
        if alive:
            await self._fence(watched)
        else:
            self.watched.remove(watched)  # its server stopped with the session: what the module sent was fenced before
        created = {e.stream for e in watched.events if e.action == "CREATE"}
        problems = []
        for event in watched.events:
            if event.action == "DELETE" and event.stream not in created:
                problems.append(
                    f"stream {event.stream}, which this module did not create (it was there when the module started), "
                    f"was deleted during {event.test} by {event.client}"
                )
        if not alive:
            return problems
        for stream in sorted(await self._streams(watched) - watched.streams_at_start):
            makers = [e for e in watched.events if e.action == "CREATE" and e.stream == stream]
            by = f", created during {makers[-1].test} by {makers[-1].client}" if makers else ""
            problems.append(f"stream {stream} left on {watched.target.url}{by}")
            await watched.nc.request(f"$JS.API.STREAM.DELETE.{stream}", b"", timeout=API_TIMEOUT_S)
        return problems

    def close(self) -> None:
        for watched in self.watched:
            with contextlib.suppress(Exception):
                self.call(watched.nc.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=API_TIMEOUT_S)


class Hygiene:
    def __init__(self, worker: str) -> None:
        # the worker id and this process: two test sessions on one machine (each with a gw0) never share a scope
        self.worker = f"{worker}-{os.getpid()}"
        self.temp = Path(tempfile.mkdtemp(prefix=f"jetcheck-tests-{worker}-"))
        os.environ["TMPDIR"] = str(self.temp)
        tempfile.tempdir = None  # computed again from TMPDIR
        self.session_scope = f"{self.worker}:session"
        self.session_temp: set[str] = set()
        self.module = ""
        self.temp_at_start: set[str] = set()
        self.auditor = Auditor()

    def watch(self, target: Target) -> None:
        """Audit `target`, a server of the whole session, from now on."""
        self.auditor.watch(target)

    def scope(self, module: str) -> str:
        return f"{self.worker}:{module}"

    def temp_entries(self) -> set[str]:
        # pytest's own base folder (when not under xdist) keeps tmp_path by design
        return {p.name for p in self.temp.iterdir() if not p.name.startswith("pytest-of-")}

    def start_module(self, module: str) -> None:
        self.module = module
        os.environ[SCOPE_VARIABLE] = self.scope(module)
        self.temp_at_start = self.temp_entries()
        self.auditor.start_module()

    def module_processes(self) -> list[psutil.Process]:
        """What runs of this module: its scope in the environment, or below this process with no scope of its own
        between (a child started with an environment of its own)."""
        scope, me = self.scope(self.module), os.getpid()
        found = {}
        for process in psutil.process_iter():
            if process.pid != me and scope_of(process) == scope:
                found[process.pid] = process
        for process in psutil.Process(me).children(recursive=True):
            owner: psutil.Process | None = process
            with contextlib.suppress(psutil.Error):
                while owner is not None and owner.pid != me and scope_of(owner) is None:
                    owner = owner.parent()
            if owner is not None and (owner.pid == me or scope_of(owner) == scope):
                found[process.pid] = process
        return [p for p in found.values() if still_running(p)]

    def end_module(self) -> list[str]:
        problems = self.auditor.end_module()
        processes = self.module_processes()
        _gone, alive = psutil.wait_procs(processes, timeout=EXIT_WAIT_S) if processes else ([], [])
        for process in alive:
            if still_running(process):
                problems.append(f"process left running: {describe(process.pid)}")
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        for name in sorted(self.temp_entries() - self.temp_at_start - self.session_temp):
            problems.append(f"temp file left: {self.temp / name}")
            path = self.temp / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        os.environ.pop(SCOPE_VARIABLE, None)
        return problems

    def close(self) -> None:
        self.auditor.close()
        shutil.rmtree(self.temp, ignore_errors=True)

    # --- pytest's hooks ---------------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        """What a session fixture starts lives as long as the session: it gets the session's scope."""
        if fixturedef.scope != "session":
            return (yield)
        before = os.environ.get(SCOPE_VARIABLE)
        temp_before = self.temp_entries()
        marks = self.auditor.marks()
        os.environ[SCOPE_VARIABLE] = self.session_scope
        try:
            return (yield)
        finally:
            self.session_temp |= self.temp_entries() - temp_before
            self.auditor.adopt_since(marks)
            if before is None:
                os.environ.pop(SCOPE_VARIABLE, None)
            else:
                os.environ[SCOPE_VARIABLE] = before

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if item.module.__name__ != self.module:
            self.start_module(item.module.__name__)
        self.auditor.test = item.nodeid

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        if nextitem is None:  # the session's servers stop in this teardown: take the module's requests in first
            self.auditor.fence()
        result = yield
        if nextitem is None or nextitem.module.__name__ != self.module:
            problems = self.end_module()
            self.module = ""
            if problems:
                raise AssertionError(f"{item.module.__name__} left things behind:\n" + "\n".join(problems))
        return result


def still_running(process: psutil.Process) -> bool:
    """Whether `process` still runs: a zombie has exited, and only its reaping is left (to init, once the process
    whose child it was has gone; a spark-submit shell helper's parent is the JVM)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pytest_configure(config) -> None:
    # the controller of an xdist run runs no test; its workers, or a run with -n 0, do
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        worker = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"
        hygiene = Hygiene(worker)
        config.stash[HYGIENE] = hygiene
        config.pluginmanager.register(hygiene, "jetcheck-hygiene")


def pytest_unconfigure(config) -> None:
    hygiene = config.stash.get(HYGIENE, None)
    if hygiene is not None:
        hygiene.close()
