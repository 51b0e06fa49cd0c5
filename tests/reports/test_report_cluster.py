"""`jetcheck report --master spark://...`: a standalone Spark cluster (master and one worker on 127.0.0.1) gives the
same tables as local mode."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

from jetcheck.fixtures.process import free_port
from jetcheck.testing.synthetic import LoadSpec

from .conftest import write_run

START_S = 90.0
# Enough operations for every table to have rows in each second, operation and error class, and for the cluster's
# two executor cores to each read a file (two processes' logs), so merging across executors is exercised.
CLUSTER_LOAD = LoadSpec(records=4_000, duration_s=8.0, error_rate=0.02, seed=7)


def _alive_workers(ui_port: int) -> int:
    """The workers the master's UI counts as alive; -1 while it cannot answer that yet: no connection, or, while
    it starts, an HTML error page or other non-JSON answer on /json/."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as resp:
            state = json.load(resp)
    except (OSError, http.client.HTTPException, ValueError):  # ValueError: JSONDecodeError, non-UTF-8 bytes
        return -1
    return int(state.get("aliveworkers", 0)) if isinstance(state, dict) else -1


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """A standalone master and one worker, both on loopback with free ports, stopped afterwards."""
    work = tmp_path_factory.mktemp("spark-cluster")
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    env = {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",  # executors the worker starts bind to loopback too
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # no REST server on its fixed port 6066
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master_cmd = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                  "--webui-port", str(ui_port)]  # fmt: skip
    worker_cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host",
                  "127.0.0.1", "--webui-port", str(worker_ui), "--cores", "2", "--memory", "2g", "--work-dir",
                  str(work / "worker")]  # fmt: skip
    processes = []
    try:
        for name, cmd, ready in (
            ("master", master_cmd, lambda: _alive_workers(ui_port) >= 0),
            ("worker", worker_cmd, lambda: _alive_workers(ui_port) == 1),
        ):
            log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process below
            processes.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
            deadline = time.monotonic() + START_S
            while not ready():
                assert processes[-1][0].poll() is None, (work / f"{name}.log").read_text()[-2000:]
                assert time.monotonic() < deadline, f"the Spark {name} did not come up"
                time.sleep(0.2)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process, log in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


@pytest.mark.parametrize(
    "answer", [b"<html><body>HTTP ERROR 503</body></html>", b"", b"\xff\xfe not utf-8", b"[1, 2]"], ids=repr
)
def test_a_master_ui_answering_no_json_object_is_not_ready_yet(answer):
    """While the master starts, its UI may answer /json/ with an HTML error page: that is "not up", not a failure
    of the fixture."""

    class Starting(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Starting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert _alive_workers(server.server_address[1]) == -1
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory) -> Path:
    """A run folder (certify/ and load/) small enough that the cluster's start, not the data, sets the test's time."""
    return write_run(tmp_path_factory.mktemp("cluster-run"), CLUSTER_LOAD)


TABLES = ("load_latency", "load_distribution", "load_latency_over_time", "load_throughput", "load_errors",
          "load_totals", "conformance_summary")  # fmt: skip


def test_a_report_on_a_standalone_cluster_equals_the_local_one(spark_cluster, spark, cluster_run, tmp_path):
    """The same run aggregated by the cluster's executors gives the local report's tables, row for row."""
    from jetcheck.reports.build import build_report

    local = build_report([str(cluster_run)], out=tmp_path / "local-report", spark=spark).index.parent / "tables"
    out = tmp_path / "cluster-report"
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "report", "--in", str(cluster_run), "--out", str(out), "--master",
         spark_cluster],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for table in TABLES:
        local_rows = sorted((local / f"{table}.csv").read_text().splitlines())
        assert len(local_rows) > 2, table  # a header and rows: the comparison compares something
        assert sorted((out / "tables" / f"{table}.csv").read_text().splitlines()) == local_rows, table
