"""The fixture factories work in a user's own pytest run (pytester: a separate conftest.py and test file), and in
this one: the proxy's heartbeat drop, the container from a user's image."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from jetcheck.fixtures.binaries import default_cache_dir, wheel_binary
from jetcheck.fixtures.container import image_for
from jetcheck.fixtures.engine import find_engine
from jetcheck.fixtures.factories import jetcheck_container, jetcheck_proc, jetcheck_proxy
from jetcheck.fixtures.providers import ManagedServerProvider
from jetcheck.records import RESULTS_FILE, RUN_FILE, read_results
from jetcheck.specs import DEFAULT_VERSION

from .conftest import SERVER_VERSION

pytest_plugins = ["pytester"]
WAIT_S = 20.0


@pytest.fixture
def shared_cache(monkeypatch) -> None:
    """The user's cache of nats-server releases for the pytester runs too (pytester gives them a HOME of their
    own): a release is installed once, not once per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(default_cache_dir().parents[1]))


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


def _guide_example() -> tuple[str, str]:
    """The conftest.py and test file of the guide "Fixtures in your own tests", exactly as printed."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "fixtures.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    conftest, test = blocks
    assert conftest.startswith("# conftest.py") and test.startswith("# test_my_app.py")
    return conftest, test


def test_the_guides_example_runs_for_real(pytester: pytest.Pytester, monkeypatch, shared_cache, tmp_path) -> None:
    """The fixtures guide's example conftest.py and tests, exactly as printed, pass in a user's run: every factory,
    with a real cluster, a real container killed and restarted on its store, and a proxy in front of a real server."""
    existing = ManagedServerProvider("local", wheel_binary(DEFAULT_VERSION), tmp_path / "existing")
    target = existing.start()
    try:
        monkeypatch.setenv("NATS_URL", target.url)
        conftest, test = _guide_example()
        pytester.makeini(INI)
        pytester.makeconftest(conftest)
        pytester.makepyfile(test_my_app=test)
        result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=6)
    finally:
        existing.stop()


def test_a_bad_env_fails_only_the_tests_that_use_jetchecks_fixtures(pytester: pytest.Pytester, monkeypatch) -> None:
    """In one session with a bad JETCHECK_* variable, a test using a factory's fixture and one using the plugin's
    `target` each error with the one line naming the variable; the test using neither passes."""
    monkeypatch.setenv("JETCHECK_CHECK_TIMEOUT", "abc")
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
def test_uses_a_factory(nats_server):
    pass

def test_uses_the_plugins_target(target):
    pass

def test_uses_neither():
    assert 1 + 1 == 2
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["PASSED *test_uses_neither*"])
    assert len(re.findall(r"jetcheck: \S*JETCHECK_CHECK_TIMEOUT\S*.*abc", result.stdout.str())) >= 2


OVERRIDE_VERSION = "2.12.8"  # not the default release: a result naming it came from the overriding fixture
OVERRIDING_CONFTEST = f"""
from jetcheck.fixtures.factories import jetcheck_proc

jetcheck_server_under_test = jetcheck_proc(version="{OVERRIDE_VERSION}")
"""
CHECKS_ON_THE_OVERRIDE = """
import pytest

@pytest.mark.asyncio
@pytest.mark.rule("purge.keep")
async def test_reaches_the_server(js, server_info, observe):
    observe("version_seen", server_info.version)
    await js.account_info()

@pytest.mark.rule("purge.all")
@pytest.mark.needs("managed")
def test_needs_a_managed_server(target):
    assert target.managed
"""


def test_a_conftest_can_replace_the_server_under_test(pytester: pytest.Pytester, shared_cache, tmp_path) -> None:
    """`jetcheck_server_under_test = jetcheck_proc(version=...)` in a conftest.py: the checks run against that
    server (its version in every result and in run.json; managed, so a `needs("managed")` check runs), never the one
    the options name (here a URL where nothing listens)."""
    pytester.makeini(INI)
    pytester.makeconftest(OVERRIDING_CONFTEST)
    pytester.makepyfile(test_checks=CHECKS_ON_THE_OVERRIDE)
    out = tmp_path / "out"
    result = pytester.runpytest_subprocess(
        "--jetcheck-server", "nats://127.0.0.1:9", "--jetcheck-out", str(out), "-p", "no:randomly"
    )
    results = {r.check.split("::")[-1]: r for r in read_results(out / RESULTS_FILE)}
    assert {name: r.status for name, r in results.items()} == {
        "test_reaches_the_server": "pass",
        "test_needs_a_managed_server": "pass",
    }, result.stdout.str()[-3000:]
    assert {r.server_version for r in results.values()} == {OVERRIDE_VERSION}
    assert results["test_reaches_the_server"].observed == {"version_seen": OVERRIDE_VERSION}
    assert json.loads((out / RUN_FILE).read_text())["server"]["version"] == OVERRIDE_VERSION
    assert result.ret == 0


# This module's own fixtures, made by the factories as a user's conftest.py makes them.
nats_for_heartbeats = jetcheck_proc(scope="module")
nats_dropping = jetcheck_proxy("nats_for_heartbeats")
HEARTBEAT_S = 0.2


def _is_idle_heartbeat(msg) -> bool:
    return bool(msg.headers) and msg.headers.get("Status") == "100" and "Idle" in msg.headers.get("Description", "")


async def _until_fence(sub, fence: bytes) -> list:
    """The messages that reach `sub` before the fence message (the connection keeps the server's order)."""
    before = []
    while (msg := await sub.next_msg(timeout=WAIT_S)).data != fence:
        before.append(msg)
    return before


@pytest.mark.asyncio
async def test_drop_heartbeats_stops_idle_heartbeats_reaching_a_consumer_until_turned_off(
    nats_for_heartbeats, nats_dropping
) -> None:
    """While drop_heartbeats() is on, the idle heartbeats the server sends never reach the push consumer's
    subscription (between two fence messages the server sent three that the proxy dropped, and nothing arrived);
    drop_heartbeats(False) lets the next one through."""
    direct = await nats.connect(nats_for_heartbeats.url)
    via_proxy = await nats.connect(nats_dropping.url)
    try:
        js = direct.jetstream()
        await js.add_stream(name="HEARTBEATS", subjects=["hb.>"])
        deliver = via_proxy.new_inbox()
        sub = await via_proxy.subscribe(deliver)
        await via_proxy.flush()
        config = ConsumerConfig(deliver_subject=deliver, idle_heartbeat=HEARTBEAT_S, ack_policy=AckPolicy.NONE)
        await js.add_consumer("HEARTBEATS", config)
        assert _is_idle_heartbeat(await sub.next_msg(timeout=WAIT_S)), "heartbeats pass while nothing is dropped"

        nats_dropping.drop_heartbeats()
        await js.publish("hb.fence", b"fence-1")
        await _until_fence(sub, b"fence-1")  # heartbeats passed before the drop began arrive before this fence
        counters = nats_dropping.proxy.counters
        dropped = counters.heartbeats_dropped
        await nats_dropping.proxy.wait_for(lambda: counters.heartbeats_dropped >= dropped + 3, WAIT_S)
        await js.publish("hb.fence", b"fence-2")
        assert await _until_fence(sub, b"fence-2") == []

        nats_dropping.drop_heartbeats(False)
        assert _is_idle_heartbeat(await sub.next_msg(timeout=WAIT_S)), "heartbeats pass again once turned off"
    finally:
        await via_proxy.close()
        await direct.close()


USERS_IMAGE = "localhost/jetcheck-test/platform-nats:shipped"  # a name that says nothing of the release it holds


@pytest.fixture(scope="module")
def users_image():
    """jetcheck's image of SERVER_VERSION under a name of a user's registry, as a platform team ships it."""
    engine = find_engine()
    try:
        engine.client.images.get(image_for(engine, SERVER_VERSION)).tag(*USERS_IMAGE.rsplit(":", 1))
        yield USERS_IMAGE
        engine.client.images.remove(USERS_IMAGE)
    finally:
        engine.stop()


nats_from_a_users_image = jetcheck_container(image=USERS_IMAGE, scope="function")


def test_a_container_from_a_users_image_reports_the_release_its_info_names(users_image, request) -> None:
    """jetcheck_container(image=...) runs that image; its version is the one the server's INFO names."""
    server = request.getfixturevalue("nats_from_a_users_image")
    assert server.version == SERVER_VERSION
    assert server.url.startswith("nats://127.0.0.1:")


def test_a_container_with_both_an_image_and_a_version_is_refused() -> None:
    """The image fixes the release, so a version beside it is refused rather than ignored (as on the command line)."""
    with pytest.raises(ValueError, match=r"give image= or version=, not both: the image my/nats:1 runs the release"):
        jetcheck_container(image="my/nats:1", version="2.12.8")


CUT_SHORT = """
import pytest
from jetcheck.fixtures.factories import jetcheck_proc

nats_server = jetcheck_proc()


@pytest.fixture(scope="session")
def interrupted_on_teardown(nats_server, pytestconfig):
    (pytestconfig.rootpath / "port").write_text(nats_server.url.rsplit(":", 1)[1])
    yield
    raise KeyboardInterrupt  # a second Ctrl-C while the session's fixtures are torn down
"""


def test_a_server_whose_teardown_was_cut_short_is_stopped_when_pytest_unconfigures(
    pytester: pytest.Pytester, shared_cache
) -> None:
    """A Ctrl-C during the session's teardown skips the factory's own stop; the factories' last resort stops the
    server when pytest unconfigures, so it does not outlive the run."""
    pytester.makeini(INI)
    pytester.makeconftest(CUT_SHORT)
    pytester.makepyfile("def test_uses_it(interrupted_on_teardown):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    assert "KeyboardInterrupt" in result.stdout.str() + result.stderr.str()
    port = int((pytester.path / "port").read_text())
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


OTHER_VERSION = "2.12.8"
ORDER_TEST = """
from jetcheck.fixtures.target import reported_release

def test_version(nats_server):
    assert reported_release(nats_server.url) == "{expected}"
"""


@pytest.mark.parametrize(
    ("env", "flag", "expected"),
    [
        (None, None, OTHER_VERSION),
        (DEFAULT_VERSION, None, DEFAULT_VERSION),
        (DEFAULT_VERSION, OTHER_VERSION, OTHER_VERSION),
    ],
    ids=["ini", "environment-over-ini", "flag-over-environment"],
)
def test_a_factorys_version_comes_from_the_flag_else_the_environment_else_the_ini(
    pytester: pytest.Pytester, monkeypatch, shared_cache, env, flag, expected
) -> None:
    """jetcheck_proc() without a version runs --jetcheck-server-version, else JETCHECK_SERVER_VERSION, else the
    jetcheck_server_version ini key: the order of every jetcheck option (tests/test_config.py)."""
    if env is None:
        monkeypatch.delenv("JETCHECK_SERVER_VERSION", raising=False)
    else:
        monkeypatch.setenv("JETCHECK_SERVER_VERSION", env)
    pytester.makeini(INI + f"jetcheck_server_version = {OTHER_VERSION if flag is None else DEFAULT_VERSION}\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(ORDER_TEST.format(expected=expected))
    flags = ["--jetcheck-server-version", flag] if flag else []
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", *flags)
    result.assert_outcomes(passed=1)
