"""JetStream API levels and asset versioning (ADR-44, nats-server 2.11 and 2.12)."""

from __future__ import annotations

import json
import time

import pytest

from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_a_document_says, refusal_in
from jetcheck.conformance.jsapi import ApiError, api, create_consumer, stream_state
from jetcheck.versions import parse_version

pytestmark = pytest.mark.asyncio

REQUIRED_LEVEL = "Nats-Required-Api-Level"
LEVELS = (("2.12.0", 2), ("2.11.0", 1))  # ADR-44's table: the first release of a level, newest first
ADR44 = "ADR-44"
ADR44_WORDS = f"{ADR44}: 'The request will error with api level not supported'"


def _documented_level(release: str) -> int:
    return next((level for first, level in LEVELS if parse_version(release) >= parse_version(first)), 0)


async def _api_level(nc) -> int:
    return (await api(nc, "$JS.API.INFO")).get("api", {}).get("level", 0)


async def _requiring(nc, subject: str, level: str, body: dict | None = None) -> dict:
    """The JSON reply to `subject` asked with Nats-Required-Api-Level `level`."""
    payload = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(subject, payload, headers={REQUIRED_LEVEL: level}, timeout=5)
    return json.loads(reply.data)


def _server_metadata(config: dict) -> dict:
    return {k: v for k, v in (config.get("metadata") or {}).items() if k.startswith("_nats.")}


@pytest.mark.rule("apilevel.info")
async def test_info_reports_the_api_level(nc, expected_release, observe):
    """$JS.API.INFO's api.level is at least ADR-44's level of the release: 1 on 2.11.x, 2 from 2.12.0."""
    level = await _api_level(nc)
    observe("api_level", level)
    wanted = _documented_level(expected_release)
    assert level >= wanted, (
        f"{ADR44}: servers advertise their API level in $JS.API.INFO, {wanted} for {expected_release}; it reports "
        f"api.level {level}"
    )


@pytest.mark.rule("apilevel.asset-metadata")
async def test_streams_and_consumers_carry_the_servers_version_and_levels(nc, make_stream, names, server_info):
    """A plain stream and consumer carry _nats.ver, _nats.level and _nats.req.level 0."""
    level = str(await _api_level(nc))
    stream = await make_stream()
    consumer = await create_consumer(nc, stream.name, durable_name=names.consumer(), ack_policy="explicit")
    wanted = {"_nats.ver": server_info.version, "_nats.level": level, "_nats.req.level": "0"}
    for what, config in (("stream", stream.config), ("consumer", consumer["config"])):
        assert _server_metadata(config) == wanted, (
            f"{ADR44}: the server sets _nats.ver, _nats.level and _nats.req.level on the assets it hosts, {wanted} "
            f"for a plain {what}; the {what} carries {_server_metadata(config)}"
        )


@pytest.mark.rule("apilevel.required-level")
async def test_ttl_streams_and_paused_consumers_need_level_1(nc, make_stream, names):
    """A stream with allow_msg_ttl and a consumer with pause_until carry _nats.req.level 1."""
    stream = await make_stream(allow_msg_ttl=True)
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
    consumer = await create_consumer(
        nc, stream.name, durable_name=names.consumer(), ack_policy="explicit", pause_until=until
    )
    assets = {"stream with allow_msg_ttl": stream.config, "paused consumer": consumer["config"]}
    got = {what: _server_metadata(config).get("_nats.req.level") for what, config in assets.items()}
    assert got == {"stream with allow_msg_ttl": "1", "paused consumer": "1"}, (
        f"{ADR44} (and ADR-43 for TTL): an asset using a 2.11 feature requires API level 1; _nats.req.level: {got}"
    )


@pytest.mark.rule("apilevel.required-header")
async def test_a_request_above_the_servers_level_is_refused_and_does_nothing(nc, names, observe):
    """STREAM.CREATE requiring the server's level + 1 is refused and creates nothing; at its level it is served."""
    level = await _api_level(nc)
    name = names.stream()
    body = {"name": name, "subjects": [f"{names.subject()}.>"], "storage": "file"}
    above = await _requiring(nc, f"$JS.API.STREAM.CREATE.{name}", str(level + 1), body)
    observe("refusal", above.get("error"))
    assert "error" in above, (
        f"{ADR44}: a request requiring API level {level + 1} of a server at level {level} errors; it was served: "
        f"{above}"
    )
    with pytest.raises(ApiError) as missing:
        await stream_state(nc, name)
    assert missing.value.err_code == 10059, f"{ADR44}: the refused create made stream {name}"
    served = await _requiring(nc, "$JS.API.INFO", str(level))
    assert "error" not in served, f"{ADR44}: a request requiring the server's own level {level} is served; {served}"


@pytest.mark.rule("apilevel.required-header-words")
async def test_the_refusal_says_the_api_level_is_not_supported(nc, observe):
    """The refusal of a request requiring a level above the server's is 412/10185 in ADR-44's words ('api level not
    supported') or the errors table's ('JetStream minimum api level required'): the documents disagree."""
    level = await _api_level(nc)
    reply = await _requiring(nc, "$JS.API.INFO", str(level + 1))
    observe("refusal", reply.get("error"))
    asked = f"a request requiring api level {level + 1}"
    got = refusal_in(reply)
    assert got is not None, f"{ADR44_WORDS}; {asked} was served: {reply}"
    # ADR-44 gives the words only; the code is the errors table's, whose own words for it are other
    adr = DocumentedRefusal(412, 10185, "api level not supported", words_from=ADR44_WORDS)
    assert_refused_as_a_document_says(got, (adr, DocumentedRefusal(412, 10185)), asked)
