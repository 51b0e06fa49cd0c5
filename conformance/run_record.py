"""What the plugin records about a run: the RunRecord, its results.jsonl and run.json, the target's probe and
anchor, and the deletion of what the run created."""

from __future__ import annotations

import asyncio
import itertools
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jetcheck
from jetcheck.errors import ConfigError
from jetcheck.fixtures.cleanup import RunLedger, claim_prefix, create_anchor, delete_created_streams, run_marker
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.target import ServerInfo, Target, probe
from jetcheck.options import Config
from jetcheck.records import RESULTS_FILE, RUN_FILE, CheckResult

from .catalog import Rule
from .clients import adapter_for
from .profiles import Profile


def client_info(config: Config) -> dict[str, str]:
    """The client under test as results record it (a proof variant keeps its `+variant` in the name); a driven
    client's exact version is the one its driver reports."""
    try:
        adapter = adapter_for(config.client)
    except ConfigError:
        return {"name": config.client, "version": ""}
    return {"name": adapter.name, "version": adapter.version}


@dataclass
class RunRecord:
    """What the hooks record about the run (results, run.json). The fixtures (check_fixtures) set `target` and
    `server` once the server under test answers; nothing here starts or stops a server."""

    config: Config
    catalog: dict[str, Rule]
    run_id: str
    started_at: str
    target: Target | None = None  # the server under test, from its probe until the run's final cleanup
    server: ServerInfo | None = None
    profile: Profile | None = None  # the rules the run holds the target to, from --rules-of and the server's probe
    failure: str = ""  # why the target could not be started or reached, once it failed
    stopped_reason: str = ""  # why the run stopped before its last check (the target died), "" when it did not
    collected: int | None = None  # checks collected (after deselection), once collection finished
    results: list[CheckResult] = field(default_factory=list)
    cleanup_problems: list[str] = field(default_factory=list)
    names: itertools.count = field(default_factory=itertools.count)
    ledger: RunLedger = field(init=False)  # every stream name this run handed out: all its cleanup may delete

    def __post_init__(self) -> None:
        self.ledger = RunLedger(self.config.run_prefix)

    @property
    def out_dir(self) -> Path:
        return Path(self.config.out)

    @property
    def secrets(self) -> list[str]:
        return [self.config.password, self.config.token]

    def cleanup(self, keep_anchor: bool = True) -> None:
        if self.target is None:
            return
        problems = asyncio.run(cleanup_run(self.target, self.ledger, keep_anchor))
        self.cleanup_problems.extend(problems)

    def release_target(self) -> None:
        """The run's end: delete its streams and anchor (not on a target that stopped answering)."""
        if self.target is None:
            return
        if self.stopped_reason:
            self.cleanup_problems.append("no cleanup: the target stopped answering")
        else:
            self.cleanup(keep_anchor=False)
        self.target = None


async def probe_and_anchor(target: Target, prefix: str, run_id: str, clean_previous: bool) -> ServerInfo:
    nc = await target.connect()
    try:
        info = await probe(nc)
        await claim_prefix(nc, prefix, clean_previous)  # refuses a prefix the target already uses
        await create_anchor(nc, prefix, run_marker(run_id, info.version))
        return info
    finally:
        await nc.close()


async def cleanup_run(target: Target, ledger: RunLedger, keep_anchor: bool) -> list[str]:
    try:
        nc = await target.connect()
    except TargetError as exc:
        return [f"cleanup could not connect: {exc}"]
    try:
        return await delete_created_streams(nc, ledger, keep_anchor)
    finally:
        await nc.close()


def append_result(run: RunRecord, result: CheckResult) -> None:
    if not run.results:
        run.out_dir.mkdir(parents=True, exist_ok=True)
        (run.out_dir / RESULTS_FILE).write_text("")
    run.results.append(result)
    with open(run.out_dir / RESULTS_FILE, "a", encoding="utf-8") as fh:
        fh.write(result.to_json() + "\n")


def write_run(run: RunRecord, **end: Any) -> None:
    """run.json: once when collection finished (no finished_at yet), again at the session's end."""
    counts: dict[str, int] = {}
    for result in run.results:
        counts[result.status] = counts.get(result.status, 0) + 1
    info = {
        "run_id": run.run_id,
        "jetcheck_version": jetcheck.__version__,
        "started_at": run.started_at,
        "collected": run.collected,
        "options": run.config.redacted(),
        "server": run.server.as_dict() if run.server else {},
        "profile": run.profile.as_dict() if run.profile else {},
        "target": "managed" if run.config.managed else "url",
        "client": client_info(run.config),
        "python": platform.python_version(),
        "counts": counts,
        "cleanup_problems": run.cleanup_problems,
        **end,
    }
    run.out_dir.mkdir(parents=True, exist_ok=True)
    (run.out_dir / RUN_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
