"""One asyncio loop per Locust process, run inside gevent, and the one way greenlets hand work to it.

Locust monkey-patches the process for gevent; nats-py is asyncio. The loop is created lazily once per PID (a loop
made before `--processes` forks would be shared by the children and break) and runs as a greenlet with
`loop.run_forever`: gevent's patched selector yields to the hub on every loop iteration, so Locust's greenlets
keep running. Greenlets submit coroutines with `run_coroutine_threadsafe` (a plain `create_task` does not wake a
loop blocked in select) and wait on a gevent AsyncResult; hand-offs are rare (start, stop, setup): the hot path
stays inside asyncio.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0


def process_loop() -> asyncio.AbstractEventLoop:
    """This process's asyncio loop, started in a greenlet the first time it is asked for."""
    global _loop, _loop_pid
    if _loop is None or _loop_pid != os.getpid():
        import gevent

        _loop = asyncio.new_event_loop()
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
