"""The durability checker: from a run's recorded history, which `durability.*` rules held and which did not.

Pure: it reads records (durability.history) and returns findings; it starts, reads and writes nothing. The history is
what the publishers were told, what the durable consumer received, and what each node served in the final read
after every fault was healed (its `reference` node is the stream's leader at that time).

What counts:
- A write is *acked* when some attempt of it got a PubAck. An acked write must be in the stream, at the sequence
  its PubAck named (a duplicate ack of sequence 0, as 2.10.22-23 sometimes give, names none), and delivered to the
  durable consumer.
- A write none of whose attempts was acked but one timed out is *unknown*: present or absent are both fine, and it
  is never counted lost. Writes that only got errors are counted if found stored, but fail no rule.
- Within the duplicate window (the run is shorter than it) a message id is stored at most once; a write without an
  id is published once, so a second copy of it is a message nobody wrote.
- A write whose deletion the server acknowledged must be absent from every replica after healing. A write with any
  delete request (acknowledged, refused or timed out) is not judged lost, undelivered or a gap when absent.
- Likewise a purge of one publisher's writes below sequence N (filtered on the subject it alone writes to): its
  writes acknowledged under N of a purge the server acknowledged must be absent from every replica after healing;
  those under N of a purge acknowledged or timed out are not judged lost or undelivered when absent, and no
  sequence under N is judged a gap (the purged writes are spread among the others'). A refused purge purged
  nothing: its writes are judged as any other.
- A Raft group has at most one leader per term (Raft's election safety): two nodes that each said, in their own
  `/raftz` samples, that they lead the same group in the same term are a split-brain, whenever they said it. Two
  leaders of one group in different terms whose sample windows overlap are not: an old leader that has not yet heard
  of the new term still says it leads, and cannot commit; they are counted (`stale_overlaps`), not failed.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .history import DeleteRecord, DeliveryRecord, LeaderClaim, PublishRecord, PurgeRecord, StoredMessage

EXAMPLES = 5  # first examples kept per finding

ACKED_SURVIVE = "durability.acked-survive-crash"
ACKED_DELIVERED = "durability.acked-delivered"
DEDUP = "durability.dedup-within-window"
REPLICAS_AGREE = "durability.replicas-agree"
NO_PHANTOM = "durability.no-phantom-writes"
CONTIGUOUS = "durability.contiguous-sequences"
PUBLISHER_ORDER = "durability.publisher-order"
STREAM_AVAILABLE = "durability.stream-available-after-heal"
CONSUMER_SURVIVES = "durability.consumer-survives-crash"
SINGLE_LEADER = "durability.single-leader-per-term"
DELETED_STAYS = "durability.deleted-stays-deleted"
PURGED_STAYS = "durability.purged-stays-purged"
RULES = (
    ACKED_SURVIVE,
    ACKED_DELIVERED,
    DEDUP,
    REPLICAS_AGREE,
    NO_PHANTOM,
    CONTIGUOUS,
    PUBLISHER_ORDER,
    STREAM_AVAILABLE,
    CONSUMER_SURVIVES,
    SINGLE_LEADER,
    DELETED_STAYS,
    PURGED_STAYS,
)


@dataclass(frozen=True)
class History:
    publishes: list[PublishRecord]
    deliveries: list[DeliveryRecord]
    reads: dict[str, list[StoredMessage]]  # node name -> what it served, for every node that could be read
    reference: str  # the node whose read is "the stream" (the leader at read time); "" when none could be read
    unreadable: dict[str, str] = field(default_factory=dict)  # node -> why it could not be read
    node_states: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> its replica's messages/last_seq
    stream_error: str = ""  # why the stream did not answer after healing ("" when it did)
    consumer_error: str = ""  # why the durable consumer did not answer after healing ("" when it did)
    leaders: list[LeaderClaim] = field(default_factory=list)  # every node's /raftz leadership claims during the run
    deletes: list[DeleteRecord] = field(default_factory=list)  # the workload's deletions of acknowledged writes
    purges: list[PurgeRecord] = field(default_factory=list)  # the workload's purges below a sequence


@dataclass(frozen=True)
class Finding:
    """What the history shows for one rule: how many violations, the first few, and figures worth telling."""

    rule: str
    count: int
    examples: tuple[str, ...] = ()
    figures: dict[str, int] = field(default_factory=dict)
    writes: tuple[str, ...] = ()  # the write behind each violation that has one, all of them (the report times them)

    @property
    def holds(self) -> bool:
        return self.count == 0


class _Tally:
    def __init__(self) -> None:
        self.count = 0
        self.examples: list[str] = []
        self.writes: list[str] = []

    def add(self, example: str, write: str = "") -> None:
        """One violation; `write` names the write it concerns, when one does."""
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)
        if write:
            self.writes.append(write)

    def finding(self, rule: str, **figures: int) -> Finding:
        return Finding(rule, self.count, tuple(self.examples), figures, tuple(self.writes))


def _write_number(write: str) -> tuple[int, int] | None:
    """(publisher, n) of a write named "p<publisher>-<n>"; None for any other payload."""
    head, _, number = write.partition("-")
    if head.startswith("p") and head[1:].isdigit() and number.isdigit():
        return int(head[1:]), int(number)
    return None


def _by_write(messages: Iterable[StoredMessage]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = defaultdict(list)
    for message in messages:
        seqs[message.write].append(message.seq)
    return seqs


def check_history(history: History) -> dict[str, Finding]:
    """One finding per rule of RULES."""
    attempts: dict[str, list[PublishRecord]] = defaultdict(list)
    for record in history.publishes:
        attempts[record.write].append(record)
    ever_acked = {w: oks for w, tries in attempts.items() if (oks := [a for a in tries if a.outcome == "ok"])}
    # a purge the server refused purged nothing: the writes under it are judged as any other
    maybe_purged = [p for p in history.purges if p.outcome != "error"]
    purged_below = max((p.below_seq for p in maybe_purged), default=0)
    touched = {d.write for d in history.deletes}  # absent, undelivered or a gap are all fine for these
    touched.update(_under_purges(ever_acked, maybe_purged))
    acked = {w: oks for w, oks in ever_acked.items() if w not in touched}
    unknown = {w for w, tries in attempts.items() if w not in acked and any(a.outcome == "unknown" for a in tries)}
    failed = {w for w in attempts if w not in acked and w not in unknown}
    stream = sorted(history.reads.get(history.reference, []), key=lambda m: m.seq)
    stored = _by_write(stream)
    at_seq = {message.seq: message.write for message in stream}
    findings = {}

    lost, moved = _Tally(), 0
    for write in sorted(acked, key=lambda w: _write_number(w) or (-1, 0)):
        named = {a.seq for a in acked[write] if a.seq}
        if write not in stored:
            lost.add(f"{write} acked at seq {','.join(map(str, sorted(named))) or '?'}, absent", write)
        elif named and not named & set(stored[write]):
            moved += 1
            holder = at_seq.get(min(named), "nothing")
            lost.add(
                f"{write} acked at seq {min(named)}, stored at {stored[write][0]} (that seq holds {holder!r})", write
            )
    findings[ACKED_SURVIVE] = lost.finding(
        ACKED_SURVIVE,
        acked=len(acked),
        lost=lost.count,
        moved=moved,
        unknown=len(unknown),
        unknown_kept=sum(1 for w in unknown if w in stored),
        unknown_absent=sum(1 for w in unknown if w not in stored),
        failed_stored=sum(1 for w in failed if w in stored),
    )

    delivered = {d.write for d in history.deliveries}
    undelivered = _Tally()
    for write in sorted(acked, key=lambda w: _write_number(w) or (-1, 0)):
        if write not in delivered and write in stored:
            undelivered.add(f"{write} (seq {stored[write][0]}) never delivered", write)
        elif write not in delivered:
            undelivered.add(f"{write} never delivered", write)
    findings[ACKED_DELIVERED] = undelivered.finding(
        ACKED_DELIVERED, delivered=len(delivered), deliveries=len(history.deliveries)
    )

    ids = {a.write: a.msg_id for tries in attempts.values() for a in tries if a.msg_id}
    duplicates, phantoms = _Tally(), _Tally()
    for write, seqs in stored.items():
        if write not in attempts:
            phantoms.add(f"seq {seqs[0]} holds {write!r}, which nobody wrote", write)
        elif len(seqs) > 1 and write in ids:
            duplicates.add(f"msg id {ids[write]} stored at seqs {', '.join(map(str, seqs))}", write)
        elif len(seqs) > 1:
            phantoms.add(f"{write} written once, stored at seqs {', '.join(map(str, seqs))}", write)
    findings[DEDUP] = duplicates.finding(DEDUP, writes_with_ids=len(ids))
    findings[NO_PHANTOM] = phantoms.finding(NO_PHANTOM, stored=len(stream))

    gaps = _Tally()
    if stream:
        held = set(at_seq)
        deleted_seqs = {d.seq for d in history.deletes}
        for seq in range(stream[0].seq, stream[-1].seq + 1):
            if seq not in held and seq not in deleted_seqs and seq >= purged_below:
                gaps.add(f"seq {seq} missing between {stream[0].seq} and {stream[-1].seq}")
    findings[CONTIGUOUS] = gaps.finding(
        CONTIGUOUS, first_seq=stream[0].seq if stream else 0, last_seq=stream[-1].seq if stream else 0
    )

    order = _Tally()
    first_seq: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for write, seqs in stored.items():
        if (numbered := _write_number(write)) is not None:
            first_seq[numbered[0]].append((numbered[1], min(seqs), write))
    for writes in first_seq.values():
        writes.sort()
        for (_, seq_a, write_a), (_, seq_b, write_b) in itertools.pairwise(writes):
            if seq_b < seq_a:
                order.add(f"{write_b} (seq {seq_b}) stored before the earlier {write_a} (seq {seq_a})")
    findings[PUBLISHER_ORDER] = order.finding(PUBLISHER_ORDER)

    findings[REPLICAS_AGREE] = _divergence(history, stream)

    down = _Tally()
    if history.stream_error:
        down.add(history.stream_error)
    findings[STREAM_AVAILABLE] = down.finding(STREAM_AVAILABLE)
    consumer = _Tally()
    if history.consumer_error:
        consumer.add(history.consumer_error)
    findings[CONSUMER_SURVIVES] = consumer.finding(CONSUMER_SURVIVES)
    findings[SINGLE_LEADER] = _split_brain(history.leaders)
    findings[DELETED_STAYS] = _deleted_stay_deleted(history)
    findings[PURGED_STAYS] = _purged_stay_purged(history, ever_acked)
    return findings


def _deleted_stay_deleted(history: History) -> Finding:
    """Every write whose deletion was acknowledged, looked for on every replica read."""
    tally = _Tally()
    deleted = {d.write: d for d in history.deletes if d.outcome == "ok"}
    for node, messages in sorted(history.reads.items()):
        for message in messages:
            if (gone := deleted.get(message.write)) is not None:
                said = f"{message.write} deleted at seq {gone.seq}, served by {node} at seq {message.seq}"
                tally.add(said, gone.write)
    return tally.finding(DELETED_STAYS, deleted=len(deleted), delete_requests=len(history.deletes))


def _under_purges(acked: dict[str, list[PublishRecord]], purges: list[PurgeRecord]) -> dict[str, tuple[int, int]]:
    """The writes of each purge's publisher acknowledged below its sequence: write -> (acked seq, purged below)."""
    below: dict[int, int] = {}
    for purge in purges:
        below[purge.publisher] = max(below.get(purge.publisher, 0), purge.below_seq)
    under = {}
    for write, oks in acked.items():
        limit = below.get(oks[0].publisher, 0)
        if 0 < (seq := min(a.seq or limit for a in oks)) < limit:
            under[write] = (seq, limit)
    return under


def _purged_stay_purged(history: History, acked: dict[str, list[PublishRecord]]) -> Finding:
    """Every write acknowledged below an acknowledged purge's sequence, looked for on every replica read."""
    tally = _Tally()
    purged = _under_purges(acked, [p for p in history.purges if p.outcome == "ok"])
    for node, messages in sorted(history.reads.items()):
        for message in messages:
            if (under := purged.get(message.write)) is not None:
                said = f"{message.write} acked at seq {under[0]}, purged below {under[1]}, served by {node} at seq "
                tally.add(f"{said}{message.seq}", message.write)
    return tally.finding(PURGED_STAYS, purged=len(purged), purge_requests=len(history.purges))


def _split_brain(claims: list[LeaderClaim]) -> Finding:
    """Two nodes leading one Raft group in one term fail; overlapping leaders in different terms are counted."""
    tally = _Tally()
    if not claims:
        return tally.finding(SINGLE_LEADER, claims=0, groups=0, stale_overlaps=0)
    origin = min(claim.sent_ns for claim in claims)
    by_group: dict[str, list[LeaderClaim]] = defaultdict(list)
    for claim in claims:
        by_group[claim.group].append(claim)
    stale = 0
    for group, group_claims in sorted(by_group.items()):
        first: dict[tuple[int, str], LeaderClaim] = {}  # (term, node) -> its first claim
        for claim in sorted(group_claims, key=lambda c: c.sent_ns):
            first.setdefault((claim.term, claim.node), claim)
        for term in sorted({term for term, _ in first}):
            leaders = sorted((c for (t, _), c in first.items() if t == term), key=lambda c: c.sent_ns)
            if len(leaders) > 1:
                said = ", ".join(f"{c.node} (first at {(c.sent_ns - origin) / 1e9:.1f} s)" for c in leaders)
                tally.add(f"group {group} term {term} led by {len(leaders)} nodes: {said}")
        ordered = sorted(group_claims, key=lambda c: c.sent_ns)
        for index, a in enumerate(ordered):
            for b in ordered[index + 1 :]:
                if b.sent_ns > a.received_ns:
                    break  # sorted by start: this window and every later one begin after a's has ended
                if a.node != b.node and a.term != b.term:
                    stale += 1
    return tally.finding(SINGLE_LEADER, claims=len(claims), groups=len(by_group), stale_overlaps=stale)


def _divergence(history: History, stream: list[StoredMessage]) -> Finding:
    """Every node's read against the reference's, message by message, and every replica's state against the
    reference's; a node that could not be read disagrees too."""
    tally = _Tally()
    reference = {m.seq: m.write for m in stream}
    for node in sorted(history.unreadable):
        tally.add(f"{node} could not be read: {history.unreadable[node]}")
    for node, messages in sorted(history.reads.items()):
        if node == history.reference:
            continue
        theirs = {m.seq: m.write for m in messages}
        for seq in sorted(set(reference) | set(theirs)):
            if reference.get(seq) != theirs.get(seq):
                tally.add(
                    f"seq {seq}: {history.reference} has {reference.get(seq, 'nothing')!r}, "
                    f"{node} has {theirs.get(seq, 'nothing')!r}",
                    reference.get(seq) or theirs.get(seq, ""),
                )
    states = history.node_states
    if history.reference in states:
        ours = states[history.reference]
        for node, state in sorted(states.items()):
            if node != history.reference and state != ours:
                tally.add(f"{node}'s replica holds {state}, {history.reference}'s {ours}")
    return tally.finding(REPLICAS_AGREE, nodes_read=len(history.reads))


def summary(finding: Finding) -> str:
    """The finding in a sentence: the count and first examples, or that it held, with its figures."""
    figures = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in finding.figures.items())
    if finding.holds:
        return f"held ({figures})" if figures else "held"
    more = f" (first {len(finding.examples)})" if finding.count > len(finding.examples) else ""
    text = f"{finding.count} violation(s){more}: " + "; ".join(finding.examples)
    return f"{text} [{figures}]" if figures else text
