"""Finding what a folder given to `jetcheck report --in` holds: a run, a certify folder or a load folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jetcheck.config import ConfigError
from jetcheck.records import (
    LOAD_FILE,
    OPS_DIR,
    OPS_GLOB,
    RESULTS_FILE,
    RUN_FILE,
    SAMPLES_DIR,
    SAMPLES_GLOB,
    CheckResult,
    read_results,
)
from jetcheck.verdict import RunVerdict, judge

CERTIFY_DIR = "certify"
LOAD_DIR = "load"
REPORT_DIR = "report"


@dataclass(frozen=True)
class ResultSet:
    """One input folder resolved: where its conformance results and load logs are (either may be absent)."""

    label: str
    root: Path
    kind: str  # run | certify | load
    certify: Path | None
    load: Path | None

    def results(self) -> list[CheckResult]:
        if self.certify is None:
            return []
        return list(read_results(self.certify / RESULTS_FILE))

    def run_info(self) -> dict[str, Any]:
        return _json(self.certify / RUN_FILE) if self.certify else {}

    def verdict(self, labelled: bool = False) -> RunVerdict:
        """The conformance verdict of this result set, complete only if its run.json says the run finished with
        every collected check; `labelled` names the result set in each line (a report of several)."""
        return judge(self.results(), self.run_info() or None, label=self.label if labelled else "")

    def load_info(self) -> dict[str, Any]:
        return _json(self.load / LOAD_FILE) if self.load else {}

    def op_files(self) -> list[Path]:
        return sorted((self.load / OPS_DIR).glob(OPS_GLOB)) if self.load else []

    def sample_files(self) -> list[Path]:
        return sorted((self.load / SAMPLES_DIR).glob(SAMPLES_GLOB)) if self.load else []


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None


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


def resolve_all(folders: list[str]) -> list[ResultSet]:
    """Resolve several inputs; labels stay unique (a repeated folder name gets its parent's name too)."""
    sets = [resolve(folder) for folder in folders]
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
