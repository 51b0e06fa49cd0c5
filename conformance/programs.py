"""Programs of stream operations for property-based checks: Hypothesis strategies and their printed form.

Subjects are tokens relative to the stream's root, so a program reads the same on every run.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from .model import StreamModel

SUBJECTS = ("a", "b", "c.x", "c.y")
FILTERS = ("a", "b", "c.x", "c.*", "c.>", "*", ">")
MSG_IDS = ("m1", "m2", "m3")
MAX_KEEP = 8


@dataclass(frozen=True)
class Publish:
    subject: str
    payload: bytes
    msg_id: str | None = None

    def __str__(self) -> str:
        shown = f", msg_id={self.msg_id!r}" if self.msg_id else ""
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


Operation = Publish | Purge

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
