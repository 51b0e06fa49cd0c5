"""A run prefix a user chose: jetcheck refuses it while the target uses it, and deletes only what runs created."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.target import Credentials, Target
from jetcheck.load.cli import LOCUSTFILE

from .conftest import SERVER_VERSION

pytestmark = pytest.mark.asyncio

USER_STREAM, USER_BUCKET = "mi_prod", "mi_x"
REFUSED = "jetcheck: run prefix 'mi' is in use on the target ("

PLUGIN_RUN = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=strict",
              "-o", "asyncio_default_fixture_loop_scope=function"]  # fmt: skip
# A check as checks are written: it creates a stream through the run's names.
PLAIN_CHECK = """
import pytest

@pytest.mark.asyncio
@pytest.mark.rule("streams.names")
async def test_creates(make_stream):
    await make_stream()
"""
# A check that creates what checks create (a stream, a KV bucket) and then waits to be killed: a jetcheck run
# interrupted where no cleanup can run.
HANGING_CHECK = """
import asyncio, os, pathlib
import pytest

@pytest.mark.asyncio
@pytest.mark.rule("streams.names")
async def test_hangs(nc, js, make_stream, names):
    await make_stream()
    await js.create_key_value(bucket=names.bucket())
    pathlib.Path(os.environ["READY_FILE"]).write_text("created")
    await asyncio.Event().wait()
"""


@pytest.fixture
def server(tmp_path):
    """A server of its own per test, as a user's: the test puts the user's data on it."""
    process = NatsServerProcess(wheel_binary(SERVER_VERSION), tmp_path / "server")
    process.start()
    yield process
    process.stop()


@pytest_asyncio.fixture
async def nc(server):
    client = await Target(server.url, Credentials()).connect()
    yield client
    await client.close()


async def _api(nc, subject: str, body: dict | None = None) -> dict:
    reply = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=5)
    return json.loads(reply.data)


async def stream_names(nc) -> set[str]:
    return set((await _api(nc, "$JS.API.STREAM.NAMES", {}))["streams"] or [])


async def put_user_data(nc) -> None:
    """The user's own stream `mi_prod` (three messages, one with headers) and KV bucket `mi_x` (stream KV_mi_x)."""
    js = nc.jetstream()
    await js.add_stream(name=USER_STREAM, subjects=["prod.>"], metadata={"owner": "billing"})
    for n in range(3):
        await js.publish(f"prod.orders.{n}", f"order {n}".encode(), headers={"Order": str(n)} if n == 1 else None)
    kv = await js.create_key_value(bucket=USER_BUCKET)
    await kv.put("k", b"v")


async def snapshot(nc, streams: tuple[str, ...] = (USER_STREAM, f"KV_{USER_BUCKET}")) -> dict[str, dict]:
    """Each user stream's config, state and every stored message, as the server reports them."""
    taken = {}
    for name in streams:
        info = await _api(nc, f"$JS.API.STREAM.INFO.{name}")
        assert "error" not in info, info
        messages = [
            (await _api(nc, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq}))["message"]
            for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1)
        ]
        taken[name] = {"config": info["config"], "state": info["state"], "messages": messages}
    if USER_STREAM in taken:
        assert [base64.b64decode(m["data"]) for m in taken[USER_STREAM]["messages"]] == [
            b"order 0",
            b"order 1",
            b"order 2",
        ]
    return taken


def jetcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def check_dir(tmp_path: Path, name: str, check: str) -> Path:
    """A directory of checks run by jetcheck's pytest plugin, with the fixtures jetcheck's own checks use."""
    checks = tmp_path / name
    checks.mkdir()
    (checks / "test_check.py").write_text(check)
    (checks / "conftest.py").write_text("pytest_plugins = ['jetcheck.conformance.checks.conftest']\n")
    return checks


async def interrupted_run(server, tmp_path: Path) -> None:
    """A jetcheck run with prefix mi (the pytest plugin, as certify runs it) killed while its check holds a stream
    and a KV bucket: nothing of its cleanup runs."""
    checks = check_dir(tmp_path, "interrupted", HANGING_CHECK)
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [*PLUGIN_RUN,
         "--jetcheck-server", server.url, "--jetcheck-run-prefix", "mi", "--jetcheck-out", str(tmp_path / "out1"),
         str(checks)],
        cwd=checks, env={**os.environ, "READY_FILE": str(ready)}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            await asyncio.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


async def test_certify_refuses_a_prefix_the_users_stream_carries_and_leaves_it_byte_identical(server, nc, tmp_path):
    """`certify --run-prefix mi` with the user's mi_prod and KV_mi_x on the target: one line, exit 2, and the
    user's streams (config, state, messages) exactly as before."""
    await put_user_data(nc)
    before = await snapshot(nc)
    proc = jetcheck(
        "certify", "--server", server.url, "--run-prefix", "mi", "--out", str(tmp_path / "o"), "--", "-m", "dedup"
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(REFUSED) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "KV_mi_x" in proc.stderr and "mi_prod" in proc.stderr and "choose another --run-prefix" in proc.stderr
    assert await snapshot(nc) == before
    assert await stream_names(nc) == {USER_STREAM, f"KV_{USER_BUCKET}"}


async def test_the_pytest_plugin_refuses_a_prefix_in_use_too(server, nc, tmp_path):
    """Run with plain pytest (no certify preflight), the plugin refuses before any check creates anything."""
    await put_user_data(nc)
    before = await snapshot(nc)
    checks = check_dir(tmp_path, "plain", PLAIN_CHECK)
    proc = subprocess.run(
        [*PLUGIN_RUN,
         "--jetcheck-server", server.url, "--jetcheck-run-prefix", "mi", "--jetcheck-out", str(tmp_path / "o"),
         str(checks)],
        capture_output=True, text=True, timeout=300, cwd=checks,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "jetcheck: run prefix 'mi' is in use on the target" in proc.stdout + proc.stderr
    assert await snapshot(nc) == before
    assert await stream_names(nc) == {USER_STREAM, f"KV_{USER_BUCKET}"}


async def test_clean_previous_deletes_an_interrupted_runs_leftovers_and_never_the_users_stream(server, nc, tmp_path):
    """After an interrupted run with prefix mi, the user puts mi_prod and KV_mi_x on the target. Without
    --clean-previous the prefix is refused; with it, the leftovers go, the user's streams stay byte-identical, and
    the prefix is still refused because the user's streams use it."""
    await interrupted_run(server, tmp_path)
    leftovers = await stream_names(nc)
    assert {"mi_ANCHOR", "KV_mi_b2"} <= leftovers and any(n.startswith("mi_S") for n in leftovers), leftovers
    await put_user_data(nc)
    before = await snapshot(nc)
    out = str(tmp_path / "o")
    refused = jetcheck("certify", "--server", server.url, "--run-prefix", "mi", "--out", out, "--", "-m", "dedup")
    assert refused.returncode == 2 and refused.stderr.startswith(REFUSED), refused.stderr
    assert await stream_names(nc) == leftovers | {USER_STREAM, f"KV_{USER_BUCKET}"}

    cleaned = jetcheck(
        "certify", "--server", server.url, "--run-prefix", "mi", "--clean-previous", "--out", out, "--", "-m", "dedup"
    )
    assert cleaned.returncode == 2, cleaned.stdout + cleaned.stderr
    assert cleaned.stderr.startswith(REFUSED) and "(2 stream(s): " in cleaned.stderr, cleaned.stderr
    assert len(cleaned.stderr.strip().splitlines()) == 1
    assert f"({len(leftovers)} stream(s) an earlier jetcheck run left were deleted)" in cleaned.stderr
    assert await stream_names(nc) == {USER_STREAM, f"KV_{USER_BUCKET}"}
    assert await snapshot(nc) == before


async def test_clean_previous_lets_the_run_start_and_the_run_leaves_nothing(server, nc, tmp_path):
    """With only an interrupted run's leftovers under the prefix, --clean-previous (here from the environment)
    deletes them and the run goes on; when it ends nothing of it is left."""
    await interrupted_run(server, tmp_path)
    assert "mi_ANCHOR" in await stream_names(nc)
    proc = jetcheck(
        "certify", "--server", server.url, "--run-prefix", "mi", "--out", str(tmp_path / "o"), "--", "-m", "dedup",
        env={"JETCHECK_CLEAN_PREVIOUS": "yes"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert await stream_names(nc) == set()


async def test_load_refuses_a_prefix_in_use_and_leaves_the_users_data_alone(server, nc, tmp_path):
    """`jetcheck load --run-prefix mi` refuses like certify, before Locust starts."""
    await put_user_data(nc)
    before = await snapshot(nc)
    out = tmp_path / "load"
    proc = jetcheck("load", "--server", server.url, "--run-prefix", "mi", "--scenario", "publish-async",
                    "--duration", "2s", "--rate", "200", "--out", str(out))  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(REFUSED) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (out / "locust.log").exists()
    assert await snapshot(nc) == before
    assert await stream_names(nc) == {USER_STREAM, f"KV_{USER_BUCKET}"}


async def test_load_with_a_fresh_chosen_prefix_leaves_only_the_users_data(server, nc, tmp_path):
    """A load run under a prefix nothing uses (from JETCHECK_RUN_PREFIX) creates its stream under that prefix and
    deletes it again; the user's data stays as it was."""
    await put_user_data(nc)
    before = await snapshot(nc)
    out = tmp_path / "load"
    proc = jetcheck("load", "--server", server.url, "--scenario", "publish-async", "--duration", "2s",
                    "--rate", "200", "--out", str(out), env={"JETCHECK_RUN_PREFIX": "lt"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads((out / "load.json").read_text())
    assert (run["prefix"], run["deleted"]) == ("lt", ["lt_LOAD_PUBLISH_ASYNC"])
    assert await stream_names(nc) == {USER_STREAM, f"KV_{USER_BUCKET}"}
    assert await snapshot(nc) == before


async def test_locust_run_directly_with_a_prefix_in_use_leaves_the_users_stream(server, nc, tmp_path):
    """The locustfile run by Locust itself with --jetcheck-prefix mi, and a user's stream that happens to have the
    name load would create: the test refuses to set up, and its end deletes nothing."""
    js = nc.jetstream()
    await js.add_stream(name="mi_LOAD_PUBLISH_ASYNC", subjects=["prod.>"])
    await js.publish("prod.a", b"kept")
    before = await snapshot(nc, ("mi_LOAD_PUBLISH_ASYNC",))
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "1", "-r", "1", "-t", "2s",
         "--jetcheck-prefix", "mi", "--jetcheck-server", server.url, "--jetcheck-scenario", "publish-async",
         "--jetcheck-rate", "50", "--jetcheck-out", str(tmp_path / "locust")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert await stream_names(nc) == {"mi_LOAD_PUBLISH_ASYNC"}
    assert await snapshot(nc, ("mi_LOAD_PUBLISH_ASYNC",)) == before
    assert "PrefixInUse: run prefix 'mi' is in use on the target (1 stream(s): mi_LOAD_PUBLISH_ASYNC)" in proc.stderr
