"""The fixture factories work in a user's own pytest run (pytester: a separate conftest.py and test file)."""

import re
from pathlib import Path

import pytest

from jetcheck.fixtures.binaries import DEFAULT_VERSION, wheel_binary
from jetcheck.fixtures.providers import ManagedServerProvider

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

CONFTEST = """
from jetcheck.fixtures.factories import jetcheck_noproc, jetcheck_proc
nats_server = jetcheck_proc()
"""

TEST = """
import nats

async def test_proc_serves_jetstream(nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        info = await nc.jetstream().account_info()
        assert info.limits is not None
    finally:
        await nc.close()
    assert nats_server.url.startswith("nats://127.0.0.1:")

def test_restart_keeps_url(nats_server):
    before = nats_server.url
    nats_server.restart()
    assert nats_server.url == before
"""


def test_proc_factory_in_a_users_run(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


UNRELATED = """
def test_unrelated():
    assert 1 + 1 == 2
"""


@pytest.mark.parametrize("bad", [("JETCHECK_SERVER", "bogus"), ("JETCHECK_CHECK_TIMEOUT", "abc")])
def test_bad_env_leaves_an_unrelated_run_alone(pytester: pytest.Pytester, monkeypatch, bad) -> None:
    monkeypatch.setenv(*bad)
    pytester.makepyfile(UNRELATED)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.ret == 0


def test_bad_env_is_one_clear_error_when_a_factory_is_used(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("JETCHECK_CHECK_TIMEOUT", "abc")
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*jetcheck: *JETCHECK_CHECK_TIMEOUT*abc*"])


def _readme_example() -> tuple[str, str]:
    """The conftest.py and test file of README's "Fixtures for your own tests", exactly as printed."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Fixtures for your own tests", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    conftest, test = blocks
    assert conftest.startswith("# conftest.py") and test.startswith("# test_my_app.py")
    return conftest, test


def test_readme_example_runs_for_real(pytester: pytest.Pytester, monkeypatch, tmp_path) -> None:
    existing = ManagedServerProvider("local", wheel_binary(DEFAULT_VERSION), tmp_path / "existing")
    target = existing.start()
    try:
        monkeypatch.setenv("NATS_URL", target.url)
        conftest, test = _readme_example()
        pytester.makeini(INI)
        pytester.makeconftest(conftest)
        pytester.makepyfile(test_my_app=test)
        result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=4)
    finally:
        existing.stop()
