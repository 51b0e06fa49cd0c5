"""Fixtures for the project's own tests."""

from __future__ import annotations

import os

import pytest

from jetcheck.fixtures.binaries import DEFAULT_VERSION
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials, Target

# The nats-server the project's tests run against (a tox env per version sets it).
SERVER_VERSION = os.environ.get("JETCHECK_SERVER_VERSION", DEFAULT_VERSION)


@pytest.fixture(scope="session")
def embedded_server() -> Target:
    """One embedded nats-server for the whole test session."""
    provider = provider_for("local", SERVER_VERSION, Credentials())
    yield provider.start()
    provider.stop()
