"""Key-Value buckets (ADR-8): the bucket stream, compare-and-set writes, deletes, purges, keys, watchers, status.

Checks named `wire` drive the server through the documented protocol (publishes with headers, raw API requests) on
a bucket stream created exactly as ADR-8 lists it; checks named `client` exercise the KV API of the client under
test (the `client` fixture, any adapter), watchers included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from typing import TypeVar

import nats.errors
import pytest

from jetcheck.conformance.checks.answers import answered, who
from jetcheck.conformance.checks.kv_support import (
    MARKER_REASON,
    NATS_TTL,
    adr8_bucket,
    expired,
    later_changes,
    markers_in_place,
    no_value,
    offered,
    offered_bucket,
    ttl_seconds,
    watching,
    yielded,
)
from jetcheck.conformance.clients.base import (
    KeyNotFound,
    Unsupported,
    Watch,
    connected,
    refusal,
)
from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_of
from jetcheck.conformance.jsapi import (
    NS,
    ApiError,
    api,
    create_stream,
    publish_raw,
    purge,
    subject_messages,
)
from jetcheck.conformance.plugin import na
from jetcheck.conformance.watching import within
from jetcheck.fixtures.nats_protocol import AckSubject

pytestmark = pytest.mark.asyncio

EXPECTED_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
KV_OPERATION = "KV-Operation"
TWO_MINUTES_NS = 120 * NS
T = TypeVar("T")


@pytest.fixture
def bucket(names):
    return names.bucket()


@contextlib.asynccontextmanager
async def client_kv(client, target, bucket: str, **options):
    """The bucket created through the client under test (its defaults plus `options`), on its own session."""
    async with connected(client, target.url, target.credentials) as session:
        yield await session.kv_create(bucket, **options)


# --- the bucket stream -------------------------------------------------------------------------------------------


@pytest.mark.rule("kv.bucket-stream")
async def test_bucket_is_a_kv_stream_on_its_subjects(client, target, nc, bucket):
    """Creating a bucket makes KV_<b> on $KV.<b>.> with history, discard new, rollup, deny_delete, file storage."""
    async with client_kv(client, target, bucket, history=5):
        config = (await api(nc, f"$JS.API.STREAM.INFO.KV_{bucket}"))["config"]
    got = {k: config.get(k) for k in ("subjects", "max_msgs_per_subject", "max_msgs", "discard", "storage")}
    got |= {k: config.get(k) for k in ("allow_rollup_hdrs", "deny_delete")}
    expected = {
        "subjects": [f"$KV.{bucket}.>"],
        "max_msgs_per_subject": 5,
        "max_msgs": -1,
        "discard": "new",
        "storage": "file",
        "allow_rollup_hdrs": True,
        "deny_delete": True,
    }
    differs = ", ".join(f"{k} {got[k]!r} (ADR-8: {v!r})" for k, v in expected.items() if got[k] != v)
    assert got == expected, f"{who(client)} made a bucket stream that differs from ADR-8: {differs}"


@pytest.mark.rule("kv.bucket-allow-direct")
async def test_bucket_stream_allows_direct_gets(client, target, nc, bucket, observe):
    """A bucket created with the client's defaults has allow_direct true."""
    async with client_kv(client, target, bucket):
        config = (await api(nc, f"$JS.API.STREAM.INFO.KV_{bucket}"))["config"]
    observe("allow_direct", config.get("allow_direct"))
    assert config.get("allow_direct") is True, (
        f"ADR-8: 'Allow Direct is always set to true'; {who(client)} created the bucket with allow_direct="
        f"{config.get('allow_direct')}"
    )


@pytest.mark.rule("kv.ttl-duplicate-window")
@pytest.mark.parametrize(("ttl_s", "window_ns"), [(30, 30 * NS), (600, TWO_MINUTES_NS)], ids=["30s", "10min"])
async def test_bucket_duplicate_window_follows_the_ttl(client, target, nc, names, ttl_s, window_ns):
    """A TTL up to 2 minutes becomes the duplicate window; a longer TTL gets 2 minutes."""
    bucket = names.bucket()
    async with client_kv(client, target, bucket, ttl=ttl_s):
        config = (await api(nc, f"$JS.API.STREAM.INFO.KV_{bucket}"))["config"]
    got = (config["max_age"], config["duplicate_window"])
    assert got == (ttl_s * NS, window_ns), f"{who(client)} with ttl {ttl_s}s: (max_age, duplicate_window) = {got}"


@pytest.mark.rule("kv.history-bounds")
async def test_history_is_between_1_and_64(client, target, nc, names, observe):
    """History 64 is accepted, 65 refused without a stream, and below 1 never yields unlimited history."""
    async with connected(client, target.url, target.credentials) as session:
        await session.kv_create(names.bucket(), history=64)
        too_large = names.bucket()
        refused = await refusal(session.kv_create(too_large, history=65))
        if refused is None:
            pytest.fail(f"ADR-8: history at most 64; {who(client)} created a bucket with history 65")
        observe("history_65", f"refused: {refused}")
        with pytest.raises(ApiError) as missing:
            await api(nc, f"$JS.API.STREAM.INFO.KV_{too_large}")
        assert missing.value.err_code == 10059, "history 65 must be refused before the stream is created"
        zero = names.bucket()
        if (refused := await refusal(session.kv_create(zero, history=0))) is not None:
            observe("history_0", f"refused: {refused}")
            return
    per_subject = (await api(nc, f"$JS.API.STREAM.INFO.KV_{zero}"))["config"]["max_msgs_per_subject"]
    observe("history_0", f"max_msgs_per_subject={per_subject}")
    assert per_subject == 1, (
        f"ADR-8: 'The minimum allowed size is 1'; {who(client)} accepted history=0 and made a bucket with "
        f"max_msgs_per_subject={per_subject} (unlimited history)"
    )


@pytest.mark.rule("kv.history-kept")
async def test_history_keeps_the_newest_revisions_per_key(client, target, nc, bucket):
    """With history 3, five puts to a key leave its 3 newest revisions; another key keeps its own."""
    async with client_kv(client, target, bucket, history=3) as kv:
        await kv.put("other", b"o")
        revisions = [await kv.put("k", str(i).encode()) for i in range(5)]
        kept = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.k")
        assert [m.seq for m in kept] == revisions[-3:], f"kept {kept}, puts were revisions {revisions}"
        assert len(await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.other")) == 1
        history = [(e.revision, e.value) for e in await within(kv.session, kv.history("k"), "history()")]
    expected = list(zip(revisions[-3:], [b"2", b"3", b"4"], strict=True))
    assert history == expected, f"{who(client)} history('k') returned {history}"


# --- writes and reads --------------------------------------------------------------------------------------------


@pytest.mark.rule("kv.put-get")
async def test_put_returns_the_revision_and_get_the_latest_entry(client, target, nc, bucket):
    """put returns the stored message's stream sequence; get returns the latest value with key and revision."""
    async with client_kv(client, target, bucket, history=2) as kv:
        first = await kv.put("a.b", b"1")
        await kv.put("c", b"x")
        latest = await kv.put("a.b", b"2")
        stored = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.a.b")
        assert [m.seq for m in stored] == [first, latest] == [1, 3], f"{who(client)} put returned {first}, {latest}"
        documented = "ADR-8: get returns the key's latest entry, with its revision"
        entry = await answered(client, documented, "get('a.b')", kv.get("a.b"))
    got = (entry.bucket, entry.key, entry.value, entry.revision)
    assert got == (bucket, "a.b", b"2", latest), f"{documented}; {who(client)} get('a.b') returned {entry}"


@pytest.mark.rule("kv.create-wire")
async def test_expected_subject_sequence_zero_creates_only_a_new_key(nc, bucket):
    """Expected-Last-Subject-Sequence 0 stores a new key; on a key with a value it is refused with 10071."""
    stream = await adr8_bucket(nc, bucket)
    subject = f"$KV.{bucket}.k"
    created = await publish_raw(nc, subject, b"v1", {EXPECTED_SUBJECT_SEQ: "0"})
    assert "error" not in created and created["seq"] == 1, f"create of a new key refused: {created}"
    again = await publish_raw(nc, subject, b"v2", {EXPECTED_SUBJECT_SEQ: "0"})
    error = again.get("error")
    assert error == {"code": 400, "err_code": 10071, "description": "wrong last sequence: 1"}, f"got {again}"
    assert [m.payload for m in await subject_messages(nc, stream, subject)] == [b"v1"]


@pytest.mark.rule("kv.create-purge-aware")
async def test_create_is_accepted_again_after_the_key_is_purged_from_the_stream(nc, bucket):
    """Once a key's messages are purged from the stream, Expected-Last-Subject-Sequence 0 is accepted again."""
    stream = await adr8_bucket(nc, bucket)
    subject = f"$KV.{bucket}.k"
    await publish_raw(nc, subject, b"v1")
    await purge(nc, stream, filter=subject)
    again = await publish_raw(nc, subject, b"v2", {EXPECTED_SUBJECT_SEQ: "0"})
    assert "error" not in again and again["seq"] == 2, f"create after the purge refused: {again}"


@pytest.mark.rule("kv.create-client")
async def test_client_create_refuses_a_live_key_and_recreates_a_deleted_one(client, target, bucket):
    """create stores a new key, refuses one with a value, and recreates one deleted or purged."""
    async with client_kv(client, target, bucket, history=5) as kv:
        new = "ADR-8: create stores a key without a value"
        first = await answered(client, new, "create of a new key", kv.create("k", b"v1"))
        live = "ADR-8: create refuses a key with a value (wrong last sequence, 10071) and keeps its value"
        refused = await refusal(kv.create("k", b"v2"))
        assert refused is not None, f"{live}; {who(client)} created the live key 'k' again"
        assert refused.err_code == 10071, f"{live}; {who(client)} refused create of a live key with {refused}"
        kept = await answered(client, live, "get after the refused create", kv.get("k"))
        assert kept.value == b"v1", f"{live}; {who(client)} get after the refused create returned {kept}"
        again = "ADR-8: create stores a key again once it is deleted or purged"
        await kv.delete("k")
        after_delete = await answered(client, again, "create after a delete", kv.create("k", b"v3"))
        entry = await answered(client, again, "get after the create", kv.get("k"))
        assert after_delete > first and entry.revision == after_delete, (
            f"{again}; {who(client)} create after a delete returned revision {after_delete}, then get returned {entry}"
        )
        await kv.purge("k")
        after_purge = await answered(client, again, "create after a purge", kv.create("k", b"v4"))
        entry = await answered(client, again, "get after the create", kv.get("k"))
        assert after_purge > after_delete and entry.value == b"v4", (
            f"{again}; {who(client)} create after a purge returned revision {after_purge}, then get returned {entry}"
        )


@pytest.mark.rule("kv.update-wire")
async def test_expected_subject_sequence_is_a_compare_and_set(nc, bucket):
    """The key's last revision in Expected-Last-Subject-Sequence stores; a stale one is refused with 10071."""
    stream = await adr8_bucket(nc, bucket, history=5)
    subject = f"$KV.{bucket}.k"
    await publish_raw(nc, f"$KV.{bucket}.other", b"o")
    first = (await publish_raw(nc, subject, b"v1"))["seq"]
    updated = await publish_raw(nc, subject, b"v2", {EXPECTED_SUBJECT_SEQ: str(first)})
    assert "error" not in updated and updated["seq"] == 3, f"update with the current revision refused: {updated}"
    stale = await publish_raw(nc, subject, b"v3", {EXPECTED_SUBJECT_SEQ: str(first)})
    assert stale.get("error") == {"code": 400, "err_code": 10071, "description": "wrong last sequence: 3"}, stale
    assert [m.payload for m in await subject_messages(nc, stream, subject)] == [b"v1", b"v2"]


@pytest.mark.rule("kv.update-client")
async def test_client_update_is_compare_and_set_on_the_revision(client, target, bucket):
    """update with the current revision returns the next one; a stale revision raises and changes nothing."""
    async with client_kv(client, target, bucket, history=5) as kv:
        first = await kv.put("k", b"v1")
        current = "ADR-8: update with the key's last revision stores the value"
        second = await answered(client, current, "update with the last revision", kv.update("k", b"v2", last=first))
        assert second > first, f"{current}; {who(client)} update returned revision {second} after {first}"
        stale = "ADR-8: update with a stale revision is refused (wrong last sequence, 10071) and changes nothing"
        refused = await refusal(kv.update("k", b"v3", last=first))
        assert refused is not None, f"{stale}; {who(client)} stored an update with the stale revision {first}"
        assert refused.err_code == 10071, f"{stale}; {who(client)} refused a stale update with {refused}"
        entry = await answered(client, stale, "get after the stale update", kv.get("k"))
    assert (entry.value, entry.revision) == (b"v2", second), (
        f"{stale}; {who(client)} get after the stale update: {entry}"
    )


@pytest.mark.rule("kv.delete-marker")
async def test_delete_stores_a_del_marker_and_keeps_history(client, target, nc, bucket):
    """delete stores an empty KV-Operation: DEL message, keeps earlier revisions, and get then finds no value."""
    async with client_kv(client, target, bucket, history=5) as kv:
        await kv.put("k", b"v1")
        await kv.put("k", b"v2")
        await kv.delete("k")
        stored = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.k")
        assert [m.payload for m in stored] == [b"v1", b"v2", b""], f"{who(client)}: history not kept: {stored}"
        assert stored[-1].headers.get(KV_OPERATION) == "DEL", f"{who(client)} delete marker: {stored[-1]}"
        await no_value(client, kv, "k", "delete")


@pytest.mark.rule("kv.purge-marker")
async def test_purge_leaves_only_the_purge_marker(client, target, nc, bucket):
    """purge stores KV-Operation: PURGE with Nats-Rollup: sub; it is then the key's only message."""
    async with client_kv(client, target, bucket, history=5) as kv:
        await kv.put("k", b"v1")
        await kv.put("k", b"v2")
        await kv.put("other", b"o")
        await kv.purge("k")
        stored = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.k")
        assert len(stored) == 1 and stored[0].payload == b"", f"{who(client)} purge left {stored}"
        headers = stored[0].headers
        marker = (headers.get(KV_OPERATION), headers.get("Nats-Rollup"))
        assert marker == ("PURGE", "sub"), f"{who(client)} purge marker: {headers}"
        assert len(await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.other")) == 1
        await no_value(client, kv, "k", "purge")


@pytest.mark.rule("kv.get-missing")
async def test_get_of_a_missing_key_raises_not_found(client, target, bucket):
    """get of a key never written says not found."""
    async with client_kv(client, target, bucket) as kv:
        await kv.put("present", b"x")
        documented = "ADR-8: get of a missing key raises KeyNotFound"
        entry = await answered(client, documented, "get of a key never written", kv.get("absent"), KeyNotFound)
    assert isinstance(entry, KeyNotFound), f"{documented}; {who(client)} get of a key never written returned {entry}"


@pytest.mark.rule("kv.deny-delete")
async def test_bucket_stream_refuses_message_delete(nc, bucket, observe):
    """The message delete API on the bucket stream is refused with 500/10057."""
    stream = await adr8_bucket(nc, bucket)
    await publish_raw(nc, f"$KV.{bucket}.k", b"v")
    with pytest.raises(ApiError) as refused:
        await api(nc, f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": 1})
    asked = "a message delete on the bucket's stream"
    assert_refused_as_documented(refusal_of(refused.value), DocumentedRefusal(500, 10057), asked, observe)
    assert len(await subject_messages(nc, stream, f"$KV.{bucket}.k")) == 1


@pytest.mark.rule("kv.direct-get")
async def test_direct_get_answers_the_latest_message_of_a_key(nc, bucket):
    """DIRECT.GET.KV_b.$KV.b.<key> answers the key's latest value with stream, subject and sequence headers."""
    stream = await adr8_bucket(nc, bucket, history=3)
    await publish_raw(nc, f"$KV.{bucket}.k", b"v1")
    await publish_raw(nc, f"$KV.{bucket}.other", b"o")
    last = (await publish_raw(nc, f"$KV.{bucket}.k", b"v2"))["seq"]
    documented = f"ADR-8: $JS.API.DIRECT.GET.{stream}.$KV.{bucket}.k answers the key's latest message"
    try:
        reply = await nc.request(f"$JS.API.DIRECT.GET.{stream}.$KV.{bucket}.k", b"", timeout=5)
    except nats.errors.NoRespondersError:
        pytest.fail(f"{documented}; the server answered that nothing serves it (no responders)")
    headers = reply.headers or {}
    got = (headers.get("Nats-Stream"), headers.get("Nats-Subject"), headers.get("Nats-Sequence"), reply.data)
    assert got == (stream, f"$KV.{bucket}.k", str(last), b"v2"), f"{documented}; it answered {headers} {reply.data!r}"


# --- keys, watchers, status --------------------------------------------------------------------------------------


@pytest.mark.rule("kv.keys")
async def test_keys_lists_live_keys_only(client, target, bucket):
    """keys() lists keys whose latest entry is a value; deleted and purged keys are left out."""
    async with client_kv(client, target, bucket, history=3) as kv:
        for key in ("a", "b.c", "d", "e"):
            await kv.put(key, b"v")
        await kv.put("a", b"again")
        await kv.delete("d")
        await kv.purge("e")
        keys = await within(kv.session, kv.keys(), "keys()")
    assert sorted(keys) == ["a", "b.c"], f"{who(client)} keys() listed {sorted(keys)}"


@pytest.mark.rule("kv.watch-initial-then-updates")
async def test_watch_sends_latest_entries_then_end_of_data_then_updates(client, target, bucket):
    """A watch yields each key's latest entry (deletes included), then None, then later changes."""
    async with client_kv(client, target, bucket, history=5) as kv:
        await kv.put("a", b"1")
        await kv.put("a", b"2")
        await kv.put("b", b"x")
        await kv.delete("b")
        async with watching(client, kv.watch(), "ADR-8 Watch") as watch:
            initial = await yielded(client, watch, "ADR-8: the end-of-initial-data signal after the latest entries")
            assert initial == ["a@2:PUT=b'2'", "b@4:DEL=b''", "<end of initial data>"], (
                "ADR-8: the latest entry of every key, deletes included, then the end of initial data; "
                f"{who(client)}'s watch yielded {initial}"
            )
            await kv.put("c", b"new")
            await kv.purge("a")
            later = await later_changes(client, watch, 2)
            assert later == ["c@5:PUT=b'new'", "a@6:PURGE=b''"], (
                f"ADR-8: each later change; after a put of c and a purge of a {who(client)}'s watch yielded {later}"
            )


@pytest.mark.rule("kv.watch-eod-empty")
async def test_watch_of_nothing_sends_end_of_data(client, target, bucket):
    """A watch on an empty bucket, and on an empty range of a filled one, first sends the end-of-data signal."""
    async with client_kv(client, target, bucket) as kv:
        expected = "ADR-8: 'The signal must always be sent'"
        async with watching(client, kv.watch(), "ADR-8 Watch") as empty:
            got = await yielded(client, empty, expected, of=" of an empty bucket")
            assert got == ["<end of initial data>"], (
                f"ADR-8: 'The signal must always be sent'; {who(client)}'s watch of an empty bucket yielded {got}"
            )
        await kv.put("a", b"1")
        async with watching(client, kv.watch("z.>"), "ADR-8 Watch of a range") as none_match:
            got = await yielded(client, none_match, expected, of=" of an empty range")
            assert got == ["<end of initial data>"], (
                f"ADR-8: 'The signal must always be sent'; {who(client)}'s watch of an empty range yielded {got}"
            )


@pytest.mark.rule("kv.watch-key-filter")
async def test_watch_on_a_range_sees_only_its_keys(client, target, bucket):
    """watch('x.*') yields only keys under x., before and after the end-of-data signal."""
    async with client_kv(client, target, bucket) as kv:
        await kv.put("x.1", b"a")
        await kv.put("y.1", b"b")
        async with watching(client, kv.watch("x.*"), "ADR-8 Watch of a range") as watch:
            expected = "ADR-8: the end-of-initial-data signal after the range's entries"
            initial = await yielded(client, watch, expected, of="('x.*')")
            assert initial == ["x.1@1:PUT=b'a'", "<end of initial data>"], (
                f"ADR-8: only the keys of the range; {who(client)}'s watch('x.*') yielded {initial}"
            )
            await kv.put("y.2", b"c")
            await kv.put("x.2", b"d")
            later = await later_changes(client, watch, 1)
            assert later == ["x.2@4:PUT=b'd'"], (
                f"ADR-8: only the keys of the range; after puts of y.2 and x.2 {who(client)}'s watch('x.*') yielded "
                f"{later}"
            )


class DeliveriesBehindInfo:
    """Reorders one connection's traffic in the proxy as nats-server now and then does itself (a consumer's
    deliveries and the replies of its API reach a connection by separate paths): the deliveries of `stream`'s
    consumers are held until release(); a consumer info request the client makes meanwhile goes upstream only once
    all `expected` deliveries have left the server, so its reply, which reaches the client first, says nothing is
    pending although no entry has reached the client yet."""

    def __init__(self, proxy, stream: str, expected: int) -> None:
        self.proxy, self.stream, self.expected = proxy, stream, expected
        self.held: list = []
        self.request = None  # the consumer info request, held until every delivery has left the server
        self.holding = True
        proxy.client_to_server = self.from_client
        proxy.server_to_client = self.from_server

    def from_client(self, frame):
        info = f"$JS.API.CONSUMER.INFO.{self.stream}."
        if self.holding and frame.is_publish and frame.subject.startswith(info) and len(self.held) < self.expected:
            self.request = frame
            return None
        return frame

    def from_server(self, frame):
        ack = AckSubject.parse(frame.reply) if self.holding and frame.is_message else None
        if ack is None or ack.stream != self.stream:
            return frame
        self.held.append(frame)
        if len(self.held) == self.expected and self.request is not None:
            self.proxy.send_to_server([self.request])
            self.request = None
        return None

    def release(self) -> None:
        """The held deliveries go to the client, and nothing is held from now on."""
        self.holding = False
        held, self.held = self.held, []
        self.proxy.send_to_clients(held)


@pytest.mark.rule("kv.watch-include-history")
async def test_watch_with_history_sends_every_retained_revision(client, target, bucket, proxied):
    """include_history yields every retained revision of each key in order, then None."""
    documented = "ADR-8 IncludeHistory: every retained revision, then the end of initial data"
    history = ["a@2:PUT=b'2'", "a@3:PUT=b'3'", "b@4:PUT=b'x'"]
    async with client_kv(client, target, bucket, history=2) as kv:
        for value in (b"1", b"2", b"3"):
            await kv.put("a", value)
        await kv.put("b", b"x")
        async with watching(client, kv.watch(include_history=True), "ADR-8 IncludeHistory") as watch:
            shown = await yielded(
                client, watch, "ADR-8 IncludeHistory: the end-of-initial-data signal after the history"
            )
        assert shown == [*history, "<end of initial data>"], f"{documented}; {who(client)} yielded {shown}"
    async with connected(client, proxied.url, target.credentials) as session:
        kv = await session.kv_create(bucket, history=2)  # the same bucket, through the proxy
        late = DeliveriesBehindInfo(proxied, f"KV_{bucket}", len(history))
        async with watching(client, kv.watch(include_history=True), "ADR-8 IncludeHistory") as watch:
            late.release()
            shown = await yielded(
                client, watch, "ADR-8 IncludeHistory: the end-of-initial-data signal after the history"
            )
    assert shown == [*history, "<end of initial data>"], (
        f"{documented}; when the watch's deliveries reached {who(client)} after the reply to its consumer info "
        "request and after the watch call returned (an order nats-server produces at random; the proxy made it "
        f"here), it yielded {shown}"
    )


async def _option_watch_yields(
    client, start: Awaitable[Watch], option: str, documented: str, initial: tuple[str, list[str]], later: tuple
) -> None:
    """The watch `start` makes with ADR-8's watch option `option` yields what `initial` says (where the end-of-
    initial-data signal comes, and what the watch yields up to and with it); after a change, it yields what `later`
    says (the change in words, a function making it, what the watch yields after it). Failures quote ADR-8 on the
    option (`documented`)."""
    option = f"ADR-8 {option}"
    signal, entries = initial
    changed, change, changes = later
    async with watching(client, start, option) as watch:
        got = await yielded(client, watch, f"{option}: the end-of-initial-data signal {signal}")
        assert got == entries, f"{option}: {documented}; {who(client)} yielded {got}"
        await change()
        got = await later_changes(client, watch, len(changes))
        assert got == changes, f"{option}: {documented}; after {changed} {who(client)} yielded {got}"


@pytest.mark.rule("kv.watch-ignore-deletes")
async def test_watch_ignoring_deletes_sends_only_values(client, target, bucket):
    """ignore_deletes leaves out deleted and purged keys, and still ends the initial data with None."""
    async with client_kv(client, target, bucket) as kv:
        await kv.put("a", b"1")
        await kv.put("b", b"2")
        await kv.delete("b")
        await kv.put("c", b"3")
        await kv.purge("c")

        async def delete_a_put_d() -> None:
            await kv.delete("a")
            await kv.put("d", b"4")

        initial = ("still", ["a@1:PUT=b'1'", "<end of initial data>"])
        later = ("a delete of a and a put of d", delete_a_put_d, ["d@7:PUT=b'4'"])
        start = kv.watch(ignore_deletes=True)
        await _option_watch_yields(client, start, "IgnoreDeletes", "'Only sends PUT operation entries'", initial, later)


@pytest.mark.rule("kv.watch-meta-only")
async def test_watch_meta_only_sends_entries_without_values(client, target, bucket):
    """A MetaOnly watch yields each entry's key, revision and operation with an empty value, before and after None."""
    async with client_kv(client, target, bucket) as kv:
        await kv.put("a", b"1")
        await kv.put("b", b"2")
        await kv.delete("b")
        initial = ("after the entries", ["a@1:PUT=b''", "b@3:DEL=b''", "<end of initial data>"])
        later = ("a put of c", lambda: kv.put("c", b"3"), ["c@4:PUT=b''"])
        documented = "'Does not send any values, only metadata about those values'"
        await _option_watch_yields(client, kv.watch(meta_only=True), "MetaOnly", documented, initial, later)


@pytest.mark.rule("kv.watch-updates-only")
async def test_watch_updates_only_sends_only_later_changes(client, target, bucket):
    """An UpdatesOnly watch sends the end-of-data signal at once, then only changes after it started."""
    async with client_kv(client, target, bucket) as kv:
        await kv.put("a", b"old")
        try:
            watch = await kv.watch(updates_only=True)
        except Unsupported as missing:
            pytest.fail(
                "ADR-8 lists UpdatesOnly among the watch options every client should offer; not implemented by "
                f"{who(client)} ({missing})"
            )
        try:
            expected = "ADR-8 UpdatesOnly: 'The End Of Initial Data marker is sent as soon as the watch starts'"
            first = await yielded(client, watch, expected, 1)
            assert first == ["<end of initial data>"], f"{expected}; {who(client)} yielded {first} first"
            await kv.put("b", b"new")
            later = await later_changes(client, watch, 1)
            assert later == ["b@2:PUT=b'new'"], (
                f"ADR-8 UpdatesOnly: only changes after the watch started; after a put of b {who(client)} yielded "
                f"{later}"
            )
        finally:
            await watch.stop()


@pytest.mark.rule("kv.status")
async def test_status_reports_bucket_values_history_and_ttl(client, target, bucket):
    """status() gives the bucket name, the message count with history, the history and the TTL."""
    async with client_kv(client, target, bucket, history=3, ttl=60) as kv:
        for value in (b"1", b"2"):
            await kv.put("a", value)
        await kv.put("b", b"x")
        status = await kv.status()
    got = (status.bucket, status.values, status.history, status.ttl)
    assert got == (bucket, 3, 3, 60), f"{who(client)} status() said {status}"


# --- ADR-48: limit markers, per-key TTLs, TTL'd purges -------------------------------------------------------------


@pytest.mark.rule("kv.limit-markers-config")
async def test_limit_markers_allow_msg_ttl_and_keep_markers(client, target, nc, bucket, observe):
    """A bucket created with limit markers kept 5 s has allow_msg_ttl true and subject_delete_marker_ttl 5 s."""
    documented = "ADR-48: limit markers set allow_msg_ttl true and subject_delete_marker_ttl to the duration"
    async with offered_bucket(client, target, bucket, documented, limit_marker_ttl=5):
        config = (await api(nc, f"$JS.API.STREAM.INFO.KV_{bucket}"))["config"]
    got = (config.get("allow_msg_ttl"), config.get("subject_delete_marker_ttl"))
    observe("allow_msg_ttl, subject_delete_marker_ttl", got)
    assert got == (True, 5 * NS), (
        f"{documented}; {who(client)} created the bucket with limit markers of 5 s as allow_msg_ttl={got[0]}, "
        f"subject_delete_marker_ttl={got[1]}"
    )


@pytest.mark.rule("kv.status-limit-marker-ttl")
async def test_status_reports_the_limit_marker_ttl(client, target, bucket):
    """status() of a bucket with limit markers kept 5 s reports LimitMarkerTTL 5 s."""
    documented = "ADR-48 Status: LimitMarkerTTL reports how long the bucket keeps its limit markers"
    async with offered_bucket(client, target, bucket, documented, limit_marker_ttl=5) as kv:
        status = await answered(client, documented, "status()", kv.status())
    if status.limit_marker_ttl is None:
        na(f"{who(client)}'s status has no LimitMarkerTTL ({status})")
    assert status.limit_marker_ttl == 5, (
        f"{documented}; for limit markers of 5 s {who(client)} status() reported LimitMarkerTTL "
        f"{status.limit_marker_ttl} s"
    )


@pytest.mark.rule("kv.create-ttl")
async def test_create_with_a_ttl_sends_it_as_nats_ttl(client, target, nc, bucket):
    """create(key, value, ttl=3 s) on a bucket with limit markers stores the value with Nats-TTL 3 s."""
    documented = "ADR-48: Create() accepts a TTL, sent as the Nats-TTL header of the put"
    async with offered_bucket(client, target, bucket, documented, history=5, limit_marker_ttl=1) as kv:
        await offered(client, documented, kv.create("k", b"v", ttl=3))
        stored = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.k")
    shown = [(m.payload, m.headers.get(NATS_TTL)) for m in stored]
    assert len(stored) == 1 and stored[0].payload == b"v" and ttl_seconds(stored[0].headers.get(NATS_TTL)) == 3, (
        f"{documented}; after {who(client)} create('k', ttl=3 s) the key holds (value, Nats-TTL) {shown}"
    )


@pytest.mark.rule("kv.purge-ttl")
async def test_purge_with_a_ttl_keeps_the_marker_that_long(client, target, nc, bucket):
    """purge(key, ttl=30 s) leaves only a PURGE marker with Nats-Rollup: sub and Nats-TTL 30 s."""
    documented = "ADR-48: Purge() accepts a TTL: a purge marker with KV-Operation: PURGE, Nats-Rollup: sub and Nats-TTL"
    async with offered_bucket(client, target, bucket, documented, history=5, limit_marker_ttl=1) as kv:
        await kv.put("k", b"v1")
        await kv.put("k", b"v2")
        await offered(client, documented, kv.purge("k", ttl=30))
        stored = await subject_messages(nc, f"KV_{bucket}", f"$KV.{bucket}.k")
    shown = [(m.payload, m.headers) for m in stored]
    marker = stored[-1].headers if stored else {}
    got = (marker.get(KV_OPERATION), marker.get("Nats-Rollup"), ttl_seconds(marker.get(NATS_TTL)))
    assert len(stored) == 1 and stored[0].payload == b"" and got == ("PURGE", "sub", 30), (
        f"{documented}; after {who(client)} purge('k', ttl=30 s) the key holds {shown}"
    )


@pytest.mark.rule("kv.marker-get")
async def test_get_of_a_key_ended_by_a_limit_marker_is_not_found(client, target, nc, bucket):
    """get of a key whose latest message is a MaxAge (TTL expired), Purge or Remove limit marker is not found."""
    async with client_kv(client, target, bucket) as kv:
        await markers_in_place(nc, kv, bucket)
        for key, reason in (("p", "Purge"), ("r", "Remove"), ("t", "MaxAge")):
            await no_value(client, kv, key, f"a limit marker with {MARKER_REASON}: {reason} (ADR-8, ADR-48)")


@pytest.mark.rule("kv.marker-watch")
async def test_watch_maps_limit_markers_to_purge_and_delete(client, target, nc, bucket):
    """A watch yields MaxAge and Purge limit markers as PURGE entries and Remove ones as DEL, initial or later."""
    documented = "ADR-48: a watcher treats Nats-Marker-Reason MaxAge and Purge as PURGE, Remove as DEL"
    async with client_kv(client, target, bucket) as kv:
        revisions = await markers_in_place(nc, kv, bucket)
        async with watching(client, kv.watch(), "ADR-8 Watch") as watch:
            initial = await yielded(client, watch, f"{documented}; the end-of-initial-data signal after the markers")
            expected = [f"{k}@{revisions[k]}:{op}=b''" for k, op in (("p", "PURGE"), ("r", "DEL"), ("t", "PURGE"))]
            assert initial == [*expected, "<end of initial data>"], (
                f"{documented}; with markers Purge on p, Remove on r and MaxAge on t (its TTL expired) {who(client)}'s "
                f"watch yielded {initial}"
            )
            put = (await publish_raw(nc, f"$KV.{bucket}.u", b"w", {NATS_TTL: "1s"}))["seq"]
            marker = await expired(nc, bucket, "u")
            later = await later_changes(client, watch, 2)
            assert later == [f"u@{put}:PUT=b'w'", f"u@{marker}:PURGE=b''"], (
                f"{documented}; while it watched, u was put with a 1 s TTL that expired (a MaxAge marker): "
                f"{who(client)}'s watch yielded {later}"
            )


# --- ADR-8: key filters, bucket management ---------------------------------------------------------------------


async def _keys_listed(client, target, bucket, documented: str, filters: list[str], put: tuple, *deleted: str) -> list:
    """What the client's keys(`filters`) lists, sorted, once the keys `put` were put and then `deleted` deleted."""
    async with client_kv(client, target, bucket) as kv:
        for key in put:
            await kv.put(key, b"v")
        for key in deleted:
            await kv.delete(key)
        keys = await within(kv.session, offered(client, documented, kv.keys(filters)), f"keys({filters})")
    return sorted(keys)


@pytest.mark.rule("kv.keys-filter")
async def test_keys_with_a_filter_lists_only_matching_live_keys(client, target, bucket):
    """keys(['x.*']) lists the live keys one token under x. and nothing else."""
    documented = "ADR-8: keys with a key filter lists the live keys matching it, as a watch of it would"
    keys = await _keys_listed(client, target, bucket, documented, ["x.*"], ("x.1", "x.2", "x.a.b", "y.1", "x3"), "x.2")
    assert keys == ["x.1"], (
        f"{documented}; with keys x.1, x.2 (deleted), x.a.b, y.1 and x3, {who(client)} keys(['x.*']) listed {keys}"
    )


@pytest.mark.rule("kv.keys-filters")
async def test_keys_with_several_filters_lists_keys_matching_any(client, target, bucket):
    """keys(['a', 'c.d']) lists keys a and c.d, not ab, c.e or b."""
    documented = "ADR-8: keys with several filter subjects lists the live keys matching any of them"
    keys = await _keys_listed(client, target, bucket, documented, ["a", "c.d"], ("a", "ab", "c.d", "c.e", "b"))
    assert keys == ["a", "c.d"], (
        f"{documented}; with keys a, ab, c.d, c.e and b, {who(client)} keys(['a', 'c.d']) listed {keys}"
    )


@pytest.mark.rule("kv.bucket-delete")
async def test_deleting_a_bucket_removes_its_stream(client, target, nc, bucket):
    """The client's delete of a bucket leaves no stream KV_<b>."""
    documented = "ADR-8 Deleting a bucket: 'Remove the stream entirely'"
    async with connected(client, target.url, target.credentials) as session:
        kv = await session.kv_create(bucket)
        await kv.put("k", b"v")
        await offered(client, documented, session.kv_delete_bucket(bucket))
    try:
        info = await api(nc, f"$JS.API.STREAM.INFO.KV_{bucket}")
    except ApiError as gone:
        assert gone.err_code == 10059, f"{documented}; stream info of KV_{bucket} after the delete: {gone}"
        return
    state = info.get("state", {})
    pytest.fail(f"{documented}; after {who(client)} deleted the bucket, its stream KV_{bucket} is still there: {state}")


@pytest.mark.rule("kv.bucket-names")
async def test_bucket_names_lists_buckets_by_name_only(client, target, nc, names, bucket):
    """The client's bucket lister names both buckets just made, by their names, and no plain stream."""
    documented = "ADR-8 KV Management: the bucket lister names every bucket (no KV_ prefix) and nothing else"
    plain = names.stream()
    await create_stream(nc, plain, [f"{names.subject()}.>"])
    second = names.bucket()
    async with connected(client, target.url, target.credentials) as session:
        for each in (bucket, second):
            await session.kv_create(each)
        listed = await offered(client, documented, session.kv_bucket_names())
    mine = sorted(n for n in listed if n.removeprefix("KV_") in (bucket, second, plain))
    assert mine == sorted([bucket, second]) and not any(n.startswith("KV_") for n in listed), (
        f"{documented}; with buckets {bucket}, {second} and the plain stream {plain}, {who(client)} listed {mine} "
        f"of them ({len(listed)} in all, {sum(n.startswith('KV_') for n in listed)} with the KV_ prefix)"
    )
