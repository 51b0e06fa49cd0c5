"""Filestore compression (ADR-35)."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import api, stored_messages

pytestmark = pytest.mark.asyncio


@pytest.mark.rule("compression.s2")
async def test_an_s2_stream_says_so_and_serves_what_was_stored(js, nc, make_stream):
    """A file stream with compression s2 reports s2 and returns its 50 messages as published."""
    stream = await make_stream(compression="s2")
    payloads = [f"message {n} ".encode() * 20 for n in range(50)]
    for payload in payloads:
        await js.publish(stream.subject("a"), payload)
    shown = (await api(nc, f"$JS.API.STREAM.INFO.{stream.name}"))["config"].get("compression")
    assert (stream.config.get("compression"), shown) == ("s2", "s2"), (
        f"ADR-35: the compression asked is returned by create and info; they say {stream.config.get('compression')} "
        f"and {shown}"
    )
    served = [m.payload for m in await stored_messages(nc, stream.name)]
    assert served == payloads, "ADR-35: compression is transparent; the stream served other bytes than were stored"


@pytest.mark.rule("compression.invalid-refused")
async def test_an_unknown_compression_is_refused(nc, names, observe):
    """A stream with compression `zip` is refused."""
    name = names.stream()
    body = {"name": name, "subjects": [f"{names.subject()}.>"], "storage": "file", "compression": "zip"}
    observe("refusal", await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, "compression 'zip'"))
