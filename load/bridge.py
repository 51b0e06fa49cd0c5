"""One asyncio loop per Locust process, run inside gevent, and the one way greenlets hand work to it.

Locust monkey-patches the process for gevent; nats-py is asyncio. The loop is created lazily once per PID (a loop
made before `--processes` forks would be shared by the children and break) and runs as a greenlet with
`loop.run_forever`. Greenlets submit coroutines with `run_coroutine_threadsafe` (a plain `create_task` does not
wake a loop blocked in select) and wait on a gevent AsyncResult; hand-offs are rare (start, stop, setup): the hot
path stays inside asyncio.

The loop's selector is `CooperativeEpollSelector`, not gevent's patched one: gevent's selector switches to the hub
and re-arms a watcher per file descriptor on every loop iteration, and nats-py needs several iterations per
message (fetch goes through `wait_for` per message), which cost pull consumers most of their throughput. Ours polls
a native epoll, gives the hub a turn at least every YIELD_EVERY_S (busy: `gevent.sleep(0)`; idle: the hub waits
on the epoll descriptor itself), so Locust's greenlets still run, a few milliseconds late at worst.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import time
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0


def process_loop() -> asyncio.AbstractEventLoop:
    """This process's asyncio loop, started in a greenlet the first time it is asked for."""
    global _loop, _loop_pid
    if _loop is None or _loop_pid != os.getpid():
        import gevent

        _loop = asyncio.SelectorEventLoop(CooperativeEpollSelector())
        _loop_pid = os.getpid()
        gevent.spawn(_loop.run_forever)
    return _loop


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on the process loop and wait for it from a greenlet; its exception is raised here."""
    from gevent.event import AsyncResult

    result: AsyncResult = AsyncResult()
    future = asyncio.run_coroutine_threadsafe(coro, process_loop())

    def settle(done: Any) -> None:
        exc = asyncio.CancelledError() if done.cancelled() else done.exception()
        if exc is not None:
            result.set_exception(exc)
        else:
            result.set(done.result())

    future.add_done_callback(settle)
    try:
        return result.get(timeout=timeout)
    except BaseException:
        future.cancel()  # a killed greenlet (GreenletExit) or a timeout must not leave the coroutine running
        raise


class _KeysByFileObject(Mapping):
    """The registered keys, looked up by file object or descriptor (what BaseSelector.get_map promises)."""

    def __init__(self, selector: CooperativeEpollSelector) -> None:
        self.selector = selector

    def __getitem__(self, fileobj) -> selectors.SelectorKey:
        return self.selector.keys[self.selector.fd_of(fileobj)]

    def __iter__(self) -> Iterator[int]:
        return iter(self.selector.keys)

    def __len__(self) -> int:
        return len(self.selector.keys)


class CooperativeEpollSelector(selectors.BaseSelector):
    """A native epoll selector that shares the thread with gevent's hub (see the module docstring)."""

    YIELD_EVERY_S = 0.002

    def __init__(self) -> None:
        from gevent import monkey

        self._select_mod = monkey.get_original("select", ["epoll", "EPOLLIN", "EPOLLOUT"])
        self._epoll = self._select_mod[0]()
        self._last_yield = time.monotonic()
        self.keys: dict[int, selectors.SelectorKey] = {}  # by file descriptor
        self._map = _KeysByFileObject(self)

    def fileno(self) -> int:
        return self._epoll.fileno()

    def get_map(self) -> Mapping:
        return self._map

    def fd_of(self, fileobj) -> int:
        """`fileobj`'s descriptor; a closed file object still registered is found by identity."""
        if isinstance(fileobj, int):
            return fileobj
        try:
            return int(fileobj.fileno())
        except (AttributeError, TypeError, ValueError, OSError):
            for key in self.keys.values():
                if key.fileobj is fileobj:
                    return key.fd
            raise ValueError(f"invalid file object: {fileobj!r}") from None

    def _mask(self, events: int) -> int:
        _epoll, epollin, epollout = self._select_mod
        return (epollin if events & selectors.EVENT_READ else 0) | (epollout if events & selectors.EVENT_WRITE else 0)

    def register(self, fileobj, events, data=None):
        if not events or events & ~(selectors.EVENT_READ | selectors.EVENT_WRITE):
            raise ValueError(f"invalid events: {events!r}")
        key = selectors.SelectorKey(fileobj, self.fd_of(fileobj), events, data)
        if key.fd in self.keys:
            raise KeyError(f"{fileobj!r} (FD {key.fd}) is already registered")
        self._epoll.register(key.fd, self._mask(events))
        self.keys[key.fd] = key
        return key

    def unregister(self, fileobj):
        try:
            key = self.keys.pop(self.fd_of(fileobj))
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None
        with contextlib.suppress(OSError):  # the descriptor may already be closed
            self._epoll.unregister(key.fd)
        return key

    def _poll(self, timeout: float) -> list:
        _epoll, epollin, epollout = self._select_mod
        ready = []
        for fd, event in self._epoll.poll(timeout):
            key = self.keys.get(fd)
            if key:
                events = (selectors.EVENT_READ if event & ~epollout else 0) | (
                    selectors.EVENT_WRITE if event & ~epollin else 0
                )
                ready.append((key, events & key.events))
        return ready

    def select(self, timeout=None):
        ready = self._poll(0)
        if not ready and (timeout is None or timeout > 0):
            # idle: block natively while the hub's turn is not due (cheaper than a trip through the hub per
            # iteration), then let the hub wait on the epoll descriptor itself
            budget = self.YIELD_EVERY_S - (time.monotonic() - self._last_yield)
            if budget > 0:
                ready = self._poll(budget if timeout is None else min(timeout, budget))
                if ready or (timeout is not None and timeout <= budget):
                    return self._maybe_yield(ready)
            return self._wait_in_hub(timeout)
        return self._maybe_yield(ready)

    def _maybe_yield(self, ready: list) -> list:
        if time.monotonic() - self._last_yield >= self.YIELD_EVERY_S:
            import gevent

            gevent.sleep(0)  # busy: still let Locust's greenlets run
            self._last_yield = time.monotonic()
        return ready

    def _wait_in_hub(self, timeout: float | None) -> list:
        from gevent.socket import wait_read

        with contextlib.suppress(TimeoutError):
            wait_read(self._epoll.fileno(), timeout)  # the hub runs until a descriptor is ready
        self._last_yield = time.monotonic()
        return self._poll(0)

    def close(self) -> None:
        self._epoll.close()
        self.keys.clear()
