"""Stream and consumer metadata (ADR-33)."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import api, consumer_info, create_consumer

pytestmark = pytest.mark.asyncio

METADATA = {"owner": "jetcheck", "purpose": "ADR-33 round trip", "empty": ""}
LIMIT = 128 * 1024  # ADR-33: keys and values summed


def _users(config: dict) -> dict:
    """The metadata without the server's own `_nats` keys (ADR-33 reserves the prefix; ADR-44 fills it)."""
    return {k: v for k, v in (config.get("metadata") or {}).items() if not k.startswith("_nats")}


@pytest.mark.rule("metadata.round-trip")
async def test_metadata_comes_back_as_given(nc, make_stream, names):
    """A stream's and a consumer's metadata are in their create replies and infos as given."""
    stream = await make_stream(metadata=METADATA)
    name = names.consumer()
    created = await create_consumer(nc, stream.name, durable_name=name, ack_policy="explicit", metadata=METADATA)
    seen = {
        "stream create": _users(stream.config),
        "stream info": _users((await api(nc, f"$JS.API.STREAM.INFO.{stream.name}"))["config"]),
        "consumer create": _users(created["config"]),
        "consumer info": _users((await consumer_info(nc, stream.name, name))["config"]),
    }
    wrong = {where: got for where, got in seen.items() if got != METADATA}
    assert not wrong, f"ADR-33: metadata given at create comes back as given ({METADATA}); it came back as {wrong}"


@pytest.mark.rule("metadata.size-limit")
async def test_metadata_over_128_kb_is_refused(nc, make_stream, names, observe):
    """A stream and a consumer with one key and a value of 128 KB (1 byte over the limit) are refused."""
    over = {"k": "v" * LIMIT}
    stream_name = names.stream()
    stream_body = {"name": stream_name, "subjects": [f"{names.subject()}.>"], "storage": "file", "metadata": over}
    asked = "metadata of 128 KB and 1 byte"
    refusals = {"stream": await refused(nc, f"$JS.API.STREAM.CREATE.{stream_name}", stream_body, f"a stream's {asked}")}
    stream = await make_stream()
    consumer = names.consumer()
    body = {"stream_name": stream.name, "config": {"durable_name": consumer, "metadata": over}}
    subject = f"$JS.API.CONSUMER.CREATE.{stream.name}.{consumer}"
    refusals["consumer"] = await refused(nc, subject, body, f"a consumer's {asked}")
    observe("refusals", refusals)
