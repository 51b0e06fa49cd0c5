"""A target that dies mid-certify: the run stops within seconds, records the rest as not run, and exits 2."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import nats.errors
import pytest

from jetcheck.conformance.certify import checks_command
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.target import Target
from jetcheck.records import RESULTS_FILE, read_results

from .conftest import SERVER_VERSION
from .fixtures.test_pause import wait_for_status

SELECTION = "consumers or streams"
STOP_BOUND_S = 10.0


def _collected(url: str) -> list[str]:
    """The node ids certify collects for SELECTION (collection reaches no server)."""
    proc = subprocess.run(
        checks_command("-m", SELECTION, "--collect-only", "-q"),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JETCHECK_SERVER": url},
    )
    return [line for line in proc.stdout.splitlines() if "::" in line]


def _wait_for_results(path, count: int, process: subprocess.Popen, bound_s: float = 180) -> None:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"certify ended (exit {process.returncode}) before {count} results were written")
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} results in {path} after {bound_s} s")


def test_a_target_killed_mid_certify_stops_the_run_within_seconds(tmp_path):
    """kill -9 of the target: exit 2 within 10 s, one line on stderr, every check not yet run is `skip` "not run: "
    with one reason naming the refusal, and no traceback."""
    server = NatsServerProcess(wheel_binary(SERVER_VERSION), tmp_path / "server")
    server.start()
    out = tmp_path / "out"
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "wb") as so, open(stderr, "wb") as se:
        certify = subprocess.Popen(
            [sys.executable, "-m", "jetcheck.cli", "certify", "--server", server.url, "--out", str(out),
             "--", "-m", SELECTION],
            stdout=so, stderr=se, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        _wait_for_results(out / RESULTS_FILE, 5, certify)
        server.kill()
        killed = time.monotonic()
        returncode = certify.wait(timeout=120)
        took = time.monotonic() - killed
    finally:
        if certify.poll() is None:
            certify.kill()
            certify.wait()
        server.stop()
    errors, output = stderr.read_text(), stdout.read_text()
    assert returncode == 2, output + errors
    assert took < STOP_BOUND_S, f"certify took {took:.1f} s to stop after the kill"
    assert len(errors.strip().splitlines()) == 1, errors
    assert errors.startswith("jetcheck: the target stopped answering"), errors
    assert "Traceback" not in output + errors
    results = list(read_results(out / RESULTS_FILE))
    assert sorted(r.check for r in results) == sorted(_collected(server.url)), "not every collected check is recorded"
    not_run = [r for r in results if r.message.startswith("not run: ")]
    assert not_run, "no check was recorded as not run"
    assert {r.status for r in not_run} == {"skip"}
    (reason,) = {r.message for r in not_run}
    assert f"connection refused at 127.0.0.1:{server.port}" in reason, reason
    first = results.index(not_run[0])
    assert results[first:] == not_run, "a check ran after the run stopped"
    assert f"{len(not_run)} of {len(results)} checks not run" in errors, errors


@pytest.mark.asyncio
async def test_a_request_or_flush_waiting_on_a_target_that_dies_fails_at_once(tmp_path):
    """A check's connection to a target killed mid-request ends its pending request and flush with
    ConnectionClosedError at once, instead of waiting out their 5 s and 10 s timeouts."""
    server = NatsServerProcess(wheel_binary(SERVER_VERSION), tmp_path / "server")
    server.start()
    try:
        nc = await Target(url=server.url).connect()
        server.pause()  # a server that answers nothing: neither the request nor the flush's PING
        assert wait_for_status(server.pid, wanted=True)
        request = asyncio.create_task(nc.request("jetcheck.silent", b"", timeout=30))
        while nc.stats["out_msgs"] == 0:  # nats-py counts the request once it waits for the reply
            await asyncio.sleep(0)
        flush = asyncio.create_task(nc.flush(timeout=30))
        await asyncio.sleep(0)  # one step of the flush task: its PING is sent and awaits the PONG
        assert not request.done() and not flush.done()
        server.kill()
        done, _ = await asyncio.wait([request, flush], timeout=20)
        assert done == {request, flush}, "a pending request or flush outlived its closed connection by 20 s"
        for task in (request, flush):
            assert isinstance(task.exception(), nats.errors.ConnectionClosedError), task.exception()
    finally:
        server.stop()
