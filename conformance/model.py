"""A pure-Python reference model of a stream's documented publish, dedup, limit, purge and delete rules.

Documented rules only: ADR-10 for purge; Nats-Msg-Id dedup as the JetStream docs give it; max_msgs,
max_msgs_per_subject, discard old/new and discard_new_per_subject as the stream configuration docs give them. The
duplicate window is taken as longer than any program, so an id once stored stays known, also across purges, deletes
and limit removals. Left out, because the documents do not say what happens: purge `seq` beyond last sequence + 1,
deleting a sequence beyond the last, and max_bytes (its accounting of per-message overhead is the store's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEQ_AND_KEEP = 10003  # JSBadRequestErr: "seq" and "keep" are mutually exclusive in a purge request
WRONG_STREAM = 10060  # JSStreamNotMatchErr: Nats-Expected-Stream names another stream
WRONG_LAST_MSG_ID = 10070  # JSStreamWrongLastMsgIDErrF
WRONG_LAST_SEQUENCE = 10071  # JSStreamWrongLastSequenceErrF, for the stream's and for a subject's last sequence
ROLLUP_REFUSED = 10111  # JSStreamRollupFailedF: a rollup on a stream without allow_rollup_hdrs, or with deny_purge

# The JetStream headers a publish may carry (JetStream docs, Headers; ADR-10 for Nats-Rollup), case as documented.
MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
ROLLUP = "Nats-Rollup"
LIMIT_EXCEEDED = 10077  # JSStreamStoreFailedF, 503; the errors table gives its words as `{err}`, nats-server says:
MAX_MSGS_EXCEEDED = "maximum messages exceeded"
MAX_PER_SUBJECT_EXCEEDED = "maximum messages per subject exceeded"


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
class Rejected:
    err_code: int
    # shown, never compared: no document fixes a 10077's words (conformance/documented_errors.py)
    description: str = field(default="", compare=False)


@dataclass(frozen=True)
class OneOf:
    """The documents leave the answer open between these: e.g. which of two failed expectations a publish is refused
    for, or whether a duplicate is acknowledged before a failed expectation is noticed. None of them stores."""

    answers: frozenset

    def __str__(self) -> str:
        return " or ".join(sorted(map(str, self.answers)))


def allows(expected: object, got: object) -> bool:
    """Whether `got` is the answer the model gives (one of them, where the documents leave it open)."""
    return got in expected.answers if isinstance(expected, OneOf) else got == expected


@dataclass(frozen=True)
class Limits:
    max_msgs: int = -1
    max_msgs_per_subject: int = -1
    discard: str = "old"  # old | new
    discard_new_per_subject: bool = False

    def config(self) -> dict:
        """The stream configuration fields these limits set."""
        fields = {"max_msgs": self.max_msgs, "max_msgs_per_subject": self.max_msgs_per_subject, "discard": self.discard}
        if self.discard_new_per_subject:
            fields["discard_new_per_subject"] = True
        return fields


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
    limits: Limits = field(default_factory=Limits)
    messages: dict[int, Message] = field(default_factory=dict)
    last_seq: int = 0
    first_seq: int = 0
    ids: dict[str, int] = field(default_factory=dict)
    name: str = ""  # what Nats-Expected-Stream must name
    allow_rollup: bool = False
    # the Nats-Msg-Id ("" for none) of the last message stored, while it is still the stream's last message: the
    # documents say what Nats-Expected-Last-Msg-Id compares with only then (None: left open)
    last_msg_id: str | None = ""

    def _count(self, subject: str) -> int:
        return sum(1 for m in self.messages.values() if m.subject == subject)

    def _rejection(self, subject: str) -> Rejected | None:
        """Discard new refuses a message that would exceed a limit; a subject at its own limit replaces its
        oldest message instead, unless discard_new_per_subject asks for a refusal."""
        limits = self.limits
        if limits.discard != "new":
            return None
        subject_full = 0 < limits.max_msgs_per_subject <= self._count(subject)
        if subject_full and limits.discard_new_per_subject:
            return Rejected(LIMIT_EXCEEDED, MAX_PER_SUBJECT_EXCEEDED)
        if 0 < limits.max_msgs <= len(self.messages) and not subject_full:
            return Rejected(LIMIT_EXCEEDED, MAX_MSGS_EXCEEDED)
        return None

    def _enforce_limits(self, subject: str) -> None:
        """Remove the oldest messages beyond the per-subject and (discard old) the stream's message limit."""
        if self.limits.max_msgs_per_subject > 0:
            same = [m.seq for m in self.messages.values() if m.subject == subject]
            for seq in same[: max(0, len(same) - self.limits.max_msgs_per_subject)]:
                del self.messages[seq]
        if self.limits.max_msgs > 0:
            for seq in list(self.messages)[: max(0, len(self.messages) - self.limits.max_msgs)]:
                del self.messages[seq]

    def _settle_first(self) -> None:
        # An emptied stream, even one that never held a message, starts again after its last sequence.
        self.first_seq = min(self.messages) if self.messages else self.last_seq + 1

    def last_on(self, subject: str) -> int:
        """The sequence of the subject's last stored message (0: none)."""
        return max((m.seq for m in self.messages.values() if m.subject == subject), default=0)

    def _failed_expectations(self, subject: str, headers: dict[str, str]) -> set[int]:
        """The codes of the Expected-* headers (and a rollup) that refuse this publish; which one the server names
        when several fail is not documented."""
        failed = set()
        if EXPECTED_STREAM in headers and headers[EXPECTED_STREAM] != self.name:
            failed.add(WRONG_STREAM)
        if EXPECTED_LAST_SEQUENCE in headers and headers[EXPECTED_LAST_SEQUENCE] != str(self.last_seq):
            failed.add(WRONG_LAST_SEQUENCE)
        if EXPECTED_LAST_SUBJECT_SEQUENCE in headers and headers[EXPECTED_LAST_SUBJECT_SEQUENCE] != str(
            self.last_on(subject)
        ):
            failed.add(WRONG_LAST_SEQUENCE)
        if EXPECTED_LAST_MSG_ID in headers and headers[EXPECTED_LAST_MSG_ID] != self.last_msg_id:
            failed.add(WRONG_LAST_MSG_ID)
        if ROLLUP in headers and not self.allow_rollup:
            failed.add(ROLLUP_REFUSED)
        return failed

    def publish(
        self, subject: str, payload: bytes, msg_id: str | None = None, headers: dict[str, str] | None = None
    ) -> PubAck | Rejected | OneOf:
        """A publish with `msg_id` and any other `headers`: a header the JetStream docs do not name (whatever it
        looks like) changes nothing."""
        failed = self._failed_expectations(subject, headers or {})
        duplicate = msg_id is not None and msg_id in self.ids
        if failed or duplicate:
            answers = {Rejected(code) for code in failed} | ({PubAck(self.ids[msg_id], True)} if duplicate else set())
            return answers.pop() if len(answers) == 1 else OneOf(frozenset(answers))
        rejected = self._rejection(subject)
        if rejected is not None:
            return rejected
        self.last_seq += 1
        self.messages[self.last_seq] = Message(self.last_seq, subject, payload, msg_id)
        if msg_id is not None:
            self.ids[msg_id] = self.last_seq
        self.last_msg_id = msg_id or ""
        self._roll_up((headers or {}).get(ROLLUP), subject)
        self._enforce_limits(subject)
        self._settle_first()
        return PubAck(seq=self.last_seq, duplicate=False)

    def _roll_up(self, rollup: str | None, subject: str) -> None:
        """ADR-10's rollup: `sub` leaves the new message the subject's only one, `all` the stream's."""
        if rollup is None:
            return
        for seq in [
            s for s, m in self.messages.items() if s != self.last_seq and (rollup == "all" or m.subject == subject)
        ]:
            del self.messages[seq]

    def _removed(self, seqs: list[int]) -> None:
        for seq in seqs:
            del self.messages[seq]
        if self.last_seq not in self.messages:
            self.last_msg_id = None
        self._settle_first()

    def purge(self, filter: str | None = None, seq: int | None = None, keep: int | None = None) -> PurgeResult:
        if seq is not None and keep is not None:
            return PurgeResult(err_code=SEQ_AND_KEEP)
        candidates = [m.seq for m in self.messages.values() if filter is None or subject_matches(filter, m.subject)]
        if seq is not None:
            candidates = [s for s in candidates if s < seq]
        if keep is not None:
            candidates = candidates[: max(0, len(candidates) - keep)]
        self._removed(candidates)
        return PurgeResult(purged=len(candidates))

    def delete(self, seq: int) -> bool:
        """Delete one message (erased or not, the stream looks the same); False when the stream does not hold it.

        The error code of a refused delete is not documented: servers answer 400/10043 'sequence N not found'
        or 500/10057 'stream store EOF' depending on where the sequence lies."""
        if seq not in self.messages:
            return False
        self._removed([seq])
        return True

    def state(self) -> StreamState:
        subjects: dict[str, int] = {}
        for message in self.messages.values():
            subjects[message.subject] = subjects.get(message.subject, 0) + 1
        return StreamState(len(self.messages), self.first_seq, self.last_seq, subjects)
