"""A pure-Python reference model of a stream's documented publish, dedup and purge rules.

Documented rules only (ADR-10 for purge; Nats-Msg-Id dedup as the JetStream docs give it). The duplicate window is
taken as longer than any program, so an id once stored stays known, also across purges (ids are not forgotten by a
purge while the server runs). Purge `seq` beyond last sequence + 1 is left out: ADR-10 does not say what it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEQ_AND_KEEP = 10003  # JSBadRequestErr: "seq" and "keep" are mutually exclusive in a purge request


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` matches one token, `>` one or more trailing tokens."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


@dataclass(frozen=True)
class Message:
    seq: int
    subject: str
    payload: bytes
    msg_id: str | None


@dataclass(frozen=True)
class PubAck:
    seq: int
    duplicate: bool


@dataclass(frozen=True)
class PurgeResult:
    purged: int = 0
    err_code: int = 0  # 0 when the purge was accepted


@dataclass(frozen=True)
class StreamState:
    messages: int
    first_seq: int
    last_seq: int
    subjects: dict[str, int]


@dataclass
class StreamModel:
    messages: dict[int, Message] = field(default_factory=dict)
    last_seq: int = 0
    first_seq: int = 0
    ids: dict[str, int] = field(default_factory=dict)

    def publish(self, subject: str, payload: bytes, msg_id: str | None = None) -> PubAck:
        if msg_id is not None and msg_id in self.ids:
            return PubAck(seq=self.ids[msg_id], duplicate=True)
        self.last_seq += 1
        self.messages[self.last_seq] = Message(self.last_seq, subject, payload, msg_id)
        if msg_id is not None:
            self.ids[msg_id] = self.last_seq
        if self.first_seq == 0:
            self.first_seq = self.last_seq
        return PubAck(seq=self.last_seq, duplicate=False)

    def purge(self, filter: str | None = None, seq: int | None = None, keep: int | None = None) -> PurgeResult:
        if seq is not None and keep is not None:
            return PurgeResult(err_code=SEQ_AND_KEEP)
        candidates = [m.seq for m in self.messages.values() if filter is None or subject_matches(filter, m.subject)]
        if seq is not None:
            candidates = [s for s in candidates if s < seq]
        if keep is not None:
            candidates = candidates[: max(0, len(candidates) - keep)]
        for s in candidates:
            del self.messages[s]
        # An emptied stream, even one that never held a message, starts again after its last sequence.
        self.first_seq = min(self.messages) if self.messages else self.last_seq + 1
        return PurgeResult(purged=len(candidates))

    def state(self) -> StreamState:
        subjects: dict[str, int] = {}
        for message in self.messages.values():
            subjects[message.subject] = subjects.get(message.subject, 0) + 1
        return StreamState(len(self.messages), self.first_seq, self.last_seq, subjects)
