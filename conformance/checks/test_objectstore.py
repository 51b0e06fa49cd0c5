"""Object stores (ADR-20): the bucket stream, chunks and digests, replace and delete, list, watch, meta, links,
seal and status.

The checks drive the client under test (--client) through its adapter's object store
(conformance/clients/base.py ObjectStore), watchers included, and read what it stored on the bucket's stream
through the raw JetStream API.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
import pytest_asyncio

from jetcheck.conformance.checks.answers import answered, who
from jetcheck.conformance.clients.base import (
    ClientError,
    DigestMismatch,
    ObjectExists,
    ObjectInfo,
    ObjectNotFound,
    ObjectStoreStatus,
    Unsupported,
    connected,
    refusal,
)
from jetcheck.conformance.jsapi import api, subject_messages
from jetcheck.conformance.plugin import na
from jetcheck.conformance.watching import watched, within

pytestmark = pytest.mark.asyncio

DEFAULT_CHUNK = 128 * 1024
ZERO_TIMES = (None, "", "0001-01-01T00:00:00Z")
# What ADR-20 documents, as the checks' failures say it first (answered)
STORED_BYTES = "ADR-20: get returns the stored bytes"
LINKED_BYTES = "ADR-20: get of a link returns the linked object's bytes"


def digest_of(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def sample(size: int) -> bytes:
    """Bytes that differ from chunk to chunk, so a chunk in the wrong place changes the digest."""
    return bytes((i * 7 + i // 1000) % 251 for i in range(size))


@pytest.fixture
def bucket(names):
    return names.bucket()


@pytest_asyncio.fixture
async def store(client, target, bucket):
    """The bucket, created by the client under test, through its adapter."""
    async with connected(client, target.url, target.credentials) as session:
        yield await session.object_store(bucket)


async def not_found(client, documented: str, op: str, call) -> tuple[bool, object]:
    """(True, None) when the client said not found (ObjectNotFound); else (False, what it returned). Another error
    fails the check, saying what is `documented` (answered)."""
    got = await answered(client, documented, op, call, ObjectNotFound)
    return (True, None) if isinstance(got, ObjectNotFound) else (False, got)


async def stored_info(nc, bucket: str, name: str) -> list[dict]:
    """Every info message stored for `name`, decoded."""
    return [json.loads(m.payload) for m in await subject_messages(nc, f"OBJ_{bucket}", meta_subject(bucket, name))]


async def write_info(nc, bucket: str, info: dict) -> None:
    """Store an info message by hand, as ADR-20 lays it out (rolled up per name)."""
    reply = await nc.request(
        meta_subject(bucket, info["name"]), json.dumps(info).encode(), timeout=5, headers={"Nats-Rollup": "sub"}
    )
    ack = json.loads(reply.data)
    assert "error" not in ack, f"storing the info message failed: {ack}"


def _show(info: ObjectInfo | None) -> str:
    if info is None:
        return "<end of initial data>"
    return f"{info.name}:{'deleted' if info.deleted else info.size}"


# --- the bucket and what an object is on the wire ----------------------------------------------------------------


@pytest.mark.rule("objectstore.bucket-stream")
async def test_bucket_is_an_obj_stream_on_chunk_and_meta_subjects(client, store, nc, bucket):
    """The client's create makes OBJ_<b> on $O.<b>.C.> and $O.<b>.M.>, discard new, rollup and direct allowed."""
    config = (await api(nc, f"$JS.API.STREAM.INFO.OBJ_{bucket}"))["config"]
    got = {k: config.get(k) for k in ("subjects", "discard", "allow_rollup_hdrs", "allow_direct")}
    got["subjects"] = sorted(got["subjects"] or [])  # a stream's subjects have no order (jnats lists M first)
    expected = {
        "subjects": [f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        "discard": "new",
        "allow_rollup_hdrs": True,
        "allow_direct": True,
    }
    assert got == expected, f"the object store stream {who(client)} created differs from ADR-20: {got}"


@pytest.mark.rule("objectstore.put-get")
async def test_put_reports_the_digest_and_get_returns_the_bytes(client, store, bucket):
    """put returns name, bucket, size, chunks and the SHA-256 digest; get returns the same bytes."""
    data = sample(1000)
    info = await store.put("docs/report.txt", data)
    got = (info.name, info.bucket, info.size, info.chunks, info.digest)
    expected = ("docs/report.txt", bucket, 1000, 1, digest_of(data))
    assert got == expected, f"{who(client)} put returned (name, bucket, size, chunks, digest) {got}, not {expected}"
    got = await answered(client, STORED_BYTES, "get", store.get("docs/report.txt"))
    assert got == data, f"{STORED_BYTES}; {who(client)} get returned other bytes than were put"
    empty = await store.put("empty", b"")
    got = (empty.size, empty.chunks, await answered(client, STORED_BYTES, "get of an empty object", store.get("empty")))
    assert got == (0, 0, b""), f"{who(client)} put/get of an empty object gave (size, chunks, bytes) {got}"


@pytest.mark.rule("objectstore.wire-layout")
async def test_object_is_chunks_plus_one_info_message(client, store, nc, bucket):
    """Chunks sit on $O.<b>.C.<nuid>; the info on $O.<b>.M.<base64url(name)> names that nuid, size and digest."""
    data = sample(5000)
    info = await store.put("a name/with spaces", data)
    infos = await stored_info(nc, bucket, "a name/with spaces")
    assert len(infos) == 1, f"expected one info message after {who(client)} put, found {infos}"
    stored = infos[0]
    shown = {k: stored.get(k) for k in ("name", "bucket", "nuid", "size", "chunks", "digest")}
    assert shown == {
        "name": "a name/with spaces",
        "bucket": bucket,
        "nuid": info.nuid,
        "size": 5000,
        "chunks": 1,
        "digest": digest_of(data),
    }, f"the info message {who(client)} stored differs from ADR-20: {shown}"
    chunks = await subject_messages(nc, f"OBJ_{bucket}", f"$O.{bucket}.C.{info.nuid}")
    assert b"".join(m.payload for m in chunks) == data, f"{who(client)}'s chunks do not hold the bytes put"


@pytest.mark.rule("objectstore.mtime-not-stored")
async def test_stored_info_has_no_modification_time(client, store, nc, bucket, observe):
    """The info message written by put carries no mtime (absent or zero)."""
    await store.put("o", b"data")
    stored = (await stored_info(nc, bucket, "o"))[0]
    observe("measured_stored_mtime", stored.get("mtime"))
    assert stored.get("mtime") in ZERO_TIMES, (
        f"ADR-20: 'Modified time is never stored'; {who(client)} put stored mtime={stored.get('mtime')!r}"
    )


@pytest.mark.rule("objectstore.chunking")
async def test_large_objects_are_split_into_chunks(client, store, nc, bucket):
    """300 KiB is stored as 128 KiB + 128 KiB + 44 KiB; max_chunk_size 4096 splits 10000 bytes in 3."""
    data = sample(300 * 1024)
    info = await store.put("big", data)
    chunks = await subject_messages(nc, f"OBJ_{bucket}", f"$O.{bucket}.C.{info.nuid}")
    sizes = [len(m.payload) for m in chunks]
    expected = [DEFAULT_CHUNK, DEFAULT_CHUNK, 300 * 1024 - 2 * DEFAULT_CHUNK]
    assert sizes == expected, f"{who(client)} stored 300 KiB in chunks of {sizes}; ADR-20's default is 128 KiB"
    assert info.chunks == 3, f"{who(client)} put reported {info.chunks} chunks for 3"
    got = await answered(client, STORED_BYTES, "get of a chunked object", store.get("big"))
    assert got == data, f"{STORED_BYTES}; {who(client)} get of a chunked object returned other bytes"
    info = await store.put("small", sample(10_000), chunk_size=4096)
    chunks = await subject_messages(nc, f"OBJ_{bucket}", f"$O.{bucket}.C.{info.nuid}")
    sizes = [len(m.payload) for m in chunks]
    assert sizes == [4096, 4096, 10_000 - 8192] and info.chunks == 3, (
        f"{who(client)} with max_chunk_size 4096 stored chunks of {sizes}, reported {info.chunks} chunks"
    )


@pytest.mark.rule("objectstore.digest-verified")
async def test_get_refuses_bytes_that_do_not_match_the_digest(client, store, nc, bucket):
    """When the stored digest does not match the chunks, get raises the client's digest-mismatch error."""
    await store.put("o", sample(3000))
    info = (await stored_info(nc, bucket, "o"))[0]
    await write_info(nc, bucket, info | {"digest": digest_of(b"something else")})
    documented = "ADR-20: the digest is checked: get refuses bytes that do not match it"
    got = await answered(
        client, documented, "get of bytes that do not match the digest", store.get("o"), DigestMismatch
    )
    if isinstance(got, DigestMismatch):
        return
    pytest.fail(f"{documented}; {who(client)} get returned {len(got)} bytes that do not match the digest")


# --- replace, delete, list ---------------------------------------------------------------------------------------


@pytest.mark.rule("objectstore.replace")
async def test_second_put_replaces_the_object(client, store, nc, bucket):
    """A second put under a name keeps one info message, drops the old chunks and serves the new bytes."""
    first = await store.put("o", sample(2000))
    second = await store.put("o", b"new bytes")
    assert first.nuid != second.nuid, f"{who(client)} reused nuid {first.nuid} for a new object"
    infos = await stored_info(nc, bucket, "o")
    assert [i["nuid"] for i in infos] == [second.nuid], f"info messages for the name after {who(client)}: {infos}"
    left = await subject_messages(nc, f"OBJ_{bucket}", f"$O.{bucket}.C.{first.nuid}")
    assert left == [], f"{who(client)} left {len(left)} chunks of the replaced object"
    documented = "ADR-20: after a put under a taken name, get returns the new bytes"
    got = await answered(client, documented, "get after the replace", store.get("o"))
    assert got == b"new bytes", f"{documented}; {who(client)} get after a replace returned the old bytes"


@pytest.mark.rule("objectstore.delete")
async def test_deleted_object_is_not_found(client, store, nc, bucket):
    """After delete, get and info say not found, the chunks are gone and the info says deleted."""
    info = await store.put("o", sample(1000))
    await store.delete("o")
    documented = "ADR-20: a deleted object is not found"
    refused, got = await not_found(client, documented, "get of the deleted object", store.get("o"))
    assert refused, f"{documented}; {who(client)} get returned {got!r}"
    refused, shown = await not_found(client, documented, "info of the deleted object", store.info("o"))
    assert refused, f"{documented}; {who(client)} info returned {shown}"
    left = await subject_messages(nc, f"OBJ_{bucket}", f"$O.{bucket}.C.{info.nuid}")
    assert left == [], f"{who(client)} left {len(left)} chunks of the deleted object"
    infos = await stored_info(nc, bucket, "o")
    assert len(infos) == 1 and infos[0].get("deleted") is True, (
        f"ADR-20: delete leaves the name one info message, marked deleted; info after {who(client)} delete: {infos}"
    )
    documented = "ADR-20: a deleted object's info says deleted"
    shown = await answered(client, documented, "info(show deleted)", store.info("o", show_deleted=True))
    assert shown.deleted is True, f"{documented}; {who(client)} info(show deleted) of a deleted object returned {shown}"


@pytest.mark.rule("objectstore.delete-missing")
async def test_deleting_a_missing_object_is_an_error(client, store):
    """delete of a name never put is a not-found error."""
    await store.put("present", b"x")
    documented = "ADR-20: 'It's an error to delete an object that does not exist'"
    refused, answer = await not_found(client, documented, "delete of a missing object", store.delete("absent"))
    assert refused, (
        f"{documented}; {who(client)} delete of a missing object raised no not-found error and returned {answer}"
    )


@pytest.mark.rule("objectstore.list")
async def test_list_returns_live_objects(client, store):
    """list() returns every live object's info and leaves deleted ones out."""
    for name in ("a", "b", "c"):
        await store.put(name, name.encode() * 10)
    await store.delete("b")
    listed = sorted((i.name, i.deleted) for i in await within(store.session, store.list(), "list()"))
    assert listed == [("a", False), ("c", False)], (
        f"ADR-20: 'When listing objects, filter those objects that have been deleted'; {who(client)} list gave {listed}"
    )


# --- watch -------------------------------------------------------------------------------------------------------


@pytest.mark.rule("objectstore.watch")
async def test_watch_sends_current_infos_then_end_of_data_then_changes(client, store):
    """watch() yields each object's info, then None, then later puts and deletes."""
    await store.put("a", b"1" * 10)
    await store.put("b", b"2" * 20)
    try:
        watch = await store.watch()
    except Unsupported as missing:
        pytest.fail(f"ADR-20 Watch is not implemented by {who(client)} ({missing})")
    try:
        expected = f"ADR-20 Watch: every object's info, then the end of initial data; {who(client)}'s watch"
        initial = [_show(i) for i in await watched(watch, _show, expected=expected)]
        assert initial == ["a:10", "b:20", "<end of initial data>"], f"{expected} yielded {initial}"
        await store.put("c", b"3" * 30)
        await store.delete("a")
        changes = f"ADR-20 Watch: each change after the end of initial data; {who(client)}'s watch"
        later = [_show(i) for i in await watched(watch, _show, count=2, expected=changes)]
        assert later == ["c:30", "a:deleted"], (
            f"ADR-20 Watch: each later change; after a put of c and a delete of a {who(client)} yielded {later}"
        )
    finally:
        await watch.stop()


@pytest.mark.rule("objectstore.watch-updates-only")
async def test_watch_updates_only_sends_only_later_changes(client, store):
    """watch(updates_only=True) yields only what changes after it started."""
    await store.put("old", b"x")
    try:
        watch = await store.watch(updates_only=True)
    except Unsupported as missing:
        na(f"updates-only watches are not implemented by {who(client)} ({missing}); ADR-20 does not list them")
    try:
        await store.put("new", b"yy")
        expected = f"the client documents UpdatesOnly as the changes after the watch started; {who(client)}'s watch"
        later = [_show(i) for i in await watched(watch, _show, count=1, expected=expected)]
        if later == ["<end of initial data>"]:
            # an end-of-data marker at once is no change (jnats' watchers send it so, as ADR-8 asks of KV's)
            later = [_show(i) for i in await watched(watch, _show, count=1, expected=expected)]
        assert later == ["new:2"], (
            f"the client documents UpdatesOnly as only later changes; after a put of new {who(client)} yielded {later}"
        )
    finally:
        await watch.stop()


# --- meta updates and links --------------------------------------------------------------------------------------


@pytest.mark.rule("objectstore.update-meta")
async def test_update_meta_changes_description_not_bytes(client, store):
    """update_meta sets description and headers; bytes, size and digest stay; a deleted object refuses it."""
    data = sample(500)
    await store.put("o", data)
    await store.update_meta("o", new_name="o", description="annotated", headers={"X-A": ["1"]})
    info = await store.info("o")
    got = (info.description, dict(info.headers), info.size, info.digest)
    expected = ("annotated", {"X-A": ["1"]}, 500, digest_of(data))
    assert got == expected, f"after {who(client)} update_meta (description, headers, size, digest) are {got}"
    assert await store.get("o") == data, f"{who(client)} update_meta changed the object's bytes"
    await store.put("gone", b"x")
    await store.delete("gone")
    refused = await refusal(store.update_meta("gone", new_name="gone", description="too late"))
    if isinstance(refused, Unsupported):
        pytest.fail(f"update_meta is not implemented by {who(client)} ({refused}); ADR-20 UpdateMeta")
    assert refused is not None, (
        f"ADR-20: 'It is an error to update metadata for a deleted object'; {who(client)} accepted it"
    )


@pytest.mark.rule("objectstore.rename")
async def test_update_meta_renames_to_a_free_name_only(client, store):
    """Renaming to a name held by a live object is refused; to an unused name it moves the object."""
    await store.put("o", b"payload")
    await store.put("taken", b"other")
    documented = "ADR-20: a rename onto the name of a live object is refused and changes nothing"
    onto = store.update_meta("o", new_name="taken")
    refused = await answered(client, documented, "rename onto the live object 'taken'", onto, ObjectExists)
    assert isinstance(refused, ObjectExists), f"{documented}; {who(client)} renamed 'o' onto the live object 'taken'"
    got = await answered(client, documented, "get of 'taken' after the refused rename", store.get("taken"))
    assert got == b"other", f"{documented}; {who(client)}'s refused rename changed the object it named"
    try:
        await store.update_meta("o", new_name="moved")
    except ObjectExists as exc:
        pytest.fail(
            f"ADR-20 allows renaming through UpdateMeta; {who(client)} refused a rename to the unused name 'moved' "
            f"({exc}); nats-py's update_meta checks whether the old name, not the new one, is taken"
        )
    documented = "ADR-20: a rename moves the object to the new name"
    got = await answered(client, documented, "get of the renamed object", store.get("moved"))
    assert got == b"payload", f"{documented}; {who(client)} renamed 'o' but 'moved' has other bytes"
    refused, got = await not_found(client, documented, "get of the old name", store.get("o"))
    assert refused, f"{documented}; after {who(client)} renamed 'o' to 'moved', get('o') still returned {got!r}"


@pytest.mark.rule("objectstore.link-get")
async def test_get_of_a_link_returns_the_linked_object(client, store, nc, bucket):
    """A link's get returns the target's bytes; once the target is deleted the link is not found."""
    target = await store.put("target", b"linked bytes")
    link = {"name": "link", "bucket": bucket, "nuid": target.nuid + "L", "size": 0, "chunks": 0}
    await write_info(nc, bucket, link | {"options": {"link": {"bucket": bucket, "name": "target"}}})
    got = await answered(client, LINKED_BYTES, "get of a link", store.get("link"))
    assert got == b"linked bytes", f"{LINKED_BYTES}; {who(client)} get of a link returned {got!r}"
    await store.delete("target")
    documented = "ADR-20: a link to a deleted object is not found"
    refused, got = await not_found(client, documented, "get of a link to a deleted object", store.get("link"))
    assert refused, f"{documented}; {who(client)} get returned {got!r}"


@pytest.mark.rule("objectstore.add-link-rules")
async def test_add_link_refuses_deleted_targets_and_links(client, store):
    """AddLink links to a live object, and refuses a deleted object or another link as the target."""
    await store.put("target", b"x")
    refused = await refusal(store.add_link("link", "target"))
    if isinstance(refused, Unsupported):
        pytest.fail(f"ADR-20 proposes AddLink as required API; not implemented by {who(client)} ({refused})")
    assert refused is None, f"ADR-20: AddLink links a name to a live object; {who(client)} refused: {refused}"
    got = await answered(client, LINKED_BYTES, "get of the link", store.get("link"))
    assert got == b"x", f"{LINKED_BYTES}; {who(client)}'s link returned {got!r}, not the target's bytes"
    assert await refusal(store.add_link("link-to-link", "link")) is not None, (
        f"ADR-20: AddLink refuses a link as its target; {who(client)} linked to a link"
    )
    await store.delete("target")
    assert await refusal(store.add_link("link-to-deleted", "target")) is not None, (
        f"ADR-20: AddLink refuses a deleted object as its target; {who(client)} linked to a deleted object"
    )


# --- seal and status ---------------------------------------------------------------------------------------------

SEALED = 10109  # JSStreamSealedErr, "invalid operation on sealed stream"
NS = 1_000_000_000


def sealed_refusal(refused: ClientError | None) -> bool:
    """The refusal is the server's sealed-stream error (its code, or its words where the client keeps no code)."""
    return refused is not None and (refused.err_code == SEALED or "sealed" in str(refused).lower())


async def status_of(client, store) -> ObjectStoreStatus:
    """The client's status of the bucket; na when the client has no status call."""
    try:
        return await store.status()
    except Unsupported as missing:
        na(f"{who(client)} has no object store status ({missing})")


async def update_bucket_stream(nc, bucket: str, **changes) -> dict:
    """Change the bucket's stream config by hand (raw STREAM.UPDATE); its new info."""
    config = (await api(nc, f"$JS.API.STREAM.INFO.OBJ_{bucket}"))["config"] | changes
    return await api(nc, f"$JS.API.STREAM.UPDATE.OBJ_{bucket}", config)


@pytest.mark.rule("objectstore.seal")
async def test_sealed_bucket_refuses_puts_and_deletes(client, store, nc, bucket):
    """The client's seal seals the bucket's stream; put and delete are then refused as on a sealed stream."""
    await store.put("o", sample(1000))
    refused = await refusal(store.seal())
    if isinstance(refused, Unsupported):
        na(f"{who(client)} has no object store seal ({refused})")
    assert refused is None, f"ADR-20 Seal: {who(client)} refused to seal its bucket: {refused}"
    sealed = (await api(nc, f"$JS.API.STREAM.INFO.OBJ_{bucket}"))["config"].get("sealed")
    assert sealed is True, f"ADR-20 Seal: seal seals the bucket's stream; after {who(client)} seal, sealed={sealed!r}"
    for op, call in (("put of a new object", store.put("new", b"x")), ("delete of o", store.delete("o"))):
        refused = await refusal(call)
        assert sealed_refusal(refused), (
            f"ADR-20 Seal: 'no further modifications will be allowed'; {who(client)} {op} in the sealed bucket "
            + ("succeeded" if refused is None else f"failed otherwise than with {SEALED}: {refused}")
        )


@pytest.mark.rule("objectstore.status")
async def test_status_reports_the_bucket_stream(client, store, nc, bucket):
    """status() reports the bucket, description, ttl, storage, replicas, sealed and size of the bucket's stream."""
    await store.put("o", sample(2000))
    await update_bucket_stream(nc, bucket, description="jetcheck status", max_age=3600 * NS)
    for state in ("open", "sealed"):
        if state == "sealed":
            await update_bucket_stream(nc, bucket, sealed=True)  # the server also sets max_age 0
        status = await status_of(client, store)
        info = await api(nc, f"$JS.API.STREAM.INFO.OBJ_{bucket}")
        got = (status.bucket, status.description, status.ttl, status.storage, status.replicas, status.sealed,
               status.size)  # fmt: skip
        expected = (bucket, "jetcheck status", info["config"].get("max_age", 0) / NS, info["config"]["storage"],
                    info["config"]["num_replicas"], state == "sealed", info["state"]["bytes"])  # fmt: skip
        assert got == expected, (
            f"ADR-20 ObjectStoreStatus: of the {state} bucket {who(client)} status reported (bucket, description, "
            f"ttl s, storage, replicas, sealed, size) {got}; its stream has {expected}"
        )


@pytest.mark.rule("objectstore.status-backing")
async def test_status_names_backing_store_metadata_and_compression(client, store, nc, bucket):
    """status() names the backing store JetStream and reports the stream's metadata and compression."""
    await store.put("o", sample(2000))
    for owner, compression in ((None, "none"), ("jetcheck", "s2")):
        if owner:
            await update_bucket_stream(nc, bucket, metadata={"owner": owner}, compression=compression)
        status = await status_of(client, store)
        got = (status.backing_store, (status.metadata or {}).get("owner"), status.compressed)
        expected = ("JetStream", owner, compression != "none")
        missing = [name for name in ("backing_store", "metadata", "compressed") if getattr(status, name) is None]
        assert got == expected, (
            f"ADR-20 ObjectStoreStatus: with metadata owner={owner} and compression {compression}, {who(client)} "
            f"status reported (backing store, metadata owner, compressed) {got}, not {expected}"
            + (f"; its status has no {', '.join(missing)}" if missing else "")
        )
