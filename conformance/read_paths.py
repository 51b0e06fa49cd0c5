"""Every way of reading a stream, read back in one shape, and where the ways disagree.

SQLancer's NoREC, for a stream: the naive reading (MSG.GET of each sequence from first to last, one at a time) is
the reference; every optimized path (DIRECT.GET by sequence, last or next by subject, batches, multi_last and
up_to, a consumer's deliveries, stream info's counts, a filtered consumer's num_pending) must tell the same story.
No model is needed: a path that disagrees with the stream's own messages is wrong, whatever the program was.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from .jsapi import ApiError, api, create_consumer, pull
from .model import subject_matches
from .silence import answering

NO_MESSAGE = 10037  # MSG.GET of a sequence or subject with no message
DIRECT_TIMEOUT_S = 1.0
# a no_wait pull ends with a status once the pending messages are sent; a release that counts more pending than it
# delivers leaves the request open, and this bounds it
PULL_WAIT_S = 2.0
# what DIRECT.GET adds to a stored message's headers (ADR-31, Response Format), and the pull's own
DIRECT_ADDED = frozenset(
    {
        "Nats-Stream",
        "Nats-Sequence",
        "Nats-Subject",
        "Nats-Time-Stamp",
        "Nats-Num-Pending",
        "Nats-Last-Sequence",
        "Nats-UpTo-Sequence",
    }
)
NS = 1_000_000_000


def rfc3339_ns(text: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 time with up to nanosecond digits, as the server writes them."""
    whole, _, rest = text.partition(".")
    fraction, zone = rest, "Z"
    for i, char in enumerate(rest):
        if not char.isdigit():
            fraction, zone = rest[:i], rest[i:]
            break
    if not rest:
        whole, zone = (whole[:-1], "Z") if whole.endswith("Z") else (whole[:-6], whole[-6:])
    seconds = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return int(seconds) * NS + int((fraction or "0").ljust(9, "0")[:9])


def rfc3339_of_ns(ns: int) -> str:
    """An RFC 3339 UTC time with all nine digits of its nanoseconds."""
    whole = datetime.fromtimestamp(ns // NS, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{ns % NS:09d}Z"


def _header_lines(raw: bytes) -> tuple[tuple[str, str], ...]:
    """A stored message's headers from its wire block (`NATS/1.0` then `Name: value` lines), sorted."""
    lines = raw.decode().split("\r\n")[1:]
    return tuple(sorted((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines if ":" in line)))


def _user_headers(msg: Msg) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), v) for k, v in (msg.headers or {}).items() if k not in DIRECT_ADDED))


@dataclass(frozen=True)
class Record:
    """One stored message as any path shows it."""

    seq: int
    subject: str
    payload: bytes
    headers: tuple[tuple[str, str], ...]
    time_ns: int

    def __str__(self) -> str:
        return f"#{self.seq} {self.subject} {self.payload!r}{' ' + str(dict(self.headers)) if self.headers else ''}"


def shown(records: Iterable[Record | None]) -> str:
    return "[" + ", ".join("none" if r is None else str(r) for r in records) + "]"


def _from_direct(msg: Msg) -> Record:
    headers = msg.headers or {}
    return Record(
        int(headers["Nats-Sequence"]),
        headers["Nats-Subject"],
        msg.data,
        _user_headers(msg),
        rfc3339_ns(headers["Nats-Time-Stamp"]),
    )


def ack_time_ns(reply: str) -> int:
    """The stored time a delivery's ack subject carries (ADR-15: `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.
    <cseq>.<ts>.<pending>`, or the form with domain and account hash before the stream, and a token after)."""
    tokens = reply.split(".")
    return int(tokens[7] if len(tokens) == 9 else tokens[9])


@dataclass(frozen=True)
class Summary:
    """Stream info's state, with its subject counts."""

    messages: int
    first_seq: int
    last_seq: int
    num_deleted: int
    num_subjects: int
    subjects: tuple[tuple[str, int], ...]
    bytes: int


async def summary(nc: Client, stream: str) -> Summary:
    state = (await api(nc, f"$JS.API.STREAM.INFO.{stream}", {"subjects_filter": ">"}))["state"]
    return Summary(
        state["messages"],
        state["first_seq"],
        state["last_seq"],
        state.get("num_deleted", 0),
        state.get("num_subjects", 0),
        tuple(sorted((state.get("subjects") or {}).items())),
        state["bytes"],
    )


@dataclass
class Reads:
    """Reads of one stream, every path; `batches` where the server has ADR-31's batched forms (2.11)."""

    nc: Client
    stream: str
    batches: bool

    async def msg_get(self, request: dict[str, Any]) -> Record | None:
        try:
            message = (await api(self.nc, f"$JS.API.STREAM.MSG.GET.{self.stream}", request))["message"]
        except ApiError as error:
            if error.err_code == NO_MESSAGE:
                return None
            raise
        return Record(
            message["seq"],
            message["subject"],
            base64.b64decode(message.get("data") or b""),
            _header_lines(base64.b64decode(message.get("hdrs") or b"")),
            rfc3339_ns(message["time"]),
        )

    async def walk(self, first: int, last: int) -> list[Record]:
        """The reference: MSG.GET of every sequence from first to last, one at a time."""
        found = [await self.msg_get({"seq": seq}) for seq in range(max(first, 1), last + 1)]
        return [record for record in found if record is not None]

    async def direct(self, request: dict[str, Any]) -> tuple[list[Record], str | None]:
        """A DIRECT.GET's messages and the status that ended them (None: none came, or a single answer)."""
        single = "batch" not in request and "multi_last" not in request
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        try:
            await self.nc.publish(f"$JS.API.DIRECT.GET.{self.stream}", json.dumps(request).encode(), reply=inbox)
            records: list[Record] = []
            while True:
                try:
                    msg = await sub.next_msg(timeout=DIRECT_TIMEOUT_S)
                except nats.errors.TimeoutError:
                    await answering(self.nc)
                    return records, None
                status = (msg.headers or {}).get("Status")
                if status is not None:
                    return records, status
                records.append(_from_direct(msg))
                if single:
                    return records, None
        finally:
            await sub.unsubscribe()

    async def delivered(self, **config: Any) -> tuple[list[Record], int]:
        """What a new pull consumer of `config` (ack none) delivers, in order, and its num_pending when created."""
        # on a cluster, create_consumer waits until pull requests reach the consumer
        created = await create_consumer(
            self.nc, self.stream, **{"ack_policy": "none", "inactive_threshold": 30 * NS, **config}
        )
        name, pending = created["name"], created["num_pending"]
        try:
            request = {"batch": pending + 1, "no_wait": True}
            reply = await pull(self.nc, self.stream, name, request, wait=PULL_WAIT_S, messages=pending)
        finally:
            await api(self.nc, f"$JS.API.CONSUMER.DELETE.{self.stream}.{name}")
        return [
            Record(
                int(msg.metadata.sequence.stream),
                msg.subject,
                msg.data,
                _user_headers(msg),
                ack_time_ns(msg.reply),
            )
            for msg in reply.messages
        ], pending


def _last_per_subject(records: list[Record]) -> list[Record]:
    last: dict[str, Record] = {}
    for record in records:
        last[record.subject] = record
    return sorted(last.values(), key=lambda r: r.seq)


def _counts(records: list[Record]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.subject] = counts.get(record.subject, 0) + 1
    return tuple(sorted(counts.items()))


@dataclass
class Disagreements:
    """What the paths said that the stream's own messages (the walk) do not."""

    found: list[str]

    def check(self, path: str, reference: object, got: object) -> None:
        if got != reference:
            self.found.append(f"{path}: the stream holds {reference}, this path says {got}")


async def disagreements(
    reads: Reads, root: str, subjects: Iterable[str], filters: Iterable[str]
) -> tuple[list[Record], list[str]]:
    """Read the stream (bound to `<root>.>`) through every path, and list where a path disagrees with the walk (the
    stream's messages read one sequence at a time). `subjects` are the subjects programs publish to, `filters` those
    to count and consume by, both relative to `root`."""
    subjects = [f"{root}.{s}" for s in subjects]
    filters = [f"{root}.{f}" for f in filters]
    state = await summary(reads.nc, reads.stream)
    walk = await reads.walk(state.first_seq, state.last_seq)
    out = Disagreements([])
    seqs = [r.seq for r in walk]
    first = walk[0].seq if walk else state.first_seq  # an empty stream's first sequence is left open
    span = state.last_seq - first + 1 if walk else 0
    out.check(
        "STREAM.INFO state (messages, first_seq, num_deleted, num_subjects, subjects)",
        (len(walk), first, span - len(walk), len(_counts(walk)), _counts(walk)),
        (state.messages, state.first_seq, state.num_deleted, state.num_subjects, state.subjects),
    )
    for seq in range(max(state.first_seq, 1), state.last_seq + 1):
        got, _ = await reads.direct({"seq": seq})
        wanted = [r for r in walk if r.seq == seq]
        out.check(f"DIRECT.GET {{seq: {seq}}}", shown(wanted), shown(got))
    for subject in subjects:
        wanted_last = [r for r in walk if r.subject == subject][-1:]
        out.check(
            f"MSG.GET {{last_by_subj: {subject}}}",
            shown(wanted_last),
            shown([got] if (got := await reads.msg_get({"last_by_subj": subject})) else []),
        )
        out.check(
            f"DIRECT.GET {{last_by_subj: {subject}}}",
            shown(wanted_last),
            shown((await reads.direct({"last_by_subj": subject}))[0]),
        )
        for start in sorted({1, *seqs[len(seqs) // 2 : len(seqs) // 2 + 1]}):
            wanted_next = [r for r in walk if r.seq >= start and r.subject == subject][:1]
            request = {"seq": start, "next_by_subj": subject}
            out.check(f"DIRECT.GET {request}", shown(wanted_next), shown((await reads.direct(request))[0]))
    everything = f"{root}.>"
    if reads.batches and walk:
        request = {"seq": first, "batch": len(walk) + 1}
        out.check(f"DIRECT.GET {request}", shown(walk), shown((await reads.direct(request))[0]))
        out.check(
            f"DIRECT.GET {{multi_last: [{everything}]}}",
            shown(_last_per_subject(walk)),
            shown((await reads.direct({"multi_last": [everything]}))[0]),
        )
        middle = seqs[len(seqs) // 2]
        request = {"multi_last": [everything], "up_to_seq": middle}
        out.check(
            f"DIRECT.GET {request}",
            shown(_last_per_subject([r for r in walk if r.seq <= middle])),
            shown((await reads.direct(request))[0]),
        )
    for filter_ in filters:
        matching = [r for r in walk if subject_matches(filter_, r.subject)]
        records, pending = await reads.delivered(filter_subject=filter_)
        out.check(f"a consumer on {filter_}: num_pending", len(matching), pending)
        out.check(f"a consumer on {filter_}: deliveries", shown(matching), shown(records))
        counted = await api(reads.nc, f"$JS.API.STREAM.INFO.{reads.stream}", {"subjects_filter": filter_})
        out.check(
            f"STREAM.INFO {{subjects_filter: {filter_}}}: subjects",
            _counts(matching),
            tuple(sorted((counted["state"].get("subjects") or {}).items())),
        )
    return walk, out.found
