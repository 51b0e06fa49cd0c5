"""`jetcheck run`: certify against the embedded server (or a URL), a short load session, then the report.

Each step is a subprocess of this interpreter (`python -m jetcheck.cli ...`) whose output goes to RUN/logs/, so the
terminal shows a progress display instead: one line per step, refreshed with the elapsed time and the step's
latest output line when the terminal is interactive.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from jetcheck.credentials import Credentials
from jetcheck.errors import ConfigError
from jetcheck.fixtures import children
from jetcheck.options import (
    CREDENTIAL_OPTIONS,
    Config,
    cli_flag,
    credential_environment,
    resolve,
)
from jetcheck.records import RESULTS_FILE
from jetcheck.reports.inputs import CERTIFY_DIR, LOAD_DIR, LOAD_FILE, REPORT_DIR

LOAD_DURATION = "20s"
LOAD_SCENARIO = "mixed"
# Open loop at a rate the 2-core reference machine holds, so response time, service time and send delay all mean
# something; two publishers and one consumer (mixed needs more users than consumers).
LOAD_OPTIONS = ("--users", "3", "--consumers", "1", "--rate", "2000")
EXIT_OK, EXIT_MUST_FAILED, EXIT_STEP_FAILED = 0, 1, 3


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    produces: Path  # the step counts as done only if this exists afterwards
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)  # added to this process's environment (credentials)


def default_steps(
    run_dir: Path,
    run_prefix: str,
    server_version: str | None = None,
    server: str = "local",
    credentials: Credentials | None = None,
) -> list[Step]:
    """Certify and load into `run_dir`. The target travels as --server, its credentials, secrets included, in the
    environment only; `run_prefix`, the one the run resolved and its preflight claimed, names what both steps create
    (certify deletes all of its own before load claims the prefix again)."""
    cli = [sys.executable, "-m", "jetcheck.cli"]
    server_args = [
        "--run-prefix",
        run_prefix,
        "--server",
        server,
        *(["--server-version", server_version] if server_version else []),
    ]
    env = credential_environment(credentials or Credentials())
    return [
        Step(
            "certify",
            [*cli, "certify", "--out", str(run_dir / CERTIFY_DIR), *server_args],
            run_dir / CERTIFY_DIR / RESULTS_FILE,
            1800,
            env,
        ),
        Step(
            "load",
            [
                *cli,
                "load",
                "--scenario",
                LOAD_SCENARIO,
                "--duration",
                LOAD_DURATION,
                *LOAD_OPTIONS,
                "--out",
                str(run_dir / LOAD_DIR),
                *server_args,
            ],
            run_dir / LOAD_DIR / LOAD_FILE,
            300,
            env,
        ),
    ]


STEP_PROGRESS = "jetcheck: ["  # how a step's own progress lines start (certify's per-area lines)


class Progress:
    """One line per step: `[n/N] name ... done in 12.3 s`; live elapsed time and last output line on a TTY, and
    off a terminal the step's own progress lines (certify's `jetcheck: [n/N] area done ...`) as they come."""

    def __init__(self, total: int, stream: TextIO):
        self.total, self.stream = total, stream
        self.live = stream.isatty()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, index: int, name: str, log: Path | None = None) -> float:
        self._prefix = f"[{index}/{self.total}] {name:<8}"
        started = time.monotonic()
        self._stop.clear()
        if not self.live:
            print(f"{self._prefix} ...", file=self.stream, flush=True)
        if log is not None or self.live:
            work = self._refresh if self.live else self._relay
            self._thread = threading.Thread(target=work, args=(started, log), daemon=True)
            self._thread.start()
        return started

    def _relay(self, _started: float, log: Path) -> None:
        """Print the step's progress lines from its log as they are written, and the rest once it ends."""
        offset = 0
        while True:
            stopping = self._stop.wait(0.5)
            offset = self._print_progress(log, offset)
            if stopping:
                return

    def _print_progress(self, log: Path, offset: int) -> int:
        try:
            with open(log, "rb") as fh:
                fh.seek(offset)
                text = fh.read()
        except OSError:
            return offset
        complete = text[: text.rfind(b"\n") + 1]  # a line still being written waits for the next turn
        for line in complete.decode("utf-8", "replace").splitlines():
            if line.startswith(STEP_PROGRESS):
                print(f"    {line}", file=self.stream, flush=True)
        return offset + len(complete)

    def _refresh(self, started: float, log: Path | None) -> None:
        width = 100
        while not self._stop.wait(0.5):
            last = _last_line(log) if log else ""
            line = f"{self._prefix} {time.monotonic() - started:6.1f} s  {last}"[:width]
            self.stream.write("\r" + line.ljust(width))
            self.stream.flush()

    def finish(self, started: float, outcome: str) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if self.live:
                self.stream.write("\r" + " " * 100 + "\r")
        print(f"{self._prefix} {outcome} in {time.monotonic() - started:.1f} s", file=self.stream, flush=True)


def _last_line(log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log) - 400))
            lines = [line for line in fh.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _tail(log: Path, count: int = 15) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-count:])


def run_step(step: Step, log: Path) -> tuple[bool, str]:
    """Run one step with its output in `log`; (completed, outcome text). Completed = produced its output.

    Interrupted or timed out, the step is stopped with what it started (a server, Locust, the run's streams)."""
    with open(log, "wb") as out:
        try:
            with children.running(
                step.argv,
                children.NESTED_STOP_GRACE_S,  # a step is a jetcheck command stopping its own child
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **step.env},
            ) as process:
                code = process.wait(timeout=step.timeout_s)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {step.timeout_s:.0f} s"
    produced = step.produces.exists()
    if not produced:
        return False, f"failed (exit {code}, no {step.produces.name})"
    return True, "done" if code == 0 else f"done (exit {code})"


def default_run_dir() -> Path:
    return Path(dt.datetime.now().strftime("jetcheck-run-%Y%m%d-%H%M%S"))


def main_job(
    run_dir: Path,
    steps: list[Step],
    master: str | None = None,
    stream: TextIO | None = None,
    strict: bool = False,
    preflight: Callable[[], None] | None = None,
) -> int:
    """Run `steps` (certify, load: `default_steps`), then the report, into one run folder; print index.html's path.

    The report is the job's product: exit 0 once it is written, 3 when a step did not complete (certify's
    results included: an incomplete result set is never a pass). With `strict`, a MUST failure exits 1 as
    `jetcheck certify` does (for a CI gate); jetcheck.verdict decides both. `preflight` (certify's: the server
    binary is there, a URL target answers, with TLS when required, and has JetStream) runs before any step or
    folder; its TargetError is the job's bad-input line, since no step could do anything with that target."""
    # Spark and matplotlib: only once a job runs
    from jetcheck.reports.build import build_report
    from jetcheck.reports.warm import WarmSession, warms

    stream = stream or sys.stderr
    if (run_dir / CERTIFY_DIR).exists() or (run_dir / LOAD_DIR).exists():
        raise ConfigError(f"--out {run_dir} already holds a run: choose a new folder")
    if preflight is not None:
        preflight()
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    progress = Progress(len(steps) + 1, stream)
    incomplete = []
    print(f"jetcheck run -> {run_dir}", file=stream, flush=True)
    # the report's Spark starts and warms up while the steps run (jetcheck.reports.warm), its JVM's output in logs/
    warm = WarmSession(master, logs / "spark.log") if warms(master) else None
    try:
        for index, step in enumerate(steps, start=1):
            log = logs / f"{step.name}.log"
            started = progress.start(index, step.name, log)
            try:
                completed, outcome = run_step(step, log)
            except KeyboardInterrupt:
                progress.finish(started, "interrupted")
                raise
            progress.finish(started, outcome)
            if not completed:
                incomplete.append(step.name)
                print(f"  {step.name} log ({log}):\n{_tail(log)}", file=stream, flush=True)
        started = progress.start(len(steps) + 1, "report")
        try:
            spark = warm.take() if warm is not None else None
            outcome = build_report([str(run_dir)], out=run_dir / REPORT_DIR, master=master, spark=spark)
        except ConfigError as exc:
            progress.finish(started, f"failed: {exc}")
            return EXIT_STEP_FAILED
    finally:
        if warm is not None:
            warm.close()
    progress.finish(started, "done")
    print(outcome.index.resolve())
    for line in outcome.verdict_lines or ["no conformance results"]:
        print(f"verdict: {line}", file=stream, flush=True)
    if incomplete:
        print(f"incomplete run: {', '.join(incomplete)} did not finish", file=stream, flush=True)
    if incomplete or not outcome.complete:
        return EXIT_STEP_FAILED
    return outcome.exit_code(strict)


def validate(args: argparse.Namespace) -> Config:
    """The target and its credentials resolved and checked as certify does (a --server-version with a URL is
    refused there; the run's other options, the run prefix among them, come from the table); nothing is started."""
    cli = {name: args.given.get(name) for name in ("server", "server_version", *CREDENTIAL_OPTIONS)}
    return resolve(cli=cli, env=os.environ, flag=cli_flag)


def run(args: argparse.Namespace) -> int:
    from jetcheck.conformance.certify import preflight

    cfg = validate(args)
    run_dir = Path(args.out) if args.out else default_run_dir()
    steps = default_steps(
        run_dir,
        cfg.run_prefix,  # the prefix preflight claims on a URL target: JETCHECK_RUN_PREFIX or a fresh one
        args.given.get("server_version"),  # not given: certify and load take the default (or the variable) alike
        cfg.server,
        cfg.credentials(),
    )
    return main_job(run_dir, steps, args.master, strict=args.strict, preflight=functools.partial(preflight, cfg))


# `jetcheck run --help`
DESCRIPTION = (
    "Certify against the embedded nats-server (or --server with its credentials), run a ~20 s "
    "publish+consume load, and write the report into one run folder; prints the path of its index.html and "
    "the verdict. Exit 0 once the report is written, 3 when a step (or certify's results) did not complete; "
    "with --strict, 1 when a MUST check failed, 4 when most MUST rules of the profile did not run."
)
