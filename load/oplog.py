"""The operation log of one load process: rows appended on the hot path, written to Parquet by a native thread.

A row costs one ``array.extend`` of nine integers (drivers hold `OpLog.extend`, the bound method of one array that
lives as long as the log): what does not change between a user's operations (user, op, stream, subject, payload
size) is a *context* index, and error classes are indexed too. `flush` (called periodically and by `add`) copies
the rows out and hands the chunk to a single native writer thread (gevent's thread pool under Locust, so the write
does not stall the hub) that turns them into Arrow columns with numpy and writes ``ops/ops-<pid>-<n>.parquet``
(jetcheck.records.OP_FIELDS). At most `max_pending` chunks wait for the writer; beyond that the producer waits:
memory stays flat for any run length.
"""

from __future__ import annotations

import functools
import os
import time
from array import array
from concurrent.futures import Future
from pathlib import Path

# Imported here, not lazily in the writer thread: loading Arrow's shared libraries holds the GIL for tens of ms,
# which would stall the load (and show as send delay) the first time a chunk is written.
import numpy as np
import pyarrow as pa
import pyarrow.parquet

from jetcheck.records import OP_FIELDS, OPS_DIR, arrow_schema

from .parquetlog import RollingParquet

SLOTS = 9  # ctx, intended_ns, start_ns, end_ns, error, error_code, stream_seq, delivery_count, e2e_ns
NO_E2E = -1


def native_executor():
    """A one-thread executor running on a real OS thread, also when gevent has patched `threading`."""
    try:
        from gevent import monkey

        patched = monkey.is_module_patched("threading")
    except ImportError:
        patched = False
    if patched:
        from gevent.threadpool import ThreadPoolExecutor as GeventExecutor

        return GeventExecutor(max_workers=1)
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="jetcheck-oplog")


class OpLog:
    """Rows of one process; `add` is the hot path, `flush` hands over what is buffered, `close` finishes files."""

    def __init__(
        self,
        out_dir: Path,
        run_id: str,
        scenario: str,
        chunk_rows: int = 32768,
        roll_rows: int = 2_000_000,
        roll_seconds: float = 300.0,
        max_pending: int = 4,
    ) -> None:
        self.run_id = run_id
        self.scenario = scenario
        self.pid = os.getpid()
        self.chunk_slots = chunk_rows * SLOTS
        self.max_pending = max_pending
        self.rows_added = 0
        self._buf = array("q")
        self.extend = self._buf.extend  # the hot path: extend((ctx, intended, start, end, err, code, seq, dc, e2e))
        # each context and error name -> its index in the file's table (a dict keeps them in the order added)
        self._contexts: dict[tuple[int, str, str, str, int], int] = {}
        self._errors: dict[str, int] = {"": 0}
        self._pending: list[Future] = []
        self._executor = native_executor()
        self._files = RollingParquet(
            Path(out_dir) / OPS_DIR, f"ops-{self.pid}", arrow_schema(OP_FIELDS), roll_rows, roll_seconds
        )
        self._last_flush = time.monotonic()
        self.closed = False
        warm_up_arrow()

    def context(self, user: int, op: str, stream: str, subject: str, payload_size: int) -> int:
        key = (user, op, stream, subject, payload_size)
        return self._contexts.setdefault(key, len(self._contexts))

    def error(self, exc: BaseException | str) -> int:
        name = exc if isinstance(exc, str) else type(exc).__name__
        return self._errors.setdefault(name, len(self._errors))

    def add(
        self,
        ctx: int,
        intended_ns: int,
        start_ns: int,
        end_ns: int,
        error: int = 0,
        error_code: int = 0,
        stream_seq: int = 0,
        delivery_count: int = 0,
        e2e_ns: int = NO_E2E,
    ) -> None:
        buf = self._buf
        buf.extend((ctx, intended_ns, start_ns, end_ns, error, error_code, stream_seq, delivery_count, e2e_ns))
        if len(buf) >= self.chunk_slots:
            self.flush()

    def add_many(self, rows: array) -> None:
        """Append rows already laid out as SLOTS integers each."""
        self._buf.extend(rows)
        if len(self._buf) >= self.chunk_slots:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered rows to the writer thread (waiting when `max_pending` chunks are still queued)."""
        self._last_flush = time.monotonic()
        if not self._buf:
            return
        chunk = array("q", self._buf)
        del self._buf[:]
        self.rows_added += len(chunk) // SLOTS
        self._pending = [f for f in self._pending if not f.done()]
        while len(self._pending) >= self.max_pending:
            self._pending.pop(0).result()  # backpressure: the writer is behind
        self._pending.append(self._executor.submit(self._write, chunk, tuple(self._contexts), tuple(self._errors)))

    def flush_if_due(self, seconds: float) -> None:
        """Flush when the buffer is a chunk or more (rows added through `extend`) or `seconds` have passed."""
        if len(self._buf) >= self.chunk_slots or time.monotonic() - self._last_flush >= seconds:
            self.flush()

    async def flush_periodically(self, every_s: float = 1.0, check_s: float = 0.1) -> None:
        """Run on the loop that records: hands rows over by size or age until the log is closed."""
        import asyncio

        while not self.closed:
            self.flush_if_due(every_s)
            await asyncio.sleep(check_s)

    def close(self) -> list[Path]:
        """Write everything, finish the open file; returns every file this log wrote. Idempotent."""
        if not self.closed:
            self.flush()
            self._pending.append(self._executor.submit(self._files.close))
            for pending in self._pending:
                pending.result()
            self._pending.clear()
            self._executor.shutdown(wait=True)
            self.closed = True
        return list(self._files.files)

    @property
    def rows_written(self) -> int:
        return self._files.rows_written

    def _write(self, chunk: array, contexts: tuple, errors: tuple) -> None:
        self._files.write(rows_to_table(chunk, contexts, errors, self.run_id, self.scenario, self.pid))


@functools.cache
def warm_up_arrow() -> None:
    """Convert one row before the load starts: Arrow initializes its compute kernels on first use (about 250 ms,
    mostly holding the GIL), which would otherwise stall the load the first time the writer thread runs."""
    rows_to_table(array("q", bytes(8 * SLOTS)), ((0, "", "", "", 0),), ("",), "", "", 0)


def rows_to_table(chunk: array, contexts: tuple, errors: tuple, run_id: str, scenario: str, pid: int):
    """The Arrow table (OP_FIELDS) of a chunk of SLOTS-integer rows."""
    rows = np.frombuffer(chunk, dtype=np.int64).reshape(-1, SLOTS)
    n = len(rows)
    ctx = pa.array(rows[:, 0].astype(np.int32))
    users, ops, streams, subjects, sizes = zip(*contexts, strict=True)
    err = rows[:, 4].astype(np.int32)
    columns = {
        "run_id": pa.repeat(pa.scalar(run_id), n),
        "process": pa.array(np.full(n, pid, dtype=np.int32)),
        "user": pa.array(users, pa.int32()).take(ctx),
        "scenario": pa.repeat(pa.scalar(scenario), n),
        "op": pa.array(ops, pa.string()).take(ctx),
        "stream": pa.array(streams, pa.string()).take(ctx),
        "subject": pa.array(subjects, pa.string()).take(ctx),
        "payload_size": pa.array(sizes, pa.int32()).take(ctx),
        "intended_ns": pa.array(np.ascontiguousarray(rows[:, 1])),
        "start_ns": pa.array(np.ascontiguousarray(rows[:, 2])),
        "end_ns": pa.array(np.ascontiguousarray(rows[:, 3])),
        "ok": pa.array(err == 0),
        "error_class": pa.array(errors, pa.string()).take(pa.array(err)),
        "error_code": pa.array(rows[:, 5].astype(np.int32)),
        "stream_seq": pa.array(np.ascontiguousarray(rows[:, 6])),
        "delivery_count": pa.array(rows[:, 7].astype(np.int32)),
        "e2e_ns": pa.array(np.ascontiguousarray(rows[:, 8])),
    }
    return pa.table(columns, schema=arrow_schema(OP_FIELDS))
