"""Property-based, differential: a mirror holds what its origin holds, and a source what its filter (and transform)
selects, whatever headers the origin's messages carry (programs: conformance/header_programs.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcheck.conformance.header_programs import SUBJECTS, Delete, OriginLedger, Publish, Purge, programs
from jetcheck.conformance.hypothesis_profiles import shrinking_only_when_thorough
from jetcheck.conformance.jsapi import (
    ApiError,
    SubjectMessage,
    api,
    create_stream,
    eventually,
    publish_raw,
    purge,
    stream_state,
    subject_messages,
)
from jetcheck.conformance.model import subject_matches
from jetcheck.conformance.silence import answering

from .test_limits_model import PROPERTY_TIMEOUT_S

ADR59 = "ADR-59"
DOCUMENTED = f"{ADR59}: a mirror holds what its origin holds, a source what its filter selects, headers and all"
CATCH_UP_S = 5.0
SOURCE_HEADER = "Nats-Stream-Source"  # what a source adds to each message (sourcing.source-header)
# The expectation headers a publish carried are checks the origin made before it stored the message. nats-server
# leaves them out of a mirror's and a source's copies (2.10.25, 2.12.8, 2.15.1: they hold every other header); ADR-59
# says nothing of it either way, so they are not compared and what the copies did is observed.
EXPECTED = "Nats-Expected-"
MAX_OPS = 10
# Each example creates four streams and reads them all: a fifth of the profile's examples keeps the fast profile to a
# few seconds.
EXAMPLES_SHARE = 5


@dataclass(frozen=True)
class Transform:
    """A source's subject transform from the origin's `<root>.src` to `<copy>.dest` (one tail kept by `>`, or one
    token moved by wildcard(1)); `subject` maps an origin subject's tail as the transform does."""

    src: str
    dest: str
    subject: Callable[[str], str]

    def config(self, root: str, copy: str) -> dict:
        return {"src": f"{root}.{self.src}", "dest": f"{copy}.{self.dest}"}

    def __str__(self) -> str:
        return f"{self.src} -> {self.dest}"


TRANSFORMS = (
    Transform(">", ">", lambda tail: tail),
    Transform("c.>", "t.>", lambda tail: "t." + tail.removeprefix("c.")),
    Transform("c.*", "{{wildcard(1)}}.moved", lambda tail: tail.split(".")[1] + ".moved"),
)
FILTERS = ("a", "c.*", "c.>", ">")


@dataclass(frozen=True)
class Shown:
    """A stored message as the oracle compares it: subject (relative to its stream's root), payload, headers; the
    sequence and time where the rule fixes them (a mirror's)."""

    subject: str
    payload: bytes
    headers: tuple[tuple[str, str], ...]
    seq: int = 0
    time: str = ""

    def __str__(self) -> str:
        at = f"{self.seq}@{self.time} " if self.seq else ""
        return f"{at}{self.subject} {self.payload!r} {dict(self.headers)}"


def _shown(message: SubjectMessage, root: str, sequenced: bool, leave_out: tuple[str, ...] = ()) -> Shown:
    """The message as compared; headers named in `leave_out`, and the expectation headers, left out."""
    headers = tuple(
        sorted((k, v) for k, v in message.headers.items() if k not in leave_out and not k.startswith(EXPECTED))
    )
    subject = message.subject[len(root) + 1 :]
    if sequenced:
        return Shown(subject, message.payload, headers, message.seq, message.time)
    return Shown(subject, message.payload, headers)


async def _run_program(nc, names, program, source_filter: str, transform: Transform, log: list[str], seen: set) -> None:
    origin, root = names.stream("O"), names.subject("o")
    created = [origin]
    settled = await create_stream(nc, origin, [f"{root}.>"], allow_rollup_hdrs=True, allow_msg_ttl=True)
    log.append(f"origin {origin} on {root}.> (allow_msg_ttl {bool(settled.get('allow_msg_ttl'))})")
    try:
        ledger = OriginLedger(origin)
        for op in program:
            log.append(f"{op} -> {await _apply(nc, origin, root, ledger, op)}")
        for subject in SUBJECTS:  # the last message of every subject a plain one: each copy has an end to reach
            log.append(f"sentinel {subject} -> {await _apply(nc, origin, root, ledger, Publish(subject, b'end'))}")
        copy = names.subject("t")
        mirror, filtered, transformed = names.stream("M"), names.stream("F"), names.stream("T")
        copies = {
            mirror: {"mirror": {"name": origin}},
            filtered: {"sources": [{"name": origin, "filter_subject": f"{root}.{source_filter}"}]},
            transformed: {"sources": [{"name": origin, "subject_transforms": [transform.config(root, copy)]}]},
        }
        for name, config in copies.items():
            try:
                await create_stream(nc, name, [], **config)
            except ApiError as refused:
                raise AssertionError(f"{DOCUMENTED}; the server refused the copy {config}: {refused}") from None
            created.append(name)
        log.append(f"mirror {mirror}; source {filtered} filter {source_filter}; source {transformed} transform "
                   f"{transform}")  # fmt: skip
        await _compare(nc, origin, root, copy, (mirror, filtered, transformed), source_filter, transform, seen)
    finally:
        for name in created:
            await api(nc, f"$JS.API.STREAM.DELETE.{name}")


async def _apply(nc, origin: str, root: str, ledger: OriginLedger, op) -> str:
    """Send one operation to the origin; what it answered, in words."""
    if isinstance(op, Publish):
        headers = ledger.resolve(op)
        ack = await publish_raw(nc, f"{root}.{op.subject}", op.payload, headers or None)
        if "error" in ack:
            return f"refused {ack['error'].get('err_code')} ({headers})"
        if not ack.get("duplicate"):
            ledger.stored(op.subject, headers, ack["seq"])
        return f"seq {ack['seq']}{' duplicate' if ack.get('duplicate') else ''} ({headers})"
    try:
        if isinstance(op, Delete):
            if not ledger.acked:
                return "nothing acknowledged yet"
            seq = ledger.acked[op.nth % len(ledger.acked)]
            await api(nc, f"$JS.API.STREAM.MSG.DELETE.{origin}", {"seq": seq})
            return f"deleted {seq}"
        assert isinstance(op, Purge)
        return f"purged {(await purge(nc, origin, **op.request(root)))['purged']}"
    except ApiError as error:
        return f"refused {error}"


async def _caught_up(nc, name: str, reached: Callable[[object], bool]) -> bool:
    async def caught_up() -> bool:
        return reached(await stream_state(nc, name))

    if await eventually(caught_up, CATCH_UP_S):
        return True
    await answering(nc)  # a silent server is no answer: the comparison below judges what the copy holds
    return False


async def _compare(nc, origin, root, copy, copies, source_filter: str, transform: Transform, seen: set) -> None:
    mirror, filtered, transformed = copies
    origin_state = await stream_state(nc, origin)
    held = await subject_messages(nc, origin, ">")
    selected = [m for m in held if subject_matches(source_filter, m.subject[len(root) + 1 :])]
    moved = [m for m in held if subject_matches(transform.src, m.subject[len(root) + 1 :])]
    mirror_ready = await _caught_up(nc, mirror, lambda s: s.last_seq >= origin_state.last_seq)
    await _caught_up(nc, filtered, lambda s: s.messages >= len(selected))
    await _caught_up(nc, transformed, lambda s: s.messages >= len(moved))

    differences = []
    want = [_shown(m, root, sequenced=True) for m in held]
    mirrored = await subject_messages(nc, mirror, ">")
    got = [_shown(m, root, sequenced=True) for m in mirrored]
    seen.update(_expectations_kept(held, mirrored))
    if got != want:
        differences.append(_differ("the mirror's messages (seq@time subject payload headers)", want, got))
    mirror_state = await stream_state(nc, mirror)
    state = (origin_state.messages, origin_state.first_seq if origin_state.messages else None, origin_state.subjects)
    mine = (mirror_state.messages, mirror_state.first_seq if mirror_state.messages else None, mirror_state.subjects)
    if mine != state:
        differences.append(f"mirror info (messages, first_seq, subjects): the origin's {state}, the mirror's {mine}")
    if not mirror_ready:
        differences.append(f"the mirror's last_seq never reached the origin's {origin_state.last_seq}")

    want = [_shown(m, root, sequenced=False) for m in selected]
    got = [_shown(m, root, False, (SOURCE_HEADER,)) for m in await subject_messages(nc, filtered, ">")]
    if got != want:
        differences.append(_differ(f"the source filtered on {source_filter}", want, got))
    want = [
        Shown(transform.subject(s.subject), s.payload, s.headers)
        for s in (_shown(m, root, sequenced=False) for m in moved)
    ]
    got = [_shown(m, copy, False, (SOURCE_HEADER,)) for m in await subject_messages(nc, transformed, ">")]
    if got != want:
        differences.append(_differ(f"the source transformed {transform} (subjects under the copy's root)", want, got))
    for name, count in ((filtered, len(selected)), (transformed, len(moved))):
        if (held_count := (await stream_state(nc, name)).messages) != count:
            differences.append(f"source {name}'s info: messages {held_count}, the origin's selected {count}")
    assert not differences, f"{DOCUMENTED}:\n" + "\n".join(differences)


def _expectations_kept(held: list[SubjectMessage], mirrored: list[SubjectMessage]) -> set[str]:
    """Whether the mirror's copies of the origin's messages with expectation headers kept them ("kept", "dropped")."""
    copies = {m.seq: m for m in mirrored}
    expected = [(m, copies.get(m.seq)) for m in held if any(k.startswith(EXPECTED) for k in m.headers)]
    return {"kept" if any(k.startswith(EXPECTED) for k in c.headers) else "dropped" for m, c in expected if c}


def _differ(what: str, want: list[Shown], got: list[Shown]) -> str:
    lines = [f"{what}: the origin's say {len(want)}, it holds {len(got)}"]
    for i in range(max(len(want), len(got))):
        a, b = (want[i] if i < len(want) else None), (got[i] if i < len(got) else None)
        if a != b:
            lines.append(f"    #{i + 1}: wanted {a or 'nothing'}; holds {b or 'nothing'}")
    return "\n".join(lines)


@pytest.mark.rule("sourcing.oracle-headers")
@pytest.mark.timeout(PROPERTY_TIMEOUT_S)
def test_mirrors_and_sources_hold_what_their_origin_stored_whatever_its_headers(
    target, names, hypothesis_settings, observe
):
    """After publishes with JetStream's own headers (and look-alikes), deletes and purges on an origin, its mirror
    holds its messages, and its sources the ones their filter or transform selects, headers and all."""
    examples = max(1, hypothesis_settings.max_examples // EXAMPLES_SHARE)
    tried = 0
    seen: set[str] = set()
    with asyncio.Runner() as runner:
        nc = runner.run(target.connect())
        try:

            @settings(shrinking_only_when_thorough(hypothesis_settings), max_examples=examples)
            @given(programs(MAX_OPS), st.sampled_from(FILTERS), st.sampled_from(TRANSFORMS))
            def copies_hold_what_the_origin_stored(program, source_filter, transform):
                nonlocal tried
                tried += 1
                log: list[str] = []
                try:
                    runner.run(_run_program(nc, names, program, source_filter, transform, log, seen))
                except AssertionError as failure:
                    steps = "\n".join(f"  {line}" for line in log)
                    raise AssertionError(f"program:\n{steps}\n{failure.args[0]}") from None

            copies_hold_what_the_origin_stored()
        finally:
            runner.run(nc.close())
            observe("measured_examples", tried)
            observe("mirror_copies_of_expectation_headers", sorted(seen))
