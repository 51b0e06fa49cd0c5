"""The data shapes every part of jetcheck reads or writes, defined once.

- ``CheckResult``: one line of a conformance run's ``results.jsonl``.
- ``OP_FIELDS``: one row of a load run's operation log (Parquet, ``ops-*.parquet``).
- ``SAMPLE_FIELDS``: one row of a load run's server-sample log (Parquet, ``samples-*.parquet``).
- A load run's folder: ``load.json`` (the run's description), ``ops/`` and ``samples/``.

Load logs are columnar; their schemas are kept here as (name, Arrow type) pairs so that writers and readers
(pyarrow, Spark) derive theirs from one list and pyarrow is only imported by the code that needs it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any

from jetcheck.errors import JetcheckError

# disagree: two documents say different things about the rule and the target does what one of them says
STATUSES = ("pass", "fail", "error", "disagree", "na", "skip")
LEVELS = ("MUST", "SHOULD")
SUBJECTS = ("server", "client")  # whose behaviour a rule judges: the server's alone, or the client's too

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
JUNIT_FILE = "junit.xml"

LOAD_FILE = "load.json"
OPS_DIR = "ops"  # ops/ops-<pid>-<n>.parquet; a fleet worker's on its master: ops/ops-w<index>-<host>-<pid>-<n>.parquet
SAMPLES_DIR = "samples"  # samples/samples-<n>.parquet
OPS_GLOB = "ops-*.parquet"
SAMPLES_GLOB = "samples-*.parquet"


def utc_now() -> str:
    """Now, as run.json's started_at and finished_at give it (ISO 8601, UTC, milliseconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class BadResultsError(JetcheckError):
    """A results file holds something that is not a check result; the message names the file and line."""


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
    message: str = ""  # for fail/error/na: what was expected, what happened; for disagree: both documents' words
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


# The JSON type each field of a results.jsonl line must have (bool is an int to Python, so it is refused apart).
_RESULT_TYPES: dict[str, type | tuple[type, ...]] = {
    "duration_s": (int, float),
    "client": dict,
    "observed": dict,
}


def _check_result_fields(data: Any) -> str:
    """Why a decoded results.jsonl line is not a CheckResult, or "" when it is one."""
    if not isinstance(data, dict):
        return f"expected a JSON object, not {type(data).__name__}"
    fields = CheckResult.__dataclass_fields__
    missing = [name for name, spec in fields.items() if spec.default is MISSING and spec.default_factory is MISSING]
    missing = [name for name in missing if name not in data]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for name in fields:
        if name not in data:
            continue
        expected = _RESULT_TYPES.get(name, str)
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, expected):
            return f"field {name} is {type(value).__name__}, not {getattr(expected, '__name__', 'a number')}"
    if not all(isinstance(v, str) for v in data["client"].values()):
        return "field client must map names to strings"
    if data["status"] not in STATUSES:
        return f"status {data['status']!r} is not one of {', '.join(STATUSES)}"
    return ""


def read_results(path: Path) -> Iterator[CheckResult]:
    """The results of `path`; a line that is not a result raises BadResultsError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise BadResultsError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
                problem = _check_result_fields(data)
                if problem:
                    raise BadResultsError(f"{path}:{number}: not a check result: {problem}")
                yield CheckResult.from_dict(data)
    except UnicodeDecodeError as exc:
        raise BadResultsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


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
    shared = sorted(pid for pid, roles in (load_run.get("process_roles") or {}).items() if len(roles) > 1)
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
