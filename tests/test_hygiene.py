"""The suite's own hygiene check (tests/hygiene.py) fails a module that leaves a process, a stream or a temp file
behind, or deletes a stream another module created, and names who did it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import SERVER_VERSION
from .source_tree import ROOT

CONFTEST = f"""
import pytest
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials

pytest_plugins = ["tests.hygiene"]


@pytest.fixture(scope="session")
def server(request):
    provider = provider_for("local", {SERVER_VERSION!r}, Credentials())
    target = provider.start()
    request.config.pluginmanager.get_plugin("jetcheck-hygiene").watch(target)
    yield target
    provider.stop()


@pytest.fixture(scope="session")
def session_stream(server):
    return create(server, "BY_THE_SESSION")


def create(server, name):
    import asyncio

    async def go():
        nc = await server.connect()
        await nc.jetstream().add_stream(name=name, subjects=[name.lower()])
        await nc.close()

    asyncio.run(go())
    return name
"""

MODULES = {
    "test_a_clean.py": """
import subprocess, tempfile
from conftest import create

def test_cleans_up(server, session_stream):
    subprocess.run(["true"], check=True)
    with tempfile.NamedTemporaryFile():
        pass
""",
    "test_b_leaves.py": """
import subprocess, tempfile
from conftest import create

def test_leaves_everything(server):
    create(server, "LEFT_BEHIND")
    subprocess.Popen(["sleep", "60"])
    tempfile.mkstemp(prefix="left-")
""",
    "test_c_deletes.py": """
import asyncio

def test_deletes_the_sessions_stream(server, session_stream):
    async def go():
        nc = await server.connect()
        await nc.jetstream().delete_stream(session_stream)
        await nc.close()

    asyncio.run(go())
""",
}


@pytest.fixture(scope="module")
def outcome(tmp_path_factory) -> str:
    """pytest's output for the modules above, run with the hygiene plugin as the project's tests load it."""
    folder = tmp_path_factory.mktemp("hygiene")
    (folder / "conftest.py").write_text(CONFTEST)
    for name, text in MODULES.items():
        (folder / name).write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(folder), "-p", "no:cacheprovider",
         "-n", "0", "-rE", str(folder)],
        capture_output=True, text=True, cwd=folder, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return proc.stdout + proc.stderr


def test_a_module_that_cleans_up_passes(outcome):
    """A module whose processes ended, whose temp files are gone and that created no stream has no error."""
    assert "3 passed, 2 errors" in outcome, outcome
    assert "ERROR at teardown of test_cleans_up" not in outcome


def test_what_a_module_leaves_is_named_with_who_made_it(outcome):
    """A stream left (with the test and process that created it), a process still running and a temp file are each
    one line of the module's teardown error."""
    text = outcome
    assert "test_b_leaves left things behind:" in text
    assert "stream LEFT_BEHIND left on nats://127.0.0.1:" in text
    assert "created during test_b_leaves.py::test_leaves_everything by pid " in text
    assert "process left running: pid " in text and "`sleep 60`" in text
    assert "temp file left: " in text and "/left-" in text


def test_deleting_a_stream_another_module_created_is_named_with_the_deleter(outcome):
    """A stream that was there before the module started and was deleted during it names the test and the
    process that deleted it."""
    text = outcome
    assert "test_c_deletes left things behind:" in text
    assert "stream BY_THE_SESSION, which this module did not create" in text
    assert "was deleted during test_c_deletes.py::test_deletes_the_sessions_stream by pid " in text
