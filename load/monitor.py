"""Samples the target's monitoring endpoints (/varz, /jsz) once a second into ``samples/samples-<n>.parquet``."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from jetcheck.records import SAMPLE_FIELDS, SAMPLES_DIR, arrow_schema

from .parquetlog import RollingParquet

DEFAULT_MONITOR_PORT = 8222


def default_monitor_url(server_url: str) -> str:
    """The conventional monitoring address of a server reached at `server_url` (nats://host:port)."""
    host = urlsplit(server_url).hostname or "127.0.0.1"
    return f"http://{host}:{DEFAULT_MONITOR_PORT}"


def fetch_json(url: str, timeout: float = 1.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def reachable(monitor_url: str) -> bool:
    try:
        fetch_json(monitor_url + "/varz")
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


def sample(monitor_url: str, run_id: str) -> dict:
    """One row of SAMPLE_FIELDS read from /varz and /jsz now."""
    varz = fetch_json(monitor_url + "/varz")
    jsz = fetch_json(monitor_url + "/jsz")
    return {
        "run_id": run_id,
        "ts_ns": time.time_ns(),
        "cpu": float(varz.get("cpu", 0.0)),
        "mem": int(varz.get("mem", 0)),
        "in_msgs": int(varz.get("in_msgs", 0)),
        "out_msgs": int(varz.get("out_msgs", 0)),
        "in_bytes": int(varz.get("in_bytes", 0)),
        "out_bytes": int(varz.get("out_bytes", 0)),
        "js_messages": int(jsz.get("messages", 0)),
        "js_bytes": int(jsz.get("bytes", 0)),
        "slow_consumers": int(varz.get("slow_consumers", 0)),
    }


class MonitorSampler:
    """A thread sampling every `interval` seconds until `stop()`; rows are written every `write_every` samples."""

    def __init__(
        self, monitor_url: str, out_dir: Path, run_id: str, interval: float = 1.0, write_every: int = 30
    ) -> None:
        self.monitor_url = monitor_url.rstrip("/")
        self.run_id = run_id
        self.interval = interval
        self.write_every = write_every
        self.samples = 0
        self.failures = 0
        self._rows: list[dict] = []
        self._files = RollingParquet(
            Path(out_dir) / SAMPLES_DIR, "samples", arrow_schema(SAMPLE_FIELDS), roll_rows=3600, roll_seconds=3600
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jetcheck-monitor", daemon=True)

    def start(self) -> MonitorSampler:
        self._thread.start()
        return self

    def stop(self) -> list[Path]:
        self._stop.set()
        self._thread.join()
        self._write()
        self._files.close()
        return list(self._files.files)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self._rows.append(sample(self.monitor_url, self.run_id))
                self.samples += 1
            except (urllib.error.URLError, OSError, ValueError):
                self.failures += 1
            if len(self._rows) >= self.write_every:
                self._write()
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _write(self) -> None:
        import pyarrow as pa

        rows, self._rows = self._rows, []
        if rows:
            self._files.write(pa.Table.from_pylist(rows, schema=arrow_schema(SAMPLE_FIELDS)))
