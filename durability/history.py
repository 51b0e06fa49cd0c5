"""A durability run's history (`jetcheck durability`), one JSONL file per record kind in the run's `history/`
folder: what each publisher tried and what it was told, what the durable consumer received, the faults done, the
deletions and purges the workload asked for, and what each node served when it was read at the end. A write's
identity is its payload ("p<publisher>-<n>"), so a stored message can always be traced to the write that made it
(or to nobody).

The run writes it (durability.cli), the checker judges it (durability.checker) and `jetcheck report` reads it again
(reports.durability_report).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HISTORY_DIR = "history"
PUBLISH_OUTCOMES = ("ok", "error", "unknown")  # unknown: timed out, so it may or may not have been stored


@dataclass(frozen=True)
class PublishRecord:
    """One attempt to publish one write."""

    publisher: int  # -1 for the run's own probe after healing
    write: str  # the write's identity and payload
    msg_id: str  # Nats-Msg-Id ("" when published without one); retries of a write reuse it
    attempt: int  # 1 for the first try
    outcome: str  # one of PUBLISH_OUTCOMES
    seq: int = 0  # the PubAck's stream sequence (0 unless ok)
    duplicate: bool = False  # the PubAck's duplicate flag
    error: str = ""  # what went wrong (error and unknown)
    start_ns: int = 0  # wall clock, time.time_ns()
    end_ns: int = 0


@dataclass(frozen=True)
class DeliveryRecord:
    """One message the durable pull consumer received (and acknowledged)."""

    seq: int  # stream sequence
    write: str  # the payload
    msg_id: str
    num_delivered: int  # 1 for a first delivery
    at_ns: int


@dataclass(frozen=True)
class StoredMessage:
    """One message as one node served it in the final read."""

    node: str
    seq: int
    write: str
    msg_id: str


@dataclass(frozen=True)
class FaultRecord:
    """One fault of the schedule as it was done: which nodes, when, and when it was healed."""

    index: int
    kind: str  # jetcheck.fault_kinds.FAULT_KINDS
    nodes: list[str]
    start_ns: int
    healed_ns: int
    detail: str = ""


@dataclass(frozen=True)
class DeleteRecord:
    """One request to delete an acknowledged write from the stream by the sequence its PubAck named."""

    write: str
    seq: int
    outcome: str  # one of PUBLISH_OUTCOMES: ok (the server said it deleted it), error, unknown (timed out)
    error: str = ""
    start_ns: int = 0
    end_ns: int = 0


@dataclass(frozen=True)
class PurgeRecord:
    """One request to purge one publisher's writes below a sequence (a purge filtered on the subject it alone
    writes to): every one of them with a smaller sequence is to go."""

    below_seq: int
    publisher: int
    outcome: str  # one of PUBLISH_OUTCOMES: ok (the server said it purged), error, unknown (timed out)
    error: str = ""
    start_ns: int = 0
    end_ns: int = 0


@dataclass(frozen=True)
class LeaderClaim:
    """One node saying, in one sample of its `/raftz`, that it leads a Raft group (the meta group, the stream's or
    a consumer's) in `term`; the sample was asked for at `sent_ns` and answered by `received_ns`, so the claim held
    at some instant between the two."""

    node: str
    group: str  # the Raft group's id as /raftz names it (e.g. "_meta_", "S-R3F-...", "C-R3F-...")
    term: int
    sent_ns: int
    received_ns: int


HISTORY_FILES = {
    PublishRecord: "publishes.jsonl",
    DeliveryRecord: "deliveries.jsonl",
    StoredMessage: "reads.jsonl",
    FaultRecord: "faults.jsonl",
    LeaderClaim: "leaders.jsonl",
    DeleteRecord: "deletes.jsonl",
    PurgeRecord: "purges.jsonl",
}


def write_history(folder: Path, records: Iterable[Any], kind: type) -> Path:
    """Write `records` (all of `kind`, one of HISTORY_FILES) as JSON lines into `folder`; returns the file."""
    path = folder / HISTORY_FILES[kind]
    folder.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(asdict(record), sort_keys=True) + "\n")
    return path


def read_history(folder: Path, kind: type) -> list[Any]:
    """The records of `kind` that `write_history` wrote into `folder`."""
    with open(folder / HISTORY_FILES[kind], encoding="utf-8") as fh:
        return [kind(**json.loads(line)) for line in fh if line.strip()]
