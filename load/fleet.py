"""A fleet of Locust workers on other hosts: their clocks against the master's, and their op logs brought home.

Everything travels over Locust's own worker/master channel (`runner.send_message`, `register_message`):

- **Clocks.** At test start and stop the master pings each worker (`CLOCK_PING`), the worker answers with its
  clock (`CLOCK_PONG`); `clock.ClockReading` turns a round trip into an offset and an error bound.
- **Logs.** A worker on a host of its own (started by ``jetcheck load --worker``, which gives it a folder of its
  own in `WORKER_DIR_VARIABLE`) writes its op log there, rolled every SHIP_EVERY_S, and sends each finished file in
  chunks (`LOG_CHUNK`, `LogShipper`) as it goes and the rest when drained, each chunk with the SHA-256 of its bytes
  and of the whole file. The master (`LogReceiver`) checks
  both, keeps a file only when every chunk arrived intact, and at the end moves the file's times onto its own
  clock (`place_on_master_axis`) into ``ops/``, named after the worker so that files of hosts with equal pids
  cannot collide.
- **Who took part.** `FleetRecord` is one worker as load.json lists it: host, pid, client, versions, rows, clock
  offsets, the files that arrived, and what went wrong. A worker that took part but never said it had drained
  (killed, lost) is named, whatever of its log had arrived is kept and marked, and the run is incomplete.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jetcheck.records import OPS_DIR, SAMPLES_DIR

from .clock import ClockReading, MasterAxis, best_reading, time_ns

CLOCK_PING = "jetcheck_clock_ping"
CLOCK_PONG = "jetcheck_clock_pong"
LOG_CHUNK = "jetcheck_log_chunk"
WORKER_DIR_VARIABLE = "JETCHECK_LOAD_WORKER_DIR"  # set by `jetcheck load --worker`: this worker's own folder
CHUNK_BYTES = 256 * 1024  # well under what a Locust message carries comfortably
CLOCK_ROUNDS = 8
SHIP_EVERY_S = 2.0  # a fleet worker's log rolls, and its finished files go to the master, this often
# a worker starved of CPU answers late (a fresh-clone CI run beside other work: none of three within 2 s); a long
# wait costs no accuracy, since a reading's bound is half its own round trip
PONG_TIMEOUT_S = 10.0
INCOMING_DIR = ".incoming"  # under ops/: hidden from Spark and pyarrow (names starting with '.')
PARTIAL_DIR = "partial"  # what arrived of a file whose other chunks never did, as raw bytes
SHIPPED_DIRS = (OPS_DIR, SAMPLES_DIR)
TIME_COLUMNS = ("intended_ns", "start_ns", "end_ns")


def worker_dir() -> Path | None:
    """This worker's own folder when it runs for a master on another host (its log is shipped); else None."""
    value = os.environ.get(WORKER_DIR_VARIABLE)
    return Path(value) if value else None


def identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def pong(data: dict[str, Any]) -> dict[str, Any]:
    """A worker's answer to CLOCK_PING: its clock, read as late as possible, and who it is."""
    return {**data, **identity(), "worker_ns": time_ns()}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_chunks(path: Path, relative: str) -> Iterator[dict[str, Any]]:
    """The LOG_CHUNK messages of one file: its bytes in CHUNK_BYTES pieces, each with its own checksum and the
    whole file's."""
    data = path.read_bytes()
    count = max(1, -(-len(data) // CHUNK_BYTES))
    whole = _sha256(data)
    for index in range(count):
        piece = data[index * CHUNK_BYTES : (index + 1) * CHUNK_BYTES]
        yield {
            "file": relative,
            "index": index,
            "count": count,
            "sha256": _sha256(piece),
            "file_sha256": whole,
            "file_bytes": len(data),
            "data": piece,
        }


def shipped_files(run_dir: Path) -> list[tuple[Path, str]]:
    """The finished files of a worker's run folder that go to the master: (path, path relative to the folder)."""
    found = []
    for folder in SHIPPED_DIRS:
        for path in sorted((run_dir / folder).glob("*.parquet")):
            found.append((path, f"{folder}/{path.name}"))
    return found


class LogShipper:
    """A worker's side of LOG_CHUNK: sends each finished file of its run folder once. A fleet worker's log rolls
    every SHIP_EVERY_S and `ship_new` runs that often, so a worker that dies mid-run has left the master its log up
    to its last seconds. `prepare` runs the reading and hashing (gevent's thread pool on a worker: hashlib and
    file reads release the GIL, so the load's loop keeps turning meanwhile)."""

    def __init__(
        self, run_dir: Path, send: Callable[[str, dict], None], prepare: Callable[[Callable], Any] | None = None
    ) -> None:
        self.run_dir = Path(run_dir)
        self.send = send
        self.prepare = prepare or (lambda work: work())
        self.sent: dict[str, int] = {}  # relative name -> bytes, in the order sent

    def ship_new(self) -> None:
        for path, relative in shipped_files(self.run_dir):
            if relative in self.sent:
                continue
            for message in self.prepare(lambda path=path, relative=relative: list(file_chunks(path, relative))):
                self.send(LOG_CHUNK, message)
            self.sent[relative] = path.stat().st_size

    def manifest(self) -> list[dict[str, Any]]:
        """What the DRAINED message says was sent."""
        return [{"file": relative, "bytes": size} for relative, size in self.sent.items()]


class ChunkError(Exception):
    """A chunk that does not match its checksum, or a file whose chunks do not add up."""


@dataclass
class _Incoming:
    path: Path
    count: int
    file_sha256: str
    file_bytes: int
    next_index: int = 0


class LogReceiver:
    """The master's side of LOG_CHUNK: writes each worker's files under ``ops/.incoming/<worker>/`` chunk by chunk,
    checking every chunk and then the whole file; a file is kept once all its chunks arrived intact."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self._open: dict[tuple[str, str], _Incoming] = {}
        self.received: dict[str, list[str]] = {}  # worker -> relative names of complete, verified files

    def incoming_dir(self, worker: str) -> Path:
        return self.out_dir / OPS_DIR / INCOMING_DIR / worker

    def chunk(self, worker: str, message: dict[str, Any]) -> str | None:
        """Take one chunk from `worker`; the relative name of the file it completed, if it did."""
        relative = str(message["file"])
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise ChunkError(f"worker {worker} sent a file outside its run folder: {relative!r}")
        data = message["data"]
        if _sha256(data) != message["sha256"]:
            raise ChunkError(
                f"worker {worker}: chunk {message['index'] + 1} of {message['count']} of {relative} does not match "
                "its checksum"
            )
        key = (worker, relative)
        incoming = self._open.get(key)
        if incoming is None:
            if message["index"] != 0:
                raise ChunkError(f"worker {worker}: {relative} began with chunk {message['index'] + 1}, not the first")
            path = self.incoming_dir(worker) / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            incoming = _Incoming(path, message["count"], message["file_sha256"], message["file_bytes"])
            self._open[key] = incoming
        if message["index"] != incoming.next_index:
            raise ChunkError(
                f"worker {worker}: chunk {message['index'] + 1} of {relative} arrived after chunk {incoming.next_index}"
            )
        with open(incoming.path, "ab") as out:
            out.write(data)
        incoming.next_index += 1
        if incoming.next_index < incoming.count:
            return None
        del self._open[key]
        whole = incoming.path.read_bytes()
        if len(whole) != incoming.file_bytes or _sha256(whole) != incoming.file_sha256:
            raise ChunkError(f"worker {worker}: {relative} does not match its file checksum once assembled")
        self.received.setdefault(worker, []).append(relative)
        return relative

    def unfinished(self, worker: str) -> list[dict[str, Any]]:
        """The files of `worker` some of whose chunks never arrived: moved to ``partial/<worker>/`` as they are."""
        kept = []
        for (owner, relative), incoming in list(self._open.items()):
            if owner != worker:
                continue
            del self._open[(owner, relative)]
            target = self.out_dir / PARTIAL_DIR / worker / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(incoming.path, target)
            kept.append(
                {"file": str(target.relative_to(self.out_dir)), "chunks": incoming.next_index, "of": incoming.count}
            )
        return kept


def place_on_master_axis(
    source: Path, target: Path, axis: MasterAxis | None, publishers: dict[int, MasterAxis | None] | None = None
) -> int:
    """Write op-log file `source` to `target` with its times moved onto the master's clock; its rows.

    An end-to-end latency is the consumer's delivery time minus the publisher's stamp, two clocks when they ran on
    different hosts: it is corrected by both, the publisher found by the pid in the message's subject
    (``<prefix>.load.<pid>.<user>``) in `publishers` (pid -> that worker's axis; a pid not there, or shared by two
    workers and so given as None, leaves the latency as measured)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    if axis is not None and "intended_ns" in table.column_names:
        end_local = table.column("end_ns").to_numpy()
        for name in TIME_COLUMNS:
            index = table.schema.get_field_index(name)
            shifted = axis.shift(table.column(name).to_numpy())
            table = table.set_column(index, table.schema.field(index), pa.array(shifted, pa.int64()))
        e2e = table.column("e2e_ns").to_numpy().copy()
        stamped = e2e >= 0
        if stamped.any() and publishers:
            subjects = np.asarray(table.column("subject").to_pylist(), dtype=object)
            delivered = table.column("end_ns").to_numpy()  # on the master's clock now
            for subject in set(subjects[stamped]):
                publisher = publishers.get(_publisher_pid(subject))
                if publisher is None:
                    continue
                rows = stamped & (subjects == subject)
                e2e[rows] = delivered[rows] - publisher.shift(end_local[rows] - e2e[rows])
            index = table.schema.get_field_index("e2e_ns")
            table = table.set_column(index, table.schema.field(index), pa.array(e2e, pa.int64()))
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name("." + target.name + ".part")
    pq.write_table(table, part, compression="snappy")
    os.replace(part, target)
    return table.num_rows


def _publisher_pid(subject: str) -> int | None:
    """The publishing process's pid in a load subject (``<prefix>.load.<pid>.<user>``), None in any other."""
    parts = subject.split(".")
    return int(parts[-2]) if len(parts) >= 4 and parts[-3] == "load" and parts[-2].isdigit() else None


@dataclass
class FleetRecord:
    """One worker of the run as the master saw it."""

    client_id: str
    index: int
    host: str = ""
    pid: int | None = None
    clock: dict[str, list[ClockReading]] = field(default_factory=dict)  # "start"/"end" -> readings
    drained: dict[str, Any] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    partial_files: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """A file-name-safe name: the worker's index and host."""
        host = "".join(c if c.isalnum() or c in "-." else "-" for c in self.host) or "unknown"
        return f"w{self.index}-{host}"

    def reading(self, phase: str) -> ClockReading | None:
        readings = self.clock.get(phase)
        return best_reading(readings) if readings else None

    def axis(self) -> MasterAxis | None:
        start = self.reading("start")
        return MasterAxis(start, self.reading("end")) if start else None

    @property
    def complete(self) -> bool:
        return self.drained is not None and not self.errors and not self.partial_files

    def describe(self) -> dict[str, Any]:
        """The worker's entry in load.json's `workers`."""
        drained = self.drained or {}
        clock: dict[str, Any] = {}
        for phase in ("start", "end"):
            reading = self.reading(phase)
            clock[phase] = reading.as_dict() if reading else None
        axis = self.axis()
        return {
            "worker": self.label,
            "client_id": self.client_id,
            "host": self.host,
            "pid": self.pid,
            "client": drained.get("client"),
            "versions": drained.get("versions"),
            "ops": drained.get("rows"),
            "rows_received": sum(item.get("rows", 0) for item in self.files),
            "clock": {**clock, "bound_ns": axis.bound_ns if axis else None},
            "files": self.files,
            "partial_files": self.partial_files,
            "own_folder": drained.get("own_folder", True),  # False: a process of the master's host (--processes)
            "drained": self.drained is not None,
            "complete": self.complete,
            "errors": self.errors,
        }
