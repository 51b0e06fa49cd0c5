"""Finding what a folder given to `jetcheck report --in` holds: a run, a certify folder or a load folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from jetcheck.errors import ConfigError
from jetcheck.records import (
    LOAD_FILE,
    OP_FIELDS,
    OPS_DIR,
    OPS_GLOB,
    RESULTS_FILE,
    RUN_FILE,
    SAMPLE_FIELDS,
    SAMPLES_DIR,
    SAMPLES_GLOB,
    BadResultsError,
    CheckResult,
    read_results,
)
from jetcheck.verdict import RunVerdict, judge

CERTIFY_DIR = "certify"
LOAD_DIR = "load"
REPORT_DIR = "report"


@dataclass(frozen=True)
class ResultSet:
    """One input folder resolved: where its conformance results and load logs are (either may be absent).

    Its results.jsonl, run.json and load.json are read once, when first asked for (by `check`, then by the report's
    aggregations and verdict), and kept."""

    label: str
    root: Path
    kind: str  # run | certify | load
    certify: Path | None
    load: Path | None

    def results(self) -> list[CheckResult]:
        return list(self._results)

    def run_info(self) -> dict[str, Any]:
        return dict(self._run_info)

    def verdict(self, labelled: bool = False) -> RunVerdict:
        """The conformance verdict of this result set, complete only if its run.json says the run finished with
        every collected check; `labelled` names the result set in each line (a report of several)."""
        return judge(self.results(), self.run_info() or None, label=self.label if labelled else "")

    def load_info(self) -> dict[str, Any]:
        return dict(self._load_info)

    @cached_property
    def _results(self) -> tuple[CheckResult, ...]:
        if self.certify is None:
            return ()
        try:
            return tuple(read_results(self.certify / RESULTS_FILE))
        except BadResultsError as exc:
            raise ConfigError(str(exc)) from None

    @cached_property
    def _run_info(self) -> dict[str, Any]:
        return _json(self.certify / RUN_FILE, RUN_FIELDS) if self.certify else {}

    @cached_property
    def _load_info(self) -> dict[str, Any]:
        return _json(self.load / LOAD_FILE, LOAD_FIELDS) if self.load else {}

    def op_files(self) -> list[Path]:
        return sorted((self.load / OPS_DIR).glob(OPS_GLOB)) if self.load else []

    def sample_files(self) -> list[Path]:
        return sorted((self.load / SAMPLES_DIR).glob(SAMPLES_GLOB)) if self.load else []


# The JSON types of the fields of run.json and load.json the report reads (a field may be absent; null is absent).
RUN_FIELDS: dict[str, type | tuple[type, ...]] = {
    "server": dict,
    "client": dict,
    "options": dict,
    "counts": dict,
    "jetcheck_version": str,
    "started_at": str,
    "finished_at": str,
    "collected": int,  # the verdict compares it with the results' count
    "stopped_reason": str,
}
LOAD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "run_id": str,
    "scenario": str,
    "mode": str,
    "rate": (int, float),
    "users": int,
    "publishers": int,
    "consumers": int,
    "processes": int,
    "duration_s": (int, float),
    "payload_size": int,
    "server_url": str,
    "server_version": str,
    "start_ns": int,
    "end_ns": int,
    "server": dict,
    "monitor": dict,
    "load_cpu_s": dict,
    "process_roles": dict,
    "workers": list,  # a fleet's workers (jetcheck load --master), each an object
    "clock_bound_ns": int,
}


def _json(path: Path, types: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(data).__name__}")
    for name, expected in types.items():
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, expected)):
            raise ConfigError(f"{path}: field {name} is {type(value).__name__}, not {_type_name(expected)}")
    if not all(isinstance(worker, dict) for worker in data.get("workers") or []):
        raise ConfigError(f"{path}: field workers must be a list of objects, one per worker")
    if not all(isinstance(roles, list) for roles in (data.get("process_roles") or {}).values()):
        raise ConfigError(f"{path}: field process_roles must map each process to a list of roles")
    return data


def _type_name(expected: type | tuple[type, ...]) -> str:
    return "a number" if isinstance(expected, tuple) else expected.__name__


def _check_parquet(path: Path, fields: tuple[tuple[str, str], ...]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # a garbled footer can name a column in non-UTF-8
        raise ConfigError(
            f"{path} is not a readable Parquet file: {(str(exc) or type(exc).__name__).splitlines()[0]}"
        ) from None
    for name, kind in fields:
        if name not in schema.names:
            raise ConfigError(f"{path} has no column {name}: not a jetcheck log")
        if schema.field(name).type != pa.type_for_alias(kind):
            raise ConfigError(f"{path}: column {name} is {schema.field(name).type}, not {kind}")


def check(result_set: ResultSet) -> None:
    """Read everything `result_set` holds as the report will (results, run.json, load.json, the Parquet logs'
    schemas) and raise ConfigError naming the first file that is not what jetcheck writes; the aggregation
    (Spark) starts only on inputs that passed."""
    result_set.results()
    result_set.run_info()
    result_set.load_info()
    for path in result_set.op_files():
        _check_parquet(path, OP_FIELDS)
    for path in result_set.sample_files():
        _check_parquet(path, SAMPLE_FIELDS)


def _is_certify(folder: Path) -> bool:
    return (folder / RESULTS_FILE).is_file()


def _is_load(folder: Path) -> bool:
    return (folder / LOAD_FILE).is_file() or any((folder / OPS_DIR).glob(OPS_GLOB))


def resolve(folder: Path | str, label: str | None = None) -> ResultSet:
    """Classify `folder` by the files present; raise ConfigError when it holds no jetcheck results."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--in {root}: no such directory")
    if label is None:
        # RUN/certify or RUN/load alone are best known by their run's name
        label = root.resolve().parent.name if root.resolve().name in (CERTIFY_DIR, LOAD_DIR) else root.resolve().name
    certify, load = root / CERTIFY_DIR, root / LOAD_DIR
    has_certify, has_load = _is_certify(certify), _is_load(load)
    if has_certify or has_load:
        return ResultSet(label, root, "run", certify if has_certify else None, load if has_load else None)
    if _is_certify(root):
        return ResultSet(label, root, "certify", root, None)
    if _is_load(root):
        return ResultSet(label, root, "load", None, root)
    raise ConfigError(
        f"--in {root}: no jetcheck results here (expected {RESULTS_FILE}, {LOAD_FILE} or {OPS_DIR}/, "
        f"or a run folder with {CERTIFY_DIR}/ and {LOAD_DIR}/)"
    )


def matrix_members(root: Path) -> list[Path]:
    """The result sets inside a `jetcheck matrix` folder (OUT/<version>/ or OUT/<version>/<client>/), or [] when
    `root` is not one: a folder that holds results itself is taken as it is."""
    if not root.is_dir() or _is_certify(root) or _is_load(root) or _is_certify(root / CERTIFY_DIR):
        return []
    found = {path.parent for depth in ("*", "*/*") for path in root.glob(f"{depth}/{RESULTS_FILE}")}
    return sorted(found - {root / REPORT_DIR})


def resolve_all(folders: list[str]) -> list[ResultSet]:
    """Resolve several inputs, a matrix folder into its result sets (labelled by their path in it); labels stay
    unique (a repeated folder name gets its parent's name too)."""
    sets = []
    for folder in folders:
        members = matrix_members(Path(folder))
        if members:
            sets += [resolve(member, member.relative_to(folder).as_posix()) for member in members]
        else:
            sets.append(resolve(folder))
    seen: dict[str, int] = {}
    unique = []
    for item in sets:
        label = item.label
        if label in seen or sum(other.label == label for other in sets) > 1:
            label = f"{item.root.resolve().parent.name}/{label}"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label}#{seen[label]}"
        unique.append(ResultSet(label, item.root, item.kind, item.certify, item.load))
    return unique
