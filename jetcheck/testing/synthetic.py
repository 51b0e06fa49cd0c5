"""Synthetic result logs shaped by jetcheck.records: for the reports' tests and benchmark, and for a user's tests of
what reads them. The load logs come from jetcheck.reports.synthetic_load (a report's warm-up writes them too);
certify results are made here: one result per rule, seeded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jetcheck.records import RESULTS_FILE, RUN_FILE, CheckResult, write_results
from jetcheck.reports.synthetic_load import ERROR_CLASSES, START_NS, LoadSpec, write_load_run
from jetcheck.verdict import OUT_OF_PROFILE

__all__ = [
    "ERROR_CLASSES",
    "START_NS",
    "LoadSpec",
    "sample_results",
    "write_certify_run",
    "write_load_run",
]

AREAS = ("stream", "consumer", "publish", "kv")


def sample_results(
    server_version: str = "2.15.1",
    client: tuple[str, str] = ("nats-py", "2.16.0"),
    rules: int = 24,
    failing: tuple[str, ...] = ("publish.rule-02",),
    seed: int = 1,
) -> list[CheckResult]:
    """One result per rule: mostly pass, the ids in `failing` fail, a few are na or skipped (seeded)."""
    rng = np.random.default_rng(seed)
    results = []
    for n in range(rules):
        area = AREAS[n % len(AREAS)]
        rule = f"{area}.rule-{n // len(AREAS):02d}"
        status, message = "pass", ""
        draw_na, draw_skip = rng.random(2)  # drawn for every rule: `failing` does not shift the others
        if rule in failing:
            status, message = "fail", "expected: duplicate=True on the second publish; actual: duplicate=False"
        elif draw_na < 0.1:
            status, message = "na", f"{OUT_OF_PROFILE} {server_version}: {rule} is a rule of nats-server 9.0.0 on"
        elif draw_skip < 0.05:
            status, message = "skip", "needs a cluster"
        results.append(
            CheckResult(
                id=rule,
                status=status,
                area=area,
                title=f"{area} rule {n}: the server does what the documentation says",
                level="MUST" if n % 3 else "SHOULD",
                source=f"ADR-{n:02d}",
                min_version="2.10.0",
                server_version=server_version,
                client={"name": client[0], "version": client[1]},
                duration_s=float(rng.uniform(0.001, 0.2)),
                message=message,
                check=f"conformance/checks/test_{area}.py::test_rule_{n}",
                run_id="synthetic",
                observed={"duplicate": False} if status == "fail" else {},
                server_log="[WRN] synthetic server log line" if status == "fail" else "",
            )
        )
    return results


def write_certify_run(
    folder: Path, results: list[CheckResult], started: str = "2025-10-09T10:00:00Z", profile: dict | None = None
) -> Path:
    """Write results.jsonl and run.json for `results` under `folder` (with the run's `profile` as run.json gives it,
    conformance.profiles.Profile.as_dict, when given); return `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULTS_FILE).unlink(missing_ok=True)
    write_results(folder / RESULTS_FILE, results)
    first = results[0] if results else None
    run = {
        "jetcheck_version": "0.1.0",
        "server": {"version": first.server_version if first else "", "url": "nats://127.0.0.1:4222"},
        "options": {"server": "local", "password": "***"},
        "started_at": started,
        "finished_at": started,
        "collected": len(results),  # a finished run: every collected check has its result (jetcheck.verdict)
        **({"profile": profile} if profile else {}),
    }
    (folder / RUN_FILE).write_text(json.dumps(run, indent=2))
    return folder
