"""The data shapes every part of jetcheck reads or writes, defined once.

- ``CheckResult``: one line of a conformance run's ``results.jsonl``.
- ``OP_FIELDS``: one row of a load run's operation log (Parquet, ``ops-*.parquet``).
- ``SAMPLE_FIELDS``: one row of a load run's server-sample log (Parquet, ``samples-*.parquet``).
- A load run's folder: ``load.json`` (the run's description), ``ops/`` and ``samples/``.

Load logs are columnar; their schemas are kept here as (name, Arrow type) pairs so that writers and readers
(pyarrow, Spark) derive theirs from one list and pyarrow is only imported by the code that needs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATUSES = ("pass", "fail", "error", "na", "skip")
LEVELS = ("MUST", "SHOULD")
SUBJECTS = ("server", "client")  # whose behaviour a rule judges: the server's alone, or the client's too

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
JUNIT_FILE = "junit.xml"

LOAD_FILE = "load.json"
OPS_DIR = "ops"  # ops/ops-<pid>-<n>.parquet
SAMPLES_DIR = "samples"  # samples/samples-<n>.parquet
OPS_GLOB = "ops-*.parquet"
SAMPLES_GLOB = "samples-*.parquet"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one conformance check against one target."""

    id: str  # stable catalog rule id, e.g. "dedup.duplicate-acked"
    status: str  # one of STATUSES
    area: str
    title: str  # the rule as a sentence
    level: str  # MUST | SHOULD
    source: str  # ADR section, docs page or server source path
    min_version: str  # first server version that has the rule
    server_version: str
    client: dict[str, str]  # {"name": ..., "version": ...}
    duration_s: float
    message: str = ""  # for fail/error/na: what was expected, what happened
    check: str = ""  # the pytest node id that ran it
    run_id: str = ""
    observed: dict[str, Any] = field(default_factory=dict)  # version-dependent behaviour seen, timings
    server_log: str = ""  # server log lines written while a failing check ran
    subject: str = "server"  # one of SUBJECTS: a failure of a "client" rule may be the client library's
    detail: str = ""  # the raw assertion text behind a fail/error message, for a collapsed view

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in data.items() if k in names})


def read_results(path: Path) -> Iterator[CheckResult]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield CheckResult.from_dict(json.loads(line))


def write_results(path: Path, results: Iterable[CheckResult]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for result in results:
            fh.write(result.to_json() + "\n")


# One operation of a load run. Times are wall-clock nanoseconds (time.time_ns) so that logs from several
# processes on one machine share a clock; durations derive from them.
OP_FIELDS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"),
    ("process", "int32"),  # pid of the Locust process
    ("user", "int32"),  # user index within the process
    ("scenario", "string"),
    ("op", "string"),  # publish | fetch | ack | consume | kv_put | kv_get | e2e ...
    ("stream", "string"),
    ("subject", "string"),
    ("payload_size", "int32"),
    ("intended_ns", "int64"),  # open loop: when the op was scheduled; closed loop: equals start_ns
    ("start_ns", "int64"),  # when it was actually sent
    ("end_ns", "int64"),  # when its reply (or the message) arrived
    ("ok", "bool"),
    ("error_class", "string"),  # exception class name, "" when ok
    ("error_code", "int32"),  # JetStream err_code or status code, 0 when none
    ("stream_seq", "int64"),  # 0 when not known
    ("delivery_count", "int32"),  # 0 when not a delivery
    ("e2e_ns", "int64"),  # end-to-end latency for deliveries that carry a send stamp, -1 otherwise
)

# One sample of the target's monitoring endpoints (/varz, /jsz) taken during a load run.
SAMPLE_FIELDS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"),
    ("ts_ns", "int64"),
    ("cpu", "double"),  # percent, as /varz reports it
    ("mem", "int64"),  # bytes
    ("in_msgs", "int64"),
    ("out_msgs", "int64"),
    ("in_bytes", "int64"),
    ("out_bytes", "int64"),
    ("js_messages", "int64"),
    ("js_bytes", "int64"),
    ("slow_consumers", "int64"),
)


def shared_loop_note(load_run: dict[str, Any]) -> str | None:
    """The caveat for a load run (load.json) in which a process ran publishers and consumers: they shared its
    asyncio loop, and nats-py's fetch takes loop turns per message, so those consumers got only the turns the
    publishers left."""
    shared = sorted(pid for pid, roles in load_run.get("process_roles", {}).items() if len(roles) > 1)
    if not shared:
        return None
    return (
        f"publishers and consumers shared process(es) {', '.join(shared)}: consumers there got only the event-loop "
        "turns the publishers left, so their rate understates and their end-to-end latency overstates what the "
        "server does; give each user its own process (--processes equal to --users)"
    )


def arrow_schema(fields: tuple[tuple[str, str], ...]):
    """The pyarrow schema for OP_FIELDS or SAMPLE_FIELDS."""
    import pyarrow as pa

    # type_for_alias knows the type names used above ("bool", "double", ...), unlike getattr(pa, name).
    return pa.schema([(name, pa.type_for_alias(kind)) for name, kind in fields])
