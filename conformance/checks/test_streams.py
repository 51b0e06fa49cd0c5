"""Stream CRUD: create (idempotent, refused when different), update rules, info, list, names, delete."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import ApiError, api, create_stream, stream_state

pytestmark = pytest.mark.asyncio


INVALID_CONFIG = DocumentedRefusal(500, 10052)
NOT_FOUND = DocumentedRefusal(404, 10059)


async def _update(nc, stream, **changes):
    """Update with the stream's settled configuration plus `changes`; returns the configuration of the reply."""
    body = {**stream.config, **changes}
    return (await api(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", body))["config"]


async def _update_refused(nc, stream, documented: DocumentedRefusal, **changes) -> None:
    """An update of `stream` with `changes` is refused as `documented`."""
    body = {**stream.config, **changes}
    asked = f"an update of {stream.name} with {changes}"
    assert_refused_as_documented(
        await refused(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", body, asked), documented, asked
    )


async def _info(nc, name: str) -> dict:
    return await api(nc, f"$JS.API.STREAM.INFO.{name}")


def _without_server_metadata(config: dict) -> dict:
    """The configuration without the `_nats.*` metadata servers since 2.11 add and report unevenly (ADR-44)."""
    metadata = {k: v for k, v in (config.get("metadata") or {}).items() if not k.startswith("_nats.")}
    return {**{k: v for k, v in config.items() if k != "metadata"}, **({"metadata": metadata} if metadata else {})}


async def _paged(nc, subject: str, key: str, body: dict | None = None) -> tuple[list, int]:
    """Every entry of a paged API (ADR-1) and the total the first page reported."""
    entries: list = []
    total = None
    while True:
        page = await api(nc, subject, {**(body or {}), "offset": len(entries)})
        total = page["total"] if total is None else total
        entries.extend(page.get(key) or [])
        if not page.get(key) or len(entries) >= page["total"]:
            return entries, total


@pytest.mark.rule("streams.create-idempotent")
async def test_create_with_identical_config_returns_the_existing_stream(js, nc, make_stream):
    """Creating a stream again with its own configuration succeeds and keeps its messages."""
    stream = await make_stream(max_msgs=10, description="idempotent")
    await js.publish(stream.subject("a"), b"kept")
    try:
        again = await create_stream(nc, stream.name, stream.config["subjects"], max_msgs=10, description="idempotent")
    except ApiError as error:
        pytest.fail(f"a create with the stream's own config is documented to succeed; the server refused it: {error}")
    settled = _without_server_metadata(again)
    assert settled == _without_server_metadata(stream.config), f"second create settled {again}, first {stream.config}"
    state = await stream_state(nc, stream.name)
    assert (state.messages, state.last_seq) == (1, 1), f"stream after the second create: {state}"


@pytest.mark.rule("streams.create-different-config-rejected")
async def test_create_with_a_different_config_is_rejected_with_10058(js, nc, make_stream):
    """Creating an existing stream name with another configuration is refused with 400/10058."""
    stream = await make_stream(max_msgs=10)
    await js.publish(stream.subject("a"), b"kept")
    again = {"name": stream.name, "subjects": stream.config["subjects"], "storage": "file", "max_msgs": 20}
    rejection = await refused(
        nc, f"$JS.API.STREAM.CREATE.{stream.name}", again, "creating an existing stream with another max_msgs"
    )
    assert_refused_as_documented(
        rejection, DocumentedRefusal(400, 10058), "creating an existing stream with another max_msgs"
    )
    info = await _info(nc, stream.name)
    assert info["config"]["max_msgs"] == 10 and info["state"]["messages"] == 1, f"stream changed: {info}"


@pytest.mark.rule("streams.create-subject-overlap-rejected")
async def test_create_with_overlapping_subjects_is_rejected_with_10065(nc, make_stream, names):
    """A stream whose subjects overlap an existing stream's is refused with 400/10065."""
    stream = await make_stream()
    name = names.stream()
    overlapping = {"name": name, "subjects": [stream.subject("a", "*")], "storage": "file"}
    rejection = await refused(
        nc, f"$JS.API.STREAM.CREATE.{name}", overlapping, "a stream on subjects another stream has"
    )
    assert_refused_as_documented(rejection, DocumentedRefusal(400, 10065), "a stream on subjects another stream has")


@pytest.mark.rule("streams.update-editable")
async def test_update_changes_the_editable_fields_and_keeps_messages(js, nc, make_stream, names):
    """Subjects, description, limits, discard and allow_direct change on update; stored messages stay."""
    stream = await make_stream()
    for _ in range(3):
        await js.publish(stream.subject("a"), b"m")
    extra = f"{names.subject()}.>"
    changes = {
        "subjects": [*stream.config["subjects"], extra],
        "description": "updated",
        "max_msgs": 100,
        "max_bytes": 1 << 20,
        "max_age": 3600 * 1_000_000_000,
        "max_msg_size": 4096,
        "max_msgs_per_subject": 50,
        "discard": "new",
        "allow_direct": True,
    }
    replied = await _update(nc, stream, **changes)
    settled = (await _info(nc, stream.name))["config"]
    for key, value in changes.items():
        assert replied[key] == value, f"update reply has {key}={replied[key]!r}, asked {value!r}"
        assert settled[key] == value, f"info after update has {key}={settled[key]!r}, asked {value!r}"
    assert (await stream_state(nc, stream.name)).messages == 3
    ack = await js.publish(extra[:-1] + "x", b"new subject")
    assert ack.stream == stream.name and ack.seq == 4


@pytest.mark.rule("streams.update-storage-rejected")
async def test_update_of_storage_is_rejected_with_10052(nc, make_stream):
    """Changing file storage to memory on update is refused with 500/10052."""
    stream = await make_stream()
    await _update_refused(nc, stream, INVALID_CONFIG, storage="memory")
    assert (await _info(nc, stream.name))["config"]["storage"] == "file"


@pytest.mark.rule("streams.update-retention-workqueue-rejected")
@pytest.mark.parametrize(("created", "updated"), [("limits", "workqueue"), ("workqueue", "interest")])
async def test_update_to_or_from_workqueue_is_rejected_with_10052(nc, make_stream, created, updated):
    """Changing the retention policy to or from WorkQueue on update is refused with 500/10052."""
    stream = await make_stream(retention=created)
    await _update_refused(nc, stream, INVALID_CONFIG, retention=updated)
    assert (await _info(nc, stream.name))["config"]["retention"] == created


@pytest.mark.rule("streams.update-retention-limits-interest")
@pytest.mark.parametrize(("created", "updated"), [("limits", "interest"), ("interest", "limits")])
async def test_update_between_limits_and_interest_is_accepted(nc, make_stream, created, updated):
    """Retention switches between Limits and Interest on update."""
    stream = await make_stream(retention=created)
    assert (await _update(nc, stream, retention=updated))["retention"] == updated
    assert (await _info(nc, stream.name))["config"]["retention"] == updated


@pytest.mark.rule("streams.update-one-way-flags")
@pytest.mark.parametrize(
    "flag",
    ["sealed", "deny_delete", "deny_purge"],
)
async def test_update_can_not_unset_sealed_deny_delete_or_deny_purge(nc, make_stream, flag):
    """Unsealing, or cancelling deny_delete / deny_purge, on update is refused with 500/10052."""
    if flag == "sealed":
        stream = await make_stream()
        await _update(nc, stream, sealed=True)
    else:
        stream = await make_stream(**{flag: True})
    await _update_refused(nc, stream, INVALID_CONFIG, **{flag: False})
    assert (await _info(nc, stream.name))["config"][flag] is True


@pytest.mark.rule("streams.update-unknown-rejected")
async def test_update_of_an_unknown_stream_is_rejected_with_10059(nc, names):
    """Updating a stream that does not exist is refused with 404/10059."""
    name = names.stream("MISSING")
    with pytest.raises(ApiError) as rejected:
        await api(nc, f"$JS.API.STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{names.subject()}.>"]})
    assert_refused_as_documented(refusal_of(rejected.value), NOT_FOUND, "a request naming a missing stream")


@pytest.mark.rule("streams.info")
async def test_info_reports_config_and_state(js, nc, make_stream, names):
    """Info returns the created configuration and the messages, bytes, sequences, subjects and consumers."""
    stream = await make_stream(max_msgs=50, description="info")
    for token in ("a", "b", "a"):
        await js.publish(stream.subject(token), b"12345")
    await api(
        nc,
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream.name}.{(durable := names.consumer())}",
        {"stream_name": stream.name, "config": {"durable_name": durable, "ack_policy": "explicit"}},
    )
    info = await _info(nc, stream.name)
    assert _without_server_metadata(info["config"]) == _without_server_metadata(stream.config)
    state = info["state"]
    summary = {k: state.get(k) for k in ("messages", "first_seq", "last_seq", "num_subjects", "consumer_count")}
    assert summary == {"messages": 3, "first_seq": 1, "last_seq": 3, "num_subjects": 2, "consumer_count": 1}
    assert state["bytes"] > 3 * 5, f"bytes {state['bytes']} do not cover three 5-byte payloads"


@pytest.mark.rule("streams.info-unknown-rejected")
async def test_info_on_an_unknown_stream_is_rejected_with_10059(nc, names):
    """Info on a stream that does not exist is refused with 404/10059."""
    with pytest.raises(ApiError) as rejected:
        await _info(nc, names.stream("MISSING"))
    assert_refused_as_documented(refusal_of(rejected.value), NOT_FOUND, "a request naming a missing stream")


@pytest.mark.rule("streams.names")
async def test_names_lists_every_stream(nc, make_stream):
    """STREAM.NAMES pages through every stream name and reports their total."""
    created = {(await make_stream()).name for _ in range(3)}
    listed, total = await _paged(nc, "$JS.API.STREAM.NAMES", "streams")
    assert created <= set(listed), f"missing from STREAM.NAMES: {sorted(created - set(listed))}"
    assert total == len(listed) and len(set(listed)) == len(listed), f"total {total}, listed {len(listed)}"


@pytest.mark.rule("streams.names-by-subject")
async def test_names_with_a_subject_lists_the_streams_that_hold_it(nc, names):
    """STREAM.NAMES with a subject filter lists exactly the streams whose subjects collide with it."""
    root = names.subject()
    first, second = names.stream(), names.stream()
    await create_stream(nc, first, [f"{root}.a.>"])
    await create_stream(nc, second, [f"{root}.b.*", f"{root}.c"])
    expected = {
        f"{root}.a.x": [first],
        f"{root}.b.x": [second],
        f"{root}.c": [second],
        f"{root}.*.x": [first, second],
        f"{root}.>": [first, second],
        f"{root}.d": [],
    }
    for subject, streams in expected.items():
        listed, total = await _paged(nc, "$JS.API.STREAM.NAMES", "streams", {"subject": subject})
        assert (sorted(listed), total) == (sorted(streams), len(streams)), f"STREAM.NAMES for {subject}: {listed}"


@pytest.mark.rule("streams.list")
async def test_list_returns_config_and_state_and_honours_a_subject(js, nc, make_stream):
    """STREAM.LIST pages through streams with their configuration and state; a subject filter narrows it."""
    stream = await make_stream(description="listed")
    other = await make_stream()
    await js.publish(stream.subject("a"), b"m")
    entries, total = await _paged(nc, "$JS.API.STREAM.LIST", "streams")
    assert total == len(entries)
    found = {e["config"]["name"]: e for e in entries}
    assert {stream.name, other.name} <= set(found), "created streams missing from STREAM.LIST"
    assert _without_server_metadata(found[stream.name]["config"]) == _without_server_metadata(stream.config)
    assert found[stream.name]["state"]["messages"] == 1
    filtered, total = await _paged(nc, "$JS.API.STREAM.LIST", "streams", {"subject": stream.subject("a")})
    assert ([e["config"]["name"] for e in filtered], total) == ([stream.name], 1)


@pytest.mark.rule("streams.delete")
async def test_delete_removes_the_stream_once(nc, make_stream):
    """A deleted stream is gone: info and a second delete answer 404/10059 and it is no longer listed."""
    stream = await make_stream()
    assert (await api(nc, f"$JS.API.STREAM.DELETE.{stream.name}"))["success"] is True
    for subject in (f"$JS.API.STREAM.INFO.{stream.name}", f"$JS.API.STREAM.DELETE.{stream.name}"):
        with pytest.raises(ApiError) as rejected:
            await api(nc, subject)
        assert_refused_as_documented(refusal_of(rejected.value), NOT_FOUND, f"{subject} after delete")
    listed, _ = await _paged(nc, "$JS.API.STREAM.NAMES", "streams", {"subject": stream.subject("a")})
    assert stream.name not in listed
