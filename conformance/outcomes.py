"""What running a program shows, in a shape two streams (two storages, two replica counts, two servers) can share:
each step's answer, then the stream's state, messages and what its subject reads answer. Differential oracles and
`jetcheck diff` compare two of these; a difference is a finding whichever side is right."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .model import OneOf, PubAck, Rejected
from .programs import FILTERS, SUBJECTS, THIS_STREAM, Delete, Operation, Setup, applied
from .read_paths import Reads, Record, Summary, summary
from .replay import Answer, replay


@dataclass(frozen=True)
class Outcome:
    """Times aside (two streams store at different moments) and bytes aside (each store counts its own overhead)."""

    answers: tuple[Answer, ...]
    state: Summary
    messages: tuple[tuple, ...]
    reads: tuple[tuple[str, object], ...]  # MSG.GET last by subject, a consumer's num_pending per filter

    def differences(
        self, other: Outcome, program: list[Operation], sides: tuple[str, str], left_open: frozenset[int] = frozenset()
    ) -> list[str]:
        """Each observable on which this outcome and `other` differ, in words naming both `sides`; a step in
        `left_open` may differ among the answers the documents leave open there (none of which stores)."""
        found = [
            f"step {i}, {op}: {sides[0]} answered {a}, {sides[1]} answered {b}"
            for i, (op, a, b) in enumerate(zip(program, self.answers, other.answers, strict=True), 1)
            if a != b and not (i in left_open and not _stores(a) and not _stores(b))
        ]
        if self.state != other.state:
            found.append(f"stream state: {sides[0]} {self.state}, {sides[1]} {other.state}")
        if self.messages != other.messages:
            found.append(f"messages: {sides[0]} {self.messages}, {sides[1]} {other.messages}")
        found += [
            f"{what}: {sides[0]} {a}, {sides[1]} {b}"
            for (what, a), (_, b) in zip(self.reads, other.reads, strict=True)
            if a != b
        ]
        return found


def _shared(record: Record, stream: str, root: str) -> tuple:
    """A stored message as two streams can share it: its subject after the root, its stream's name in header values
    as the program wrote it."""
    headers = tuple((k, v.replace(stream, THIS_STREAM)) for k, v in record.headers)
    return (record.seq, record.subject[len(root) + 1 :], record.payload, headers)


def _stores(answer: Answer) -> bool:
    return isinstance(answer, PubAck) and not answer.duplicate


def left_open(setup: Setup, program: list[Operation]) -> frozenset[int]:
    """The steps whose answer the documents leave open (the model's OneOf: a duplicate meeting a failed
    expectation, two failed expectations), while the model follows the program."""
    model = setup.model()
    return frozenset(i for i, op in enumerate(program, 1) if isinstance(applied(model, op), OneOf))


def _documented(op: Operation, answer: Answer) -> Answer:
    """An answer as far as the documents fix it: a refused message delete's code is not (file storage answers
    500/10057 past the last sequence where memory answers 400/10043), only that it was refused."""
    return Rejected(0) if isinstance(op, Delete) and isinstance(answer, Rejected) else answer


async def outcome(nc, stream: str, root: str, program: list[Operation]) -> Outcome:
    """Run `program` on `stream` (bound to `<root>.>`) and read what it shows."""
    steps = await replay(nc, stream, root, program)
    state = steps[-1].after if steps else await summary(nc, stream)
    reads = Reads(nc, stream, False)
    walk = await reads.walk(state.first_seq, state.last_seq)
    last = [(f"MSG.GET last_by_subj {s}", getattr(await reads.msg_get({"last_by_subj": f"{root}.{s}"}), "seq", None))
            for s in SUBJECTS]  # fmt: skip
    pending = [(f"num_pending on {f}", (await reads.delivered(filter_subject=f"{root}.{f}"))[1]) for f in FILTERS]
    return Outcome(
        tuple(_documented(step.op, step.answer) for step in steps),
        replace(state, subjects=tuple((s[len(root) + 1 :], n) for s, n in state.subjects), bytes=0),
        tuple(_shared(r, stream, root) for r in walk),
        tuple(last + pending),
    )
