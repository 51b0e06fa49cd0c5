"""What the Key-Value checks (test_kv.py) share: ADR-8's bucket stream built by hand, reading a client's watch,
the not-found reading of markers, and ADR-48's limit markers and TTLs put in place on a bucket."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import pytest

from jetcheck.conformance.checks.answers import who
from jetcheck.conformance.clients.base import (
    KV_DEL,
    KV_PURGE,
    ClientError,
    Indeterminate,
    KeyNotFound,
    KvEntry,
    Unsupported,
    Watch,
    connected,
)
from jetcheck.conformance.jsapi import NS, api, eventually, publish_raw, subject_messages
from jetcheck.conformance.plugin import na
from jetcheck.conformance.silence import answering
from jetcheck.conformance.watching import watched

T = TypeVar("T")


async def adr8_bucket(nc, bucket: str, history: int = 1) -> str:
    """The bucket stream exactly as ADR-8's Buckets section lists it; returns the stream name."""
    stream = f"KV_{bucket}"
    config = {
        "name": stream,
        "subjects": [f"$KV.{bucket}.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs_per_subject": history,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msg_size": -1,
        "storage": "file",
        "discard": "new",
        "num_replicas": 1,
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
    }
    await api(nc, f"$JS.API.STREAM.CREATE.{stream}", config)
    return stream


def show_entry(entry: KvEntry | None) -> str:
    if entry is None:
        return "<end of initial data>"
    return f"{entry.key}@{entry.revision}:{entry.operation}={entry.value!r}"


async def yielded(client, watch: Watch, documented: str, count: int | None = None, of: str = "") -> list[str]:
    """The watch's next updates as `show_entry` writes them: up to the end-of-initial-data signal, or `count` of them
    (conformance.watching.watched). A missing one fails the check with what the ADR says (`documented`) and whose
    watch it is (of what: `of`)."""
    return [
        show_entry(update)
        for update in await watched(watch, show_entry, count, f"{documented}; {who(client)}'s watch{of}")
    ]


async def later_changes(client, watch: Watch, count: int) -> list[str]:
    """The next `count` changes the client's watch yields after the end of initial data, shown."""
    return await yielded(client, watch, "ADR-8: each change after the end of initial data", count)


@contextlib.asynccontextmanager
async def watching(client, start: Awaitable[Watch], documented: str) -> AsyncIterator[Watch]:
    """The watch `start` makes, stopped afterwards; a client without the option the ADR lists fails the check."""
    try:
        watch = await start
    except Unsupported as missing:
        pytest.fail(f"{documented} is not implemented by {who(client)} ({missing})")
    try:
        yield watch
    finally:
        await watch.stop()


async def no_value(client, kv, key: str, after: str) -> None:
    """The key reads as not found, as ADR-8 says a basic get turns a delete or purge marker into key not found
    (nats.js documents returning the marker instead: its result says so, conformance.clients.deviations)."""
    try:
        entry = await kv.get(key)
    except KeyNotFound:
        return
    shown = "its marker" if entry.operation in (KV_DEL, KV_PURGE) and entry.value == b"" else "a value"
    raise AssertionError(
        f"after {after}, {who(client)} get({key!r}) returned {shown} ({entry}); ADR-8: a delete or purge marker is "
        "a key not found error in basic gets"
    )


# --- ADR-48: limit markers, per-key TTLs, TTL'd purges -------------------------------------------------------------

NATS_TTL = "Nats-TTL"
MARKER_REASON = "Nats-Marker-Reason"
MARKERS_KEPT_S = 60  # the suite's limit markers outlive every check that reads them
EXPIRY_WAIT_S = 15.0  # a 1 s Nats-TTL expires and leaves its marker well within this
GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def ttl_seconds(header: str | None) -> float | None:
    """A Nats-TTL header's seconds (ADR-43: whole seconds, or a Go duration such as 1h or 90s); None without one."""
    return None if header is None else duration_seconds(header.strip())


def duration_seconds(text: str) -> float | None:
    """Whole seconds or a Go duration (2s, 1m30s) in seconds, `text` taken as it is; None when it is neither."""
    if text.isdigit():
        return float(text)
    parts = GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * DURATION_UNITS[u] for n, u in parts)


async def offered(client, documented: str, call: Awaitable[T]) -> T:
    """What the client's `call` returned: na when the client does not have the feature at all (Unsupported), a
    failure when it refuses (`documented` says what the ADR asks)."""
    try:
        return await call
    except Unsupported as missing:
        na(f"{documented} is not offered by {who(client)} ({missing})")
    except Indeterminate:
        raise
    except ClientError as refused:
        pytest.fail(f"{documented}; {who(client)} refused: {refused}")


@contextlib.asynccontextmanager
async def offered_bucket(client, target, bucket: str, documented: str, **options):
    """The bucket created through the client with `options` (ADR-48's among them), on its own session."""
    async with connected(client, target.url, target.credentials) as session:
        yield await offered(client, documented, session.kv_create(bucket, **options))


async def enable_limit_markers(nc, bucket: str) -> None:
    """Limit markers on the bucket's stream, kept MARKERS_KEPT_S, set by the suite (ADR-48 allows enabling them on a
    bucket made without): the marker checks judge what the client makes of markers, not how it asks for them. The
    history is 1, so a 1 s Nats-TTL stays 1 s (with more, the server raises a TTL to the markers' own)."""
    config = (await api(nc, f"$JS.API.STREAM.INFO.KV_{bucket}"))["config"]
    config |= {"allow_msg_ttl": True, "subject_delete_marker_ttl": MARKERS_KEPT_S * NS, "max_msgs_per_subject": 1}
    await api(nc, f"$JS.API.STREAM.UPDATE.KV_{bucket}", config)


async def expired(nc, bucket: str, key: str) -> int:
    """The revision of the MaxAge marker the server leaves once the key's TTL expired (awaited)."""
    subject = f"$KV.{bucket}.{key}"
    found: list[int] = []

    async def marked() -> bool:
        stored = await subject_messages(nc, f"KV_{bucket}", subject)
        found[:] = [m.seq for m in stored if m.headers.get(MARKER_REASON) == "MaxAge"]
        return bool(found)

    if not await eventually(marked, EXPIRY_WAIT_S):
        await answering(nc)
        raise Indeterminate(
            "timeout", f"the server left no MaxAge marker on {subject} within {EXPIRY_WAIT_S:.0f} s of its 1 s TTL"
        )
    return found[-1]


async def markers_in_place(nc, kv, bucket: str) -> dict[str, int]:
    """Keys p, r and t of a history-1 bucket whose latest messages are limit markers: the server's own MaxAge marker
    on t (its 1 s Nats-TTL expired), and markers with reasons Purge on p and Remove on r (the other reasons ADR-48
    lists; the server writes only MaxAge ones today, so they are published as it would). Key -> marker revision."""
    await enable_limit_markers(nc, bucket)
    await kv.put("p", b"x")
    await kv.put("r", b"x")
    await publish_raw(nc, f"$KV.{bucket}.t", b"v", {NATS_TTL: "1s"})
    revisions = {
        "p": (await publish_raw(nc, f"$KV.{bucket}.p", b"", {MARKER_REASON: "Purge"}))["seq"],
        "r": (await publish_raw(nc, f"$KV.{bucket}.r", b"", {MARKER_REASON: "Remove"}))["seq"],
    }
    return revisions | {"t": await expired(nc, bucket, "t")}
