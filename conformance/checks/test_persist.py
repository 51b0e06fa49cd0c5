"""Stream persistence modes (ADR-56, nats-server 2.12): persist_mode async on R1 file streams."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import publish_raw

pytestmark = pytest.mark.asyncio

ADR56 = "ADR-56"
ASYNC = {"persist_mode": "async"}
INVALID_CONFIG = (500, 10052)
LEVEL = "_nats.req.level"


@pytest.mark.rule("persist.async")
async def test_an_async_r1_file_stream_is_accepted_and_shows_its_mode(nc, make_stream):
    """A file R1 stream created with persist_mode async acks a publish and shows persist_mode async."""
    stream = await make_stream(**ASYNC)
    ack = await publish_raw(nc, stream.subject("a"), b"x")
    got = (stream.config.get("persist_mode"), ack.get("seq"))
    assert got == ("async", 1), (
        f"{ADR56}: a stream created with persist_mode async keeps it and acknowledges publishes; its config shows "
        f"persist_mode {got[0]!r} and a publish was answered {ack}"
    )


@pytest.mark.rule("persist.default-unset")
@pytest.mark.parametrize("mode", [None, "default"], ids=["absent", "default"])
async def test_a_default_stream_shows_no_persist_mode(nc, make_stream, mode):
    """A stream created without persist_mode (with persist_mode default) has no persist_mode in its config."""
    stream = await make_stream(**({} if mode is None else {"persist_mode": mode}))
    assert "persist_mode" not in stream.config, (
        f"{ADR56}: the server will not set the implied default persist_mode in the configuration; a stream created "
        f"with persist_mode {mode!r} shows persist_mode {stream.config['persist_mode']!r}"
    )


@pytest.mark.rule("persist.api-level")
async def test_an_async_stream_requires_api_level_2(nc, make_stream):
    """A stream with persist_mode async carries _nats.req.level 2."""
    stream = await make_stream(**ASYNC)
    level = (stream.config.get("metadata") or {}).get(LEVEL)
    assert level == "2", f"{ADR56}: persist_mode async requires API level 2; the stream's {LEVEL} is {level!r}"


@pytest.mark.rule("persist.async-refusals")
@pytest.mark.parametrize("extra", [{"num_replicas": 3}, {"allow_atomic": True}], ids=["replicated", "atomic-batch"])
async def test_async_on_a_replicated_or_atomic_stream_is_refused(nc, names, extra):
    """persist_mode async with 3 replicas (with allow_atomic) is refused with 500/10052."""
    name = names.stream()
    body = {"name": name, "subjects": [f"{names.subject()}.>"], "storage": "file", **ASYNC, **extra}
    asked = f"persist_mode async with {extra}"
    code = (await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, asked))[:2]
    assert code == INVALID_CONFIG, (
        f"{ADR56}: {asked} is documented as refused (an invalid stream config, 500/10052); it was refused with {code}"
    )


@pytest.mark.rule("persist.async-file-only")
async def test_async_on_a_memory_stream_is_refused(nc, names):
    """persist_mode async on a memory-storage stream is refused with 500/10052."""
    name = names.stream()
    body = {"name": name, "subjects": [f"{names.subject()}.>"], "storage": "memory", **ASYNC}
    code = (await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, "persist_mode async on memory storage"))[:2]
    assert code == INVALID_CONFIG, (
        f"persist_mode async on memory storage is refused as an invalid stream config (500/10052); got {code}"
    )


@pytest.mark.rule("persist.immutable")
async def test_an_update_cannot_change_the_persist_mode(nc, make_stream):
    """Updating an async stream without persist_mode (to default) is refused with 500/10052."""
    stream = await make_stream(**ASYNC)
    config = {key: value for key, value in stream.config.items() if key != "persist_mode"}
    asked = "an update changing persist_mode from async to default"
    code = (await refused(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", config, asked))[:2]
    assert code == INVALID_CONFIG, f"{asked} is refused as an invalid stream config (500/10052); got {code}"
