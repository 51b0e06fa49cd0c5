"""`jetcheck report --master spark://...`: a standalone Spark cluster (master and one worker on 127.0.0.1) gives the
same tables as local mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

from jetcheck.fixtures.process import free_port

START_S = 90.0


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except OSError:
        return -1  # the master is not answering yet


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


def test_a_report_on_a_standalone_cluster_equals_the_local_one(spark_cluster, built_report, run_folder, tmp_path):
    """The same run aggregated by the cluster's executors gives the local report's tables, row for row."""
    out = tmp_path / "cluster-report"
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "report", "--in", str(run_folder), "--out", str(out), "--master",
         spark_cluster],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    local = built_report.index.parent / "tables"
    for table in ("load_latency", "load_throughput", "load_totals", "conformance_summary"):
        cluster_rows = sorted((out / "tables" / f"{table}.csv").read_text().splitlines())
        assert cluster_rows == sorted((local / f"{table}.csv").read_text().splitlines()), table
