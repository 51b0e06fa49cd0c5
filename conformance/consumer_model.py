"""A pure-Python reference model of a JetStream pull consumer over a `StreamModel`: what a pull delivers and what
consumer info reports, as far as the documents fix it.

Documented rules only:
- docs.nats.io Consumers (DeliverPolicy, AckPolicy, MaxDeliver, FilterSubject(s)); ADR-34 for filter_subjects; ADR-15
  for the ack reply subject (delivery count, stream and consumer sequence of each delivery); ADR-13 for pull requests
  (a no_wait request is answered at once with what is available, up to its batch).
- Consumer info as the JetStream API schema describes it: `delivered` is the last message delivered, `ack_floor` the
  highest contiguous acknowledged message, `num_ack_pending` the messages delivered and not yet acknowledged,
  `num_pending` the messages left unconsumed, `num_waiting` the pull requests waiting; `num_redelivered` as the
  catalog's consumers.info-redelivered reads it (pending messages delivered more than once).

Where the documents leave a value open, the model answers with every value they allow (`Allowed`), or None
(unspecified, not compared):
- The order of redeliveries among themselves and against new messages is not documented: any message awaiting
  redelivery, or the next new one, may come next (`candidates`). New messages come in stream order.
- `delivered.stream_seq` is the consumer's position: at least the highest stream sequence delivered (or, read as
  "the last delivered", the latest delivery's), and below the next message it will deliver; a server may move past
  messages the filter leaves out.
- `ack_floor.consumer_seq` is fixed (the deliveries below the first one still pending are all acknowledged);
  `ack_floor.stream_seq` only up to the stream sequences the consumer's filter skips.
- A message nak'ed at its max_deliver-th delivery is not redelivered ("exhausted"); whether it still counts as ack
  pending (and as redelivered) is not documented, and the ack floor is then left unspecified.
- deliver_policy last_per_subject: num_pending is either the messages still to deliver or the subjects whose last
  message is still to deliver (consumers.last-per-subject-pending); both are accepted.
- "last" and "last_per_subject" start from the stream at creation; the documents say "when first consuming", so a
  program must not publish between the create and the first pull (the two readings then agree).

Left out: ack timeouts (ack_wait is taken as longer than any program), nak delays, backoff, max_ack_pending (its
default 1000 is never reached), push consumers, purges and deletes under a consumer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import StreamModel, subject_matches

DELIVER_POLICIES = ("all", "last", "new", "by_start_sequence", "last_per_subject")
ACK_POLICIES = ("explicit", "all", "none")
ACK_WAIT_NS = 30 * 1_000_000_000  # longer than any program: nothing is redelivered by timeout

Allowed = frozenset[int] | None  # the values the documents allow; None: unspecified, not compared


def exactly(value: int) -> frozenset[int]:
    return frozenset((value,))


def between(low: int, high: int) -> frozenset[int]:
    return frozenset(range(low, max(low, high) + 1))


def shown(allowed: Allowed) -> str:
    if allowed is None:
        return "unspecified"
    values = sorted(allowed)
    if len(values) == 1:
        return str(values[0])
    if values == list(range(values[0], values[-1] + 1)) and len(values) > 2:
        return f"{values[0]}..{values[-1]}"
    return "{" + ", ".join(map(str, values)) + "}"


@dataclass(frozen=True)
class ConsumerConfig:
    deliver_policy: str = "all"
    ack_policy: str = "explicit"
    filters: tuple[str, ...] = ()  # relative to the stream's root; one is filter_subject, more filter_subjects
    max_deliver: int = -1
    opt_start_seq: int | None = None

    def config(self, root: str) -> dict:
        """The consumer configuration for a stream bound to `<root>.>`."""
        body: dict = {
            "deliver_policy": self.deliver_policy,
            "ack_policy": self.ack_policy,
            "ack_wait": ACK_WAIT_NS,
            "max_deliver": self.max_deliver,
        }
        if len(self.filters) == 1:
            body["filter_subject"] = f"{root}.{self.filters[0]}"
        elif self.filters:
            body["filter_subjects"] = [f"{root}.{f}" for f in self.filters]
        if self.opt_start_seq is not None:
            body["opt_start_seq"] = self.opt_start_seq
        return body


@dataclass(frozen=True)
class Delivery:
    """One delivered message as its ack reply subject describes it."""

    seq: int
    subject: str
    delivered: int  # delivery count of this message
    consumer_seq: int


@dataclass(frozen=True)
class ConsumerState:
    """Consumer info's counters, as the server reports them."""

    delivered_consumer_seq: int
    delivered_stream_seq: int
    ack_floor_consumer_seq: int
    ack_floor_stream_seq: int
    num_pending: int
    num_ack_pending: int
    num_redelivered: int
    num_waiting: int

    @classmethod
    def of(cls, info: dict) -> ConsumerState:
        delivered, floor = info.get("delivered", {}), info.get("ack_floor", {})
        return cls(
            delivered.get("consumer_seq", 0),
            delivered.get("stream_seq", 0),
            floor.get("consumer_seq", 0),
            floor.get("stream_seq", 0),
            info.get("num_pending", 0),
            info.get("num_ack_pending", 0),
            info.get("num_redelivered", 0),
            info.get("num_waiting", 0),
        )


@dataclass(frozen=True)
class Expected:
    """The consumer info counters the documents allow, field by field (ConsumerState's fields)."""

    delivered_consumer_seq: Allowed
    delivered_stream_seq: Allowed
    ack_floor_consumer_seq: Allowed
    ack_floor_stream_seq: Allowed
    num_pending: Allowed
    num_ack_pending: Allowed
    num_redelivered: Allowed
    num_waiting: Allowed

    def differences(self, state: ConsumerState) -> dict[str, str]:
        """Each field whose reported value the documents do not allow: 'rules give X, server has Y'."""
        found = {}
        for name in self.__dataclass_fields__:
            allowed, value = getattr(self, name), getattr(state, name)
            if allowed is not None and value not in allowed:
                found[name] = f"the rules give {shown(allowed)}, the server has {value}"
        return found

    def __str__(self) -> str:
        return ", ".join(f"{name}={shown(getattr(self, name))}" for name in self.__dataclass_fields__)


PENDING, REDELIVER, ACKED, EXHAUSTED = "pending", "awaiting redelivery", "acked", "exhausted"


@dataclass
class _Delivered:
    """A message the consumer delivered at least once."""

    subject: str
    first_consumer_seq: int
    deliveries: int
    state: str  # PENDING, REDELIVER (nak'ed), ACKED (acked or terminated), EXHAUSTED (nak'ed at max_deliver)


@dataclass
class ConsumerModel:
    stream: StreamModel
    config: ConsumerConfig = field(default_factory=ConsumerConfig)
    deliveries: int = 0  # every delivery, redeliveries included: the last consumer sequence
    tracked: dict[int, _Delivered] = field(default_factory=dict)
    latest: int = 0  # stream sequence of the latest delivery
    _next: int = 1  # new messages are delivered from this stream sequence on
    _initial: list[int] = field(default_factory=list)  # last_per_subject: the last message per subject at creation

    def __post_init__(self) -> None:
        stream, policy = self.stream, self.config.deliver_policy
        matching = [m.seq for m in stream.messages.values() if self.matches(m.subject)]
        if policy == "new":
            self._next = stream.last_seq + 1
        elif policy == "last":
            self._next = matching[-1] if matching else stream.last_seq + 1
        elif policy == "by_start_sequence":
            self._next = self.config.opt_start_seq or 1
        elif policy == "last_per_subject":
            last: dict[str, int] = {}
            for seq in matching:
                last[stream.messages[seq].subject] = seq
            self._initial = sorted(last.values())
            self._next = stream.last_seq + 1

    def matches(self, subject: str) -> bool:
        return not self.config.filters or any(subject_matches(f, subject) for f in self.config.filters)

    # --- what comes next -----------------------------------------------------------------------------------------

    def _new(self) -> list[int]:
        """The new messages still to deliver, in the order they will come."""
        later = [m.seq for m in self.stream.messages.values() if m.seq >= self._next and self.matches(m.subject)]
        return self._initial + later

    def _redeliverable(self) -> list[int]:
        return [seq for seq, d in self.tracked.items() if d.state == REDELIVER]

    def candidates(self) -> list[int]:
        """The stream sequences the next delivery may carry: any message awaiting redelivery, or the next new one."""
        new = self._new()
        return self._redeliverable() + new[:1]

    def available(self) -> int:
        """How many messages a pull can deliver now."""
        return len(self._redeliverable()) + len(self._new())

    def pull(self, batch: int) -> int:
        """How many messages a no_wait pull of `batch` delivers."""
        return min(batch, self.available())

    def deliver(self, seq: int) -> Delivery:
        """The delivery of `seq` (one of `candidates()`, else ValueError), as the rules describe it."""
        if seq not in self.candidates():
            raise ValueError(f"stream sequence {seq} is not among the candidates {self.candidates()}")
        self.deliveries += 1
        self.latest = seq
        if seq in self.tracked:
            message = self.tracked[seq]
            message.deliveries += 1
            message.state = PENDING
        else:
            if self._initial and self._initial[0] == seq:
                self._initial.pop(0)
            else:
                self._next = seq + 1
            acked = self.config.ack_policy == "none"
            subject = self.stream.messages[seq].subject
            message = _Delivered(subject, self.deliveries, 1, ACKED if acked else PENDING)
            self.tracked[seq] = message
        return Delivery(seq, message.subject, message.deliveries, self.deliveries)

    # --- acknowledgements (each on a message the consumer delivered) -----------------------------------------------

    def pending(self) -> list[int]:
        """Delivered messages that certainly await acknowledgement (nak'ed ones included, exhausted ones not)."""
        return [seq for seq, d in self.tracked.items() if d.state in (PENDING, REDELIVER)]

    def outstanding(self) -> list[int]:
        """Delivered messages awaiting acknowledgement that were not nak'ed since their latest delivery."""
        return [seq for seq, d in self.tracked.items() if d.state == PENDING]

    def exhausted(self) -> list[int]:
        """Messages nak'ed at their max_deliver-th delivery: never redelivered, pending or not."""
        return [seq for seq, d in self.tracked.items() if d.state == EXHAUSTED]

    def acked(self) -> list[int]:
        return [seq for seq, d in self.tracked.items() if d.state == ACKED]

    def ack(self, seq: int) -> None:
        """+ACK: explicit acknowledges `seq`; all acknowledges it and every delivered message before it."""
        policy = self.config.ack_policy
        if policy == "none" or self.tracked[seq].state not in (PENDING, REDELIVER):
            return
        for other, message in self.tracked.items():
            if (other == seq or (policy == "all" and other < seq)) and message.state in (PENDING, REDELIVER):
                message.state = ACKED

    def nak(self, seq: int) -> None:
        """-NAK (no delay): redeliver at once, unless the message was delivered max_deliver times."""
        message = self.tracked[seq]
        if message.state != PENDING:
            return
        exhausted = 0 < self.config.max_deliver <= message.deliveries
        message.state = EXHAUSTED if exhausted else REDELIVER

    def term(self, seq: int) -> None:
        """+TERM: never redelivered again, no longer pending."""
        if self.tracked[seq].state in (PENDING, REDELIVER):
            self.tracked[seq].state = ACKED

    def in_progress(self, seq: int) -> None:
        """+WPI only restarts the ack timer, which no program outlasts."""

    # --- consumer info ---------------------------------------------------------------------------------------------

    def _num_pending(self) -> frozenset[int]:
        new = self._new()
        if self.config.deliver_policy != "last_per_subject":
            return exactly(len(new))
        position = new[0] if new else self.stream.last_seq + 1
        last: dict[str, int] = {}
        for message in self.stream.messages.values():
            if self.matches(message.subject):
                last[message.subject] = message.seq
        return frozenset((len(new), sum(1 for seq in last.values() if seq >= position)))

    def expected(self) -> Expected:
        delivered = list(self.tracked)
        highest = max(delivered, default=0)
        new = self._new()
        # by_start_sequence may start beyond the last message: its position is then one below its start
        position_high = new[0] - 1 if new else max(self.stream.last_seq, self._next - 1)
        delivered_stream = between(highest, position_high) | ({self.latest} if self.latest else frozenset())
        exhausted = self.exhausted()
        pending = self.pending()
        redelivered = sum(1 for seq in pending if self.tracked[seq].deliveries > 1)
        if exhausted:
            floor_consumer: Allowed = None
            floor_stream: Allowed = None
        elif pending:
            first = min(pending)
            floor_consumer = exactly(self.tracked[first].first_consumer_seq - 1)
            floor_stream = between(max((s for s in delivered if s < first), default=0), first - 1)
        else:
            floor_consumer = exactly(self.deliveries)
            floor_stream = between(highest, position_high)
        maybe_redelivered = len(exhausted) if self.config.max_deliver > 1 else 0
        return Expected(
            delivered_consumer_seq=exactly(self.deliveries),
            delivered_stream_seq=delivered_stream,
            ack_floor_consumer_seq=floor_consumer,
            ack_floor_stream_seq=floor_stream,
            num_pending=self._num_pending(),
            num_ack_pending=between(len(pending), len(pending) + len(exhausted)),
            num_redelivered=between(redelivered, redelivered + maybe_redelivered),
            num_waiting=exactly(0),
        )
