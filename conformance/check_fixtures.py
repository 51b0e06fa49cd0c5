"""The fixtures jetcheck's plugin offers checks: the server under test (probed and anchored once per run), its
info and profile, names, observations, nats-py connections, the client under test and a fault proxy.

The server under test comes from fixtures, as in anyone's suite: `jetcheck_server_under_test` (by default the
server jetcheck's options name, fixtures.factories.jetcheck_server; a conftest.py may replace it), probed and
anchored by `jetcheck_run_target`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import settings

from jetcheck.errors import ConfigError
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.factories import Server, jetcheck_server
from jetcheck.fixtures.proxy import NatsProxy
from jetcheck.fixtures.target import ServerInfo, Target
from jetcheck.options import Config
from jetcheck.redact import redact_text

from .clients import adapter_for
from .clients.driven_clients import shutdown_drivers
from .clients.driver_adapter import DriverAdapter
from .hypothesis_profiles import HYPOTHESIS_PROFILES
from .names import Names
from .profiles import profile_for
from .run_record import probe_and_anchor
from .stash_keys import OBSERVED, run_of


@pytest.fixture(scope="session")
def jetcheck_config(pytestconfig: pytest.Config) -> Config:
    return run_of(pytestconfig).config


# The server the checks run against: by default the one jetcheck's options name. A conftest.py may override it with
# any fixture yielding a fixtures.factories.Server, e.g. `jetcheck_server_under_test = jetcheck_proc("2.12.8")`.
jetcheck_server_under_test = jetcheck_server()


@pytest.fixture(scope="session")
def jetcheck_run_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """The server under test as the checks reach it: probed once (JetStream usable, its version and cluster), this
    run's prefix claimed and its anchor created; after the run, the streams it created are deleted. A server that
    cannot be started or reached ends the run with one line and exit 3."""
    run = run_of(request.config)
    cfg = run.config
    try:
        server: Server = request.getfixturevalue("jetcheck_server_under_test")
        target = server.target
        run.server = asyncio.run(probe_and_anchor(target, cfg.run_prefix, run.run_id, cfg.clean_previous))
        run.profile = profile_for(cfg.rules_of, run.server.version, run.server.api_level)
    except TargetError as exc:
        run.failure = redact_text(str(exc), run.secrets)
        pytest.exit(f"jetcheck: {run.failure}", returncode=3)
    run.target = target
    try:
        yield target
    finally:
        run.release_target()


@pytest.fixture
def target(jetcheck_run_target: Target) -> Target:
    """The server under test (started and probed once per run)."""
    return jetcheck_run_target


@pytest.fixture
def server_info(request: pytest.FixtureRequest, target: Target) -> ServerInfo:
    run = run_of(request.config)
    assert run.server is not None
    return run.server


@pytest.fixture
def expected_release(request: pytest.FixtureRequest, target: Target) -> str:
    """The release whose documented behaviour a check expects where it changed between releases: the profile's
    (the server's own release when it reports a real one; never what an unknown version string implies)."""
    run = run_of(request.config)
    assert run.profile is not None
    return run.profile.behaviour


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    run = run_of(request.config)
    return Names(run.config.run_prefix, run.names, run.ledger)


@pytest.fixture
def observe(request: pytest.FixtureRequest):
    """Record a behaviour seen (a variant, a timing) into this check's result under `observed`."""
    observed = request.node.stash.setdefault(OBSERVED, {})

    def record(key: str, value: Any) -> None:
        observed[key] = value

    return record


def hypothesis_settings_of(config: pytest.Config) -> settings:
    return settings.get_profile(HYPOTHESIS_PROFILES[run_of(config).config.profile])


@pytest.fixture
def hypothesis_settings(request: pytest.FixtureRequest) -> settings:
    """The Hypothesis profile this run uses (fast for CI, thorough for certification)."""
    return hypothesis_settings_of(request.config)


@pytest_asyncio.fixture
async def nc(target: Target):
    """A nats-py connection to the target, closed after the check."""
    client = await target.connect()
    yield client
    await client.close()


@pytest_asyncio.fixture
async def js(nc):
    """nats-py's JetStream context on `nc`."""
    return nc.jetstream()


@pytest.fixture(scope="session")
def jetcheck_client_drivers(jetcheck_run_target: Target) -> Iterator[None]:
    """The driven clients' driver processes, shared by the run's checks: shut down at the run's end, before the
    target's cleanup and its server's stop."""
    yield
    shutdown_drivers()


@pytest.fixture
def client(jetcheck_config: Config, jetcheck_client_drivers: None):
    """The client under test (`--jetcheck-client`), as a conformance.clients adapter. A driven client's driver is
    built and started by the first check that asks (then shared by the run); a missing tool or a failed build ends
    the run with its one line and exit 2; a driver that died fails this check's setup with why."""
    adapter = adapter_for(jetcheck_config.client)
    if isinstance(adapter, DriverAdapter):
        try:
            adapter.process()
        except ConfigError as exc:
            pytest.exit(f"jetcheck: {exc}", returncode=2)
    return adapter


@pytest_asyncio.fixture
async def proxied(target: Target):
    """A fault-injection NatsProxy in front of the target (managed or URL), stopped after the check; it speaks the
    target's TLS itself, with the context the client would use, so faults reach TLS targets too."""
    tls = target.credentials.tls_context() or ssl.create_default_context()
    proxy = await NatsProxy.for_url(target.url, upstream_tls=tls, require_tls=target.tls_required).start()
    yield proxy
    await proxy.stop()
