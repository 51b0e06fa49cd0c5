"""Programs for the sourcing oracle: publishes to an origin stream carrying random mixes of JetStream's own headers
(and headers that only look like them), deletes and purges; Hypothesis strategies, their resolution against what
the origin answered, and their printed form.

An expectation header's value is drawn as `right` or `wrong` and resolved when the publish is sent, from the origin's
answers so far (its stream name, last sequence, a subject's last sequence, the last message id), so that a program
holds publishes the origin stores and publishes it refuses. The oracle never predicts which: whatever the origin
stored is what its mirror must hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

SUBJECTS = ("a", "b", "c.x", "c.y")
MSG_IDS = ("m1", "m2", "m3")
RIGHT, WRONG = "right", "wrong"
EXPECTATIONS = (
    "Nats-Expected-Stream",
    "Nats-Expected-Last-Sequence",
    "Nats-Expected-Last-Subject-Sequence",
    "Nats-Expected-Last-Msg-Id",
)
# Headers whose values are taken as drawn: JetStream's own (TTL, rollup, dedup id) and ones that only look like them
# (another case, an X- prefix, a JetStream header's words as a value).
LITERAL_HEADERS = {
    "Nats-Msg-Id": MSG_IDS,
    "Nats-TTL": ("1h", "never", "90s", "0"),
    "Nats-Rollup": ("sub", "all"),
    "nats-msg-id": MSG_IDS,
    "NATS-ROLLUP": ("all",),
    "nats-expected-stream": ("nowhere",),
    "X-Nats-Msg-Id": MSG_IDS,
    "X-Trace": ("Nats-Rollup: all", "Nats-Expected-Last-Sequence: 1", "sub", "1h"),
    "X-Order": ("1", "2", "3"),
}
HEADER_NAMES = (*EXPECTATIONS, *LITERAL_HEADERS)


@dataclass(frozen=True)
class Publish:
    subject: str
    payload: bytes
    headers: tuple[tuple[str, str], ...] = ()  # (name, value); an expectation's value is RIGHT or WRONG

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.headers)
        return f"publish({self.subject!r}, {self.payload!r}{', ' + shown if shown else ''})"


@dataclass(frozen=True)
class Delete:
    nth: int  # the nth message the origin acknowledged (modulo how many), whether or not it is still there

    def __str__(self) -> str:
        return f"delete(the {self.nth}th acknowledged message)"


@dataclass(frozen=True)
class Purge:
    filter: str | None = None
    keep: int | None = None

    def request(self, root: str) -> dict:
        body: dict = {}
        if self.filter is not None:
            body["filter"] = f"{root}.{self.filter}"
        if self.keep is not None:
            body["keep"] = self.keep
        return body

    def __str__(self) -> str:
        return f"purge(filter={self.filter!r}, keep={self.keep!r})"


Operation = Publish | Delete | Purge


@st.composite
def publishes(draw) -> Publish:
    names = draw(st.lists(st.sampled_from(HEADER_NAMES), max_size=4, unique=True))
    values = {name: (RIGHT, WRONG) if name in EXPECTATIONS else LITERAL_HEADERS[name] for name in names}
    headers = tuple((name, draw(st.sampled_from(values[name]))) for name in names)
    return Publish(draw(st.sampled_from(SUBJECTS)), draw(st.binary(max_size=4)), headers)


OPERATIONS = st.one_of(
    publishes(),
    publishes(),
    publishes(),
    st.builds(Delete, st.integers(0, 20)),
    st.builds(Purge, st.sampled_from((None, "a", "c.*", "c.>")), st.sampled_from((None, 1, 2))),
)


def programs(max_ops: int) -> st.SearchStrategy[list[Operation]]:
    return st.lists(OPERATIONS, min_size=1, max_size=max_ops)


@dataclass
class OriginLedger:
    """What the origin answered so far, to resolve expectation headers: its last sequence, each subject's last
    sequence and the last message id it stored (deletes and purges are not followed: a `right` value may then be
    wrong, which only changes whether the origin stores the message)."""

    stream: str
    last_seq: int = 0
    subject_seqs: dict[str, int] = field(default_factory=dict)
    last_msg_id: str = ""
    acked: list[int] = field(default_factory=list)

    def resolve(self, op: Publish) -> dict[str, str]:
        headers = {}
        for name, value in op.headers:
            if name in EXPECTATIONS:
                value = self._expected(name, op.subject, value == RIGHT)
            headers[name] = value
        return headers

    def _expected(self, name: str, subject: str, right: bool) -> str:
        if name == "Nats-Expected-Stream":
            return self.stream if right else f"{self.stream}-other"
        if name == "Nats-Expected-Last-Sequence":
            return str(self.last_seq if right else self.last_seq + 5)
        if name == "Nats-Expected-Last-Subject-Sequence":
            last = self.subject_seqs.get(subject, 0)
            return str(last if right else last + 7)
        return self.last_msg_id if right and self.last_msg_id else "m9"

    def stored(self, subject: str, headers: dict[str, str], seq: int) -> None:
        self.last_seq = max(self.last_seq, seq)
        self.subject_seqs[subject] = seq
        self.acked.append(seq)
        if "Nats-Msg-Id" in headers:
            self.last_msg_id = headers["Nats-Msg-Id"]
