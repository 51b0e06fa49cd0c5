"""Fixtures of the driver tests: the driver started from the test module's `driver_command`, a stream of the test's
own on the embedded server, and a fault proxy in front of it."""

from __future__ import annotations

import uuid

import pytest_asyncio

from jetcheck.fixtures.proxy import NatsProxy

from .driver_contract import running


@pytest_asyncio.fixture
async def driver(driver_command):
    """The driver the test module's `driver_command` starts, shut down afterwards (it must exit with status 0)."""
    async with running(*driver_command) as d:
        yield d


@pytest_asyncio.fixture
async def stream(embedded_server):
    """A stream of its own (subjects <name>.>) on the embedded server, deleted afterwards; yields (js, name)."""
    nc = await embedded_server.connect()
    js = nc.jetstream()
    name = f"DRV_{uuid.uuid4().hex[:8]}"
    await js.add_stream(name=name, subjects=[f"{name}.>"])
    yield js, name
    await js.delete_stream(name)
    await nc.close()


@pytest_asyncio.fixture
async def proxy(embedded_server):
    async with NatsProxy.for_url(embedded_server.url) as p:
        yield p
