"""Programs of stream operations for property-based checks: Hypothesis strategies and their printed form.

Subjects are tokens relative to the stream's root, so a program reads the same on every run.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from .model import (
    EXPECTED_LAST_MSG_ID,
    EXPECTED_LAST_SEQUENCE,
    EXPECTED_LAST_SUBJECT_SEQUENCE,
    EXPECTED_STREAM,
    MSG_ID,
    ROLLUP,
    Limits,
    StreamModel,
)

# A header value standing for the name of the stream the program runs on (known only when it runs).
THIS_STREAM = "{stream}"

SUBJECTS = ("a", "b", "c.x", "c.y")
FILTERS = ("a", "b", "c.x", "c.*", "c.>", "*", ">")
MSG_IDS = ("m1", "m2", "m3")
MAX_KEEP = 8


@dataclass(frozen=True)
class Publish:
    subject: str
    payload: bytes
    msg_id: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # other headers, in the order they are sent

    def header_map(self, stream: str = THIS_STREAM) -> dict[str, str]:
        """Every header of the publish, Nats-Msg-Id first; `stream` stands for THIS_STREAM in values."""
        sent = {MSG_ID: self.msg_id} if self.msg_id else {}
        return sent | {name: value.replace(THIS_STREAM, stream) for name, value in self.headers}

    def __str__(self) -> str:
        shown = f", msg_id={self.msg_id!r}" if self.msg_id else ""
        shown += f", headers={dict(self.headers)!r}" if self.headers else ""
        return f"publish({self.subject!r}, {self.payload!r}{shown})"


@dataclass(frozen=True)
class Purge:
    filter: str | None = None
    seq: int | None = None
    keep: int | None = None

    def request(self, root: str) -> dict:
        """The purge request body for a stream bound to `<root>.>`."""
        body: dict = {}
        if self.filter is not None:
            body["filter"] = f"{root}.{self.filter}"
        if self.seq is not None:
            body["seq"] = self.seq
        if self.keep is not None:
            body["keep"] = self.keep
        return body

    def __str__(self) -> str:
        args = ", ".join(
            f"{k}={v!r}" for k, v in (("filter", self.filter), ("seq", self.seq), ("keep", self.keep)) if v is not None
        )
        return f"purge({args})"


@dataclass(frozen=True)
class Delete:
    seq: int

    def __str__(self) -> str:
        return f"delete(seq={self.seq})"


Operation = Publish | Purge | Delete


def applied(model: StreamModel, op: Operation):
    """Carry `op` out on `model`; the model's answer (a delete's: whether the stream held the message)."""
    if isinstance(op, Publish):
        return model.publish(op.subject, op.payload, op.msg_id, op.header_map())
    if isinstance(op, Purge):
        return model.purge(op.filter, op.seq, op.keep)
    return model.delete(op.seq)


PURGE_VARIANTS = ("all", "filter", "seq", "keep", "filter+seq", "filter+keep", "seq+keep")


@st.composite
def programs(draw, max_ops: int = 20) -> list[Operation]:
    """Publishes and purges of every ADR-10 variant; `seq` stays within 1..last sequence + 1 as drawn."""
    model = StreamModel()
    program: list[Operation] = []
    for _ in range(draw(st.integers(min_value=1, max_value=max_ops))):
        if draw(st.integers(0, 9)) < 7:
            op: Operation = Publish(
                draw(st.sampled_from(SUBJECTS)), draw(st.binary(max_size=6)), draw(st.sampled_from((None, *MSG_IDS)))
            )
            model.publish(op.subject, op.payload, op.msg_id)
        else:
            variant = draw(st.sampled_from(PURGE_VARIANTS))
            op = Purge(
                filter=draw(st.sampled_from(FILTERS)) if "filter" in variant else None,
                seq=draw(st.integers(1, model.last_seq + 1)) if "seq" in variant else None,
                keep=draw(st.integers(1, MAX_KEEP)) if "keep" in variant else None,
            )
            model.purge(op.filter, op.seq, op.keep)
        program.append(op)
    return program


def render(program: list[Operation]) -> str:
    return "\n".join(f"  {i}. {op}" for i, op in enumerate(program, 1))


# Headers that look like JetStream's own and are not: a server reads none of them (nor a header's value) as one.
LOOKALIKES = (
    ("X-Nats-Msg-Id", "m1"),
    ("Nats-Msg-Id-Original", "m2"),
    ("X-Nats-Expected-Stream", "another-stream"),
    ("Nats-Expected-Last-Sequence-Hint", "999"),
    ("Nats-Expected-Last-Msg-Id-Was", "m3"),
    ("Nats-Rollup-Note", "all"),
    ("X-Note", "Nats-Msg-Id: m1"),
    ("X-Trace", "Nats-Expected-Last-Sequence: 999"),
)


@dataclass(frozen=True)
class Setup:
    """The stream a generated program runs on, beside its subjects (`<root>.>`) and storage."""

    allow_rollup: bool = False
    max_msgs_per_subject: int = -1

    def config(self) -> dict:
        return {"allow_rollup_hdrs": self.allow_rollup, "max_msgs_per_subject": self.max_msgs_per_subject}

    def model(self) -> StreamModel:
        return StreamModel(
            limits=Limits(max_msgs_per_subject=self.max_msgs_per_subject),
            name=THIS_STREAM,
            allow_rollup=self.allow_rollup,
        )


SETUPS = st.builds(Setup, allow_rollup=st.booleans(), max_msgs_per_subject=st.sampled_from((-1, -1, 2)))


def _expectations(draw, model: StreamModel, subject: str) -> list[tuple[str, str]]:
    """Expected-* headers, each drawn to hold or to fail by a little (a failing one names a near value)."""
    headers = []
    if draw(st.integers(0, 5)) == 0:
        headers.append((EXPECTED_STREAM, draw(st.sampled_from((THIS_STREAM, "another-stream")))))
    if draw(st.integers(0, 4)) == 0:
        headers.append((EXPECTED_LAST_SEQUENCE, str(model.last_seq + draw(st.sampled_from((0, 0, 1, -1))))))
    if draw(st.integers(0, 4)) == 0:
        last = model.last_on(subject)
        headers.append((EXPECTED_LAST_SUBJECT_SEQUENCE, str(max(0, last + draw(st.sampled_from((0, 0, 1, -1)))))))
    # while the documents leave the last Nats-Msg-Id open (the last message removed), no publish expects one
    if model.last_msg_id is not None and draw(st.integers(0, 5)) == 0:
        headers.append((EXPECTED_LAST_MSG_ID, draw(st.sampled_from((model.last_msg_id, *MSG_IDS)))))
    return headers


@st.composite
def header_programs(draw, setup: Setup, max_ops: int = 15) -> list[Operation]:
    """Publishes with any mix of documented headers (Nats-Msg-Id, the Expected-* family drawn to hold or fail,
    Nats-Rollup) and of headers that only look like them, deletes of stored sequences, and purges."""
    model = setup.model()
    program: list[Operation] = []
    for _ in range(draw(st.integers(min_value=1, max_value=max_ops))):
        kind = draw(st.integers(0, 9))
        if kind < 7:
            subject = draw(st.sampled_from(SUBJECTS))
            headers = _expectations(draw, model, subject)
            if draw(st.integers(0, 5)) == 0:
                headers.append((ROLLUP, draw(st.sampled_from(("sub", "all")))))
            headers += draw(st.lists(st.sampled_from(LOOKALIKES), max_size=2, unique_by=lambda h: h[0]))
            op: Operation = Publish(
                subject, draw(st.binary(max_size=6)), draw(st.sampled_from((None, None, *MSG_IDS))), tuple(headers)
            )
            model.publish(op.subject, op.payload, op.msg_id, op.header_map(THIS_STREAM))
        elif kind < 9 and model.messages:
            op = Delete(draw(st.sampled_from(sorted(model.messages))))
            model.delete(op.seq)
        else:
            op = Purge(filter=draw(st.sampled_from((None, *FILTERS))), keep=draw(st.sampled_from((None, 1, 2))))
            model.purge(op.filter, None, op.keep)
        program.append(op)
    return program
