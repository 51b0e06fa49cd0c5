"""Stream republish (ADR-28): stored messages published again, with their stream coordinates, to another subject."""

from __future__ import annotations

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.jsapi import eventually, publish_raw
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

ARRIVAL_S = 2.0
COORDINATES = ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Last-Sequence")


async def _republishing(nc, names, make_stream, **republish):
    """A stream on `<root>.>` republishing its `<root>.a.>` messages to `<dest>.>`, and the list that what reaches
    the dest is appended to: (stream, dest, received)."""
    root, dest = names.subject(), names.subject()
    received: list = []

    async def on_msg(msg) -> None:
        received.append(msg)

    await nc.subscribe(f"{dest}.>", cb=on_msg)
    stream = await make_stream(root=root, republish={"src": f"{root}.a.>", "dest": f"{dest}.>", **republish})
    return stream, dest, received


async def _arrived(nc, received: list, count: int) -> None:
    """Return once `count` republished messages came; fail when fewer come while the server answers."""

    async def enough() -> bool:
        return len(received) >= count

    if not await eventually(enough, timeout=ARRIVAL_S):
        await answering(nc)
        pytest.fail(f"ADR-28: each stored message that matches src is republished; {len(received)} of {count} came")


@pytest.mark.rule("republish.headers")
async def test_a_stored_message_is_republished_with_its_stream_coordinates(nc, names, make_stream):
    """Messages on `a.x` (src `a.>`) reach `<dest>.x` with body, own headers and Nats-* coordinates; `b`'s do not."""
    stream, dest, received = await _republishing(nc, names, make_stream)
    subject = stream.subject("a", "x")
    await publish_raw(nc, subject, b"one", {"X-App": "kept"})
    await publish_raw(nc, stream.subject("b"), b"not republished")
    await publish_raw(nc, subject, b"two")
    await _arrived(nc, received, 2)
    got = [(m.subject, {h: (m.headers or {}).get(h) for h in ("X-App", *COORDINATES)}, m.data) for m in received]
    coordinates = {"Nats-Stream": stream.name, "Nats-Subject": subject}
    wanted = [
        (f"{dest}.x", {"X-App": "kept", **coordinates, "Nats-Sequence": "1", "Nats-Last-Sequence": "0"}, b"one"),
        (f"{dest}.x", {"X-App": None, **coordinates, "Nats-Sequence": "3", "Nats-Last-Sequence": "1"}, b"two"),
    ]
    assert got == wanted, (
        "ADR-28: a matching stored message is republished to the transformed dest with its body, its own headers and "
        f"Nats-Stream, Nats-Subject, Nats-Sequence, Nats-Last-Sequence, and no other is; wanted {wanted}, got {got}"
    )


@pytest.mark.rule("republish.headers-only")
async def test_headers_only_republishes_no_body_and_its_size(nc, names, make_stream):
    """With headers_only, a 5-byte message is republished with an empty body and Nats-Msg-Size 5."""
    stream, _, received = await _republishing(nc, names, make_stream, headers_only=True)
    await publish_raw(nc, stream.subject("a", "x"), b"12345")
    await _arrived(nc, received, 1)
    got = (received[0].data, (received[0].headers or {}).get("Nats-Msg-Size"))
    assert got == (b"", "5"), (
        f"ADR-28: with headers_only the republished message has no body and Nats-Msg-Size, the body's size (5); "
        f"got body {got[0]!r}, Nats-Msg-Size {got[1]}"
    )


@pytest.mark.rule("republish.cycle-refused")
async def test_a_dest_the_stream_would_ingest_is_refused(nc, names):
    """A stream on `<root>.>` republishing to `<root>.copy.>` is refused with 500/10052."""
    name, root = names.stream(), names.subject()
    body = {"name": name, "subjects": [f"{root}.>"], "storage": "file",
            "republish": {"src": f"{root}.a.>", "dest": f"{root}.copy.>"}}  # fmt: skip
    rejection = await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, "a republish dest inside the stream")
    assert rejection[:2] == (500, 10052), (
        f"ADR-28: 'Destination MAY not match or subset the subject filter(s) of the stream', refused as an invalid "
        f"stream config (500/10052); got {rejection}"
    )
