"""The master's and the workers' side of a fleet run inside Locust (jetcheck.load.fleet holds what they exchange).

The locustfile registers the messages (`register_worker`, `FleetMaster.register`); the master measures the
workers' clocks at test start and stop (`FleetMaster.measure`), waits at the drain until every worker that took
part has answered or is gone (`FleetMaster.wait_drained`), and at the end places the logs that arrived on its
clock and describes every worker (`FleetMaster.finish`).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from locust.runners import STATE_MISSING

from jetcheck.records import OPS_DIR

from . import fleet
from .clock import ClockReading, MasterAxis, time_ns

logger = logging.getLogger("jetcheck.load")
# after Locust calls every worker still draining missing; a starved one still drains (a fresh-clone CI run beside
# other work: three local workers, each alive, none drained within 5 s)
MISSING_GRACE_S = 20.0


def register_worker(runner) -> None:
    """A worker answers the master's clock pings at once, from the message greenlet (no queue in between)."""

    def ping(environment, msg, **_kwargs) -> None:
        environment.runner.send_message(fleet.CLOCK_PONG, fleet.pong(msg.data))

    runner.register_message(fleet.CLOCK_PING, ping)


class WorkerShipping:
    """A fleet worker's LogShipper run every SHIP_EVERY_S in a greenlet, from its log's opening to the drain."""

    def __init__(self, run_dir: Path, runner) -> None:
        threadpool = gevent.get_hub().threadpool
        self.shipper = fleet.LogShipper(run_dir, runner.send_message, threadpool.apply)
        self._stopping = Event()
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while not self._stopping.wait(fleet.SHIP_EVERY_S):
            try:
                self.shipper.ship_new()
            except OSError as exc:  # a file that went away: the drain's last pass reports what did not arrive
                logger.error("jetcheck: shipping the log failed: %s", exc)

    def finish(self) -> list[dict[str, Any]]:
        """Stop the greenlet (after the file it is sending), send what is left; the manifest."""
        self._stopping.set()
        self._greenlet.join()
        self.shipper.ship_new()
        return self.shipper.manifest()


class FleetMaster:
    """One test's workers as the master sees them."""

    def __init__(self, runner, out_dir: Path) -> None:
        self.runner = runner
        self.out_dir = Path(out_dir)
        self.records: dict[str, fleet.FleetRecord] = {}
        self.receiver = fleet.LogReceiver(self.out_dir)
        self._waiting: dict[tuple[str, str, int], tuple[int, Event]] = {}

    @staticmethod
    def register(runner, current) -> None:
        """Route the workers' answers to the FleetMaster of the current test (`current()`, None between tests)."""

        def on_pong(environment, msg, **_kwargs) -> None:
            received = time_ns()  # first: what follows is not part of the round trip
            master = current()
            if master is not None:
                master.pong(msg.node_id, msg.data, received)

        def on_chunk(environment, msg, **_kwargs) -> None:
            master = current()
            if master is not None:
                master.chunk(msg.node_id, msg.data)

        runner.register_message(fleet.CLOCK_PONG, on_pong)
        runner.register_message(fleet.LOG_CHUNK, on_chunk)

    def live_workers(self) -> list[str]:
        clients = self.runner.clients
        return [node.id for node in clients.all if node.state != STATE_MISSING]

    def take_part(self) -> None:
        """The workers connected now are the test's fleet."""
        for client_id in self.live_workers():
            if client_id not in self.records:
                index = self.runner.get_worker_index(client_id)
                index = len(self.records) if index is None else index
                self.records[client_id] = fleet.FleetRecord(client_id, index)

    def measure(self, phase: str) -> None:
        """CLOCK_ROUNDS round trips to every live worker of the fleet, one at a time (two at once would queue
        behind each other and widen both bounds); a worker that does not answer is skipped."""
        alive = set(self.live_workers())
        for record in self.records.values():
            if record.client_id not in alive:
                continue
            for round_number in range(fleet.CLOCK_ROUNDS):
                answered = Event()
                key = (record.client_id, phase, round_number)
                sent = time_ns()
                self._waiting[key] = (sent, answered)
                self.runner.send_message(
                    fleet.CLOCK_PING, {"phase": phase, "round": round_number}, client_id=record.client_id
                )
                if not answered.wait(fleet.PONG_TIMEOUT_S):
                    self._waiting.pop(key, None)
                    record.errors.append(f"no answer to the {phase} clock reading within {fleet.PONG_TIMEOUT_S:g} s")
                    break

    def pong(self, client_id: str, data: dict[str, Any], received_ns: int) -> None:
        waiting = self._waiting.pop((client_id, data.get("phase"), data.get("round")), None)
        record = self.records.get(client_id)
        if waiting is None or record is None:
            return  # an answer after its timeout, or from a worker that joined later
        sent_ns, answered = waiting
        record.clock.setdefault(data["phase"], []).append(ClockReading(sent_ns, int(data["worker_ns"]), received_ns))
        record.host, record.pid = data.get("host", ""), data.get("pid")
        answered.set()

    def chunk(self, client_id: str, message: dict[str, Any]) -> None:
        record = self.records.get(client_id)
        if record is None:
            logger.error("jetcheck: log chunk from worker %s, which is not part of this test", client_id)
            return
        try:
            self.receiver.chunk(record.label, message)
        except fleet.ChunkError as exc:
            record.errors.append(f"{exc} (host {record.host}, pid {record.pid})")
            logger.error("jetcheck: %s", record.errors[-1])

    def drained(self, client_id: str, data: dict[str, Any]) -> None:
        record = self.records.get(client_id)
        if record is not None:
            record.drained = data

    def wait_drained(self, timeout_s: float, missing_grace_s: float = MISSING_GRACE_S) -> None:
        """Until every worker of the fleet has drained, or the time is up. A worker Locust calls missing (no
        heartbeat for three seconds: dead, or only starved of CPU) is waited for `missing_grace_s` more once every
        other worker has answered, since the drain message reached it too and a starved one still answers."""
        deadline = time.monotonic() + timeout_s
        grace_ends = None
        while time.monotonic() < deadline:
            waiting = [record for record in self.records.values() if record.drained is None]
            if not waiting:
                return
            alive = set(self.live_workers())
            if all(record.client_id not in alive for record in waiting):
                grace_ends = grace_ends or time.monotonic() + missing_grace_s
                if time.monotonic() >= grace_ends:
                    return
            else:
                grace_ends = None
            gevent.sleep(0.05)  # the answers arrive as messages, handled by another greenlet

    def finish(self) -> list[dict[str, Any]]:
        """Place every worker's received files on the master's clock under ops/; each worker's load.json entry."""
        publishers: dict[int, MasterAxis | None] = {}
        for record in self.records.values():
            if record.pid is not None:  # a pid two hosts share names no one publisher: its latencies stay as measured
                publishers[record.pid] = None if record.pid in publishers else record.axis()
        for record in self.records.values():
            axis = record.axis()
            drained = record.drained or {}
            if axis is not None and drained.get("own_folder") and drained.get("stopping_ns") is not None:
                drained["stopping_ns"] = int(axis.shift(drained["stopping_ns"]))  # as its log's times
            incoming = self.receiver.incoming_dir(record.label)
            for relative in self.receiver.received.get(record.label, []):
                source = incoming / relative
                folder, name = Path(relative).parent, Path(relative).name
                stem = name.split("-", 1)
                target = self.out_dir / folder / f"{stem[0]}-{record.label}-{stem[1] if len(stem) > 1 else name}"
                is_log = str(folder) == OPS_DIR
                rows = fleet.place_on_master_axis(source, target, axis if is_log else None, publishers)
                source.unlink()
                record.files.append({"file": str(target.relative_to(self.out_dir)), "rows": rows})
            record.partial_files = self.receiver.unfinished(record.label)
            if record.drained is None:
                record.errors.append(
                    "never reported its log drained (killed or lost mid-run): "
                    + ("what it sent is kept" if record.files or record.partial_files else "none of its log arrived")
                )
            elif not record.reading("end"):
                record.errors.append("its clock was not read at the end")
        shutil.rmtree(self.out_dir / OPS_DIR / fleet.INCOMING_DIR, ignore_errors=True)  # all moved out by now
        return [record.describe() for record in sorted(self.records.values(), key=lambda r: r.index)]
