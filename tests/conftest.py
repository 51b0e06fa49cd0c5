"""Fixtures for the project's own tests."""

from __future__ import annotations

import os
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest
from hypothesis import settings

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials, Target
from jetcheck.specs import DEFAULT_VERSION

# The nats-server the project's tests run against (a tox env per version sets it).
SERVER_VERSION = os.environ.get("JETCHECK_SERVER_VERSION", DEFAULT_VERSION)
VENDOR_PASSWORD = "s3cret-pw"
# The project's tests use the testing package's client variants (nats-py+<variant>) as a user's tests would.
pytest_plugins = ["jetcheck.testing.plugin", "tests.hygiene", "tests.schedule"]

# CI replays the same examples every run (a red run must mean a change broke something); a developer's run
# explores new ones. Loaded here, before test modules build their settings on the default profile.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# What the fast tier (`pytest -m "not slow"`, CONTRIBUTING.md) leaves out, as patterns of test ids: whole modules
# where they are slow for one reason, single tests where the rest of their module is quick, so they are named here
# rather than each test decorated; and the tests a whole run measured at 1 s or more (tests/slow_tests.txt, written
# by scripts/slow_tests.py).
SLOW = (
    "tests/conformance/test_proofs_*",  # each row runs certify's checks against a breaker
    "tests/conformance/test_checks_fail_when_rules_break.py::*",  # the same, for the server-side breakers
    "tests/conformance/test_release_pairs.py::*",  # certify against two real nats-server releases per pair
    # the fault tests: real runs on a cluster, waiting out kills, cuts, drops and damaged stores
    "tests/durability/test_*.py::test_a_short_*",
    "tests/durability/test_disk_faults.py::test_one_node_damaged_while_every_node_is_down",
    # real FUSE mounts (each a process of its own), remounted at each cut
    "tests/durability/test_power_loss.py::test_power_cuts_*",
    "tests/durability/test_power_loss.py::test_a_cut_leaves_*",
    "tests/durability/test_power_loss.py::test_a_mount_whose_*",
    "tests/durability/test_power_loss.py::test_a_failing_run_on_the_layer_*",
    "tests/durability/test_cluster_file.py::test_a_*described_cluster*",
    "tests/reports/test_report_durability.py::test_a_real_short_run_*",
    # a warm-up in a process of its own: a second JVM and report (jetcheck.reports.warm stays reached by the module's
    # other tests); 107 s of setup in a busy machine's fast tier, 8% of it
    "tests/reports/test_report_warm.py::test_the_warm_up_runs_at_the_lowest_priority_*",
    # load held at a rate for seconds on end (the scenarios' own tests stay), and TLS refusals waited out
    "tests/load/test_load_runs.py::test_an_unsustainable_rate_*",
    "tests/load/test_load_runs.py::test_fixed_rate_holds_*",
    "tests/test_tls.py::test_a_server_that_does_not_offer_tls_gets_no_byte_*",
    # a master and three worker processes, each starting Locust, for seconds of load
    "tests/load/test_fleet_run.py::*",
)
MEASURED_SLOW = {
    line for line in (Path(__file__).parent / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
    if line and not line.startswith("#")
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid in MEASURED_SLOW or any(fnmatch(item.nodeid, pattern) for pattern in SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def embedded_server(request) -> Target:
    """One embedded nats-server for the whole test session; what each module creates and deletes on it is audited
    (tests.hygiene)."""
    provider = provider_for("local", SERVER_VERSION, Credentials())
    target = provider.start()
    if auditor := request.config.pluginmanager.get_plugin("jetcheck-hygiene"):
        auditor.watch(target)
    yield target
    provider.stop()


def _openssl(*args: str, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def self_signed(directory: Path, name: str, subject: str, *extra: str) -> tuple[Path, Path]:
    """A self-signed certificate `<name>.pem` and its key `<name>.key` in `directory`, valid for two days."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject,
             "-keyout", f"{name}.key", "-out", f"{name}.pem", *extra, cwd=directory)  # fmt: skip
    return directory / f"{name}.pem", directory / f"{name}.key"


@pytest.fixture(scope="session")
def vendor_server(tmp_path_factory):
    """A server as a vendor runs it: TLS with its own CA, and a user with a password."""
    d = tmp_path_factory.mktemp("vendor")
    self_signed(d, "ca", "/CN=jetcheck test CA")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d)  # fmt: skip
    self_signed(d, "other", "/CN=someone else")  # a CA the server's certificate does not come from
    config = (
        f'tls {{ cert_file: "{d}/server.pem", key_file: "{d}/server.key" }}\n'
        f'authorization {{ user: vendor, password: "{VENDOR_PASSWORD}" }}\n'
    )
    server = NatsServerProcess(wheel_binary(SERVER_VERSION), d / "server", config=config)
    server.start()
    yield server, d
    server.stop()
