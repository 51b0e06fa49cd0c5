"""A pure-Python reference model of a Key-Value bucket as ADR-8 documents it (JetStream based Key-Value Stores).

A bucket is the stream KV_<b> on $KV.<b>.> with history H (max_msgs_per_subject, discard new: a key at its history
drops its oldest revision). Every write is a message on the key's subject and its revision is that message's stream
sequence: put stores a value; create stores one only when the key has no message or its latest is a delete or purge
marker (the client retries with the marker's revision); update stores one only when the key's latest revision is the
expected one; delete stores an empty KV-Operation: DEL marker and keeps the history; purge stores an empty
KV-Operation: PURGE marker with Nats-Rollup: sub, which removes every earlier message of the key.

What the read paths must say, from the same state: get answers the latest value with its revision, or not found for
a key never written or whose latest entry is a marker; keys lists the keys whose latest entry is a value; history
lists the retained revisions oldest first, markers included; a watch of all keys delivers each key's latest entry in
revision order (last_per_subject), then the end of initial data. Left out, because the documents leave it open: the
first sequence of an empty stream, and TTLs and limit markers (ADR-48), which no operation here uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PUT, DEL, PURGE = "PUT", "DEL", "PURGE"
WRONG_LAST_SEQUENCE = 10071  # JSStreamWrongLastSequenceErrF: "wrong last sequence: {seq}"


@dataclass(frozen=True)
class Entry:
    """One message of the bucket: the key, its revision (stream sequence), the operation and the value."""

    key: str
    revision: int
    operation: str
    value: bytes

    def __str__(self) -> str:
        return f"{self.key}@{self.revision}:{self.operation}={self.value!r}"


@dataclass(frozen=True)
class Written:
    """A write the bucket stored: the revision it got (None where the API returns none: delete, purge)."""

    revision: int | None


@dataclass(frozen=True)
class WrongLastSequence:
    """A write refused because the key's latest revision is not the expected one: 400/10071 'wrong last sequence:
    N', N the key's latest revision (0 when it has none)."""

    last: int

    @property
    def description(self) -> str:
        return f"wrong last sequence: {self.last}"


Outcome = Written | WrongLastSequence


@dataclass
class BucketModel:
    history: int = 1
    entries: list[Entry] = field(default_factory=list)  # retained, in revision order
    last_seq: int = 0

    def _of(self, key: str) -> list[Entry]:
        return [e for e in self.entries if e.key == key]

    def latest(self, key: str) -> Entry | None:
        kept = self._of(key)
        return kept[-1] if kept else None

    def _store(self, key: str, operation: str, value: bytes) -> int:
        self.last_seq += 1
        if operation == PURGE:  # Nats-Rollup: sub removes every earlier message of the subject
            self.entries = [e for e in self.entries if e.key != key]
        self.entries.append(Entry(key, self.last_seq, operation, value))
        kept = self._of(key)
        drop = {e.revision for e in kept[: max(0, len(kept) - self.history)]}
        self.entries = [e for e in self.entries if e.revision not in drop]
        return self.last_seq

    def put(self, key: str, value: bytes) -> Outcome:
        return Written(self._store(key, PUT, value))

    def update(self, key: str, value: bytes, last: int) -> Outcome:
        """A publish with Nats-Expected-Last-Subject-Sequence: `last` (0: the key has no message)."""
        latest = self.latest(key)
        current = latest.revision if latest else 0
        if current != last:
            return WrongLastSequence(current)
        return Written(self._store(key, PUT, value))

    def create(self, key: str, value: bytes) -> Outcome:
        """ADR-8's create: update with 0; refused for a key with a message, the client updates on the revision of a
        delete or purge marker instead."""
        latest = self.latest(key)
        if latest is not None and latest.operation in (DEL, PURGE):
            return self.update(key, value, latest.revision)
        return self.update(key, value, 0)

    def delete(self, key: str) -> Outcome:
        self._store(key, DEL, b"")
        return Written(None)

    def purge(self, key: str) -> Outcome:
        self._store(key, PURGE, b"")
        return Written(None)

    # --- what the read paths must say ---------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        """The key's latest value, None (not found) for a key never written or ended by a marker."""
        latest = self.latest(key)
        return latest if latest is not None and latest.operation == PUT else None

    def keys(self) -> list[str]:
        return sorted(key for key in {e.key for e in self.entries} if self.get(key) is not None)

    def key_history(self, key: str) -> list[Entry]:
        return self._of(key)

    def watch_initial(self) -> list[Entry]:
        """Each key's latest entry, markers included, in revision order."""
        latest = {e.key: e for e in self.entries}
        return sorted(latest.values(), key=lambda e: e.revision)

    def subject_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self.entries:
            counts[entry.key] = counts.get(entry.key, 0) + 1
        return counts

    @property
    def first_seq(self) -> int | None:
        """The stream's first sequence while it holds messages; None (unspecified) when it holds none."""
        return self.entries[0].revision if self.entries else None
