"""`jetcheck run` drives its steps, shows progress, writes the report and sets the exit code."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from jetcheck.errors import ConfigError
from jetcheck.fixtures.target import Credentials
from jetcheck.records import RESULTS_FILE
from jetcheck.run import EXIT_MUST_FAILED, EXIT_OK, EXIT_STEP_FAILED, Progress, Step, default_steps, main_job

WRITE_CERTIFY = (
    "import sys; from pathlib import Path; from jetcheck.testing.synthetic import *; "
    "write_certify_run(Path(sys.argv[1]), sample_results(failing=tuple(sys.argv[2:])))"
)
WRITE_LOAD = (
    "import sys; from pathlib import Path; from jetcheck.testing.synthetic import *; "
    "write_load_run(Path(sys.argv[1]), LoadSpec(records=5000, duration_s=3))"
)


def _steps(run: Path, failing: tuple[str, ...], load_ok: bool = True) -> list[Step]:
    load = [sys.executable, "-c", WRITE_LOAD, str(run / "load")] if load_ok else [sys.executable, "-c", "exit(4)"]
    return [
        Step(
            "certify",
            [sys.executable, "-c", WRITE_CERTIFY, str(run / "certify"), *failing],
            run / "certify" / RESULTS_FILE,
            60,
        ),
        Step("load", load, run / "load" / "load.json", 60),
    ]


def test_must_failure_is_the_verdict_and_the_report_is_written(spark, tmp_path, capsys):
    """A MUST failure in certify is printed as the verdict; the report is written, its path printed, exit 0."""
    run = tmp_path / "run"
    progress = io.StringIO()
    code = main_job(run, _steps(run, ("publish.rule-02",)), stream=progress)
    assert code == EXIT_OK
    verdict = "verdict: server 2.15.1: 1 MUST server rule fails, 19/24 server rules pass (3 not in profile, 1 not run)"
    assert verdict in progress.getvalue()
    index = run / "report" / "index.html"
    assert capsys.readouterr().out.strip() == str(index.resolve())
    assert "timeline" in index.read_text()
    lines = progress.getvalue().splitlines()
    assert [line.split()[:2] for line in lines if line.startswith("[")] == [
        ["[1/3]", "certify"],
        ["[1/3]", "certify"],
        ["[2/3]", "load"],
        ["[2/3]", "load"],
        ["[3/3]", "report"],
        ["[3/3]", "report"],
    ]


def test_strict_run_exits_1_on_a_must_failure(spark, tmp_path):
    """With strict, a MUST failure exits 1, as certify does, after writing the report."""
    run = tmp_path / "run"
    code = main_job(run, _steps(run, ("publish.rule-02",)), stream=io.StringIO(), strict=True)
    assert code == EXIT_MUST_FAILED
    assert (run / "report" / "index.html").exists()


def test_failed_step_exits_3_and_reports_what_exists(tmp_path, capsys):
    """A step that ends without its output makes the job exit 3; the report covers the other steps."""
    run = tmp_path / "run"
    progress = io.StringIO()
    code = main_job(run, _steps(run, (), load_ok=False), stream=progress)
    assert code == EXIT_STEP_FAILED
    assert "load     failed (exit 4, no load.json)" in progress.getvalue()
    assert (run / "report" / "index.html").exists()
    assert (run / "logs" / "load.log").exists()


def test_existing_run_folder_is_refused(tmp_path):
    """Reusing a run folder would append to its results: the job refuses it."""
    (tmp_path / "certify").mkdir()
    with pytest.raises(ConfigError, match="already holds a run"):
        main_job(tmp_path, [])


def test_default_steps_pass_the_server_version_to_certify_and_load(tmp_path):
    """--server-version reaches both subprocesses; load runs the mixed scenario for about 20 s."""
    certify, load = default_steps(tmp_path, "jc0001", "2.10.25")
    assert certify.argv[1:4] == ["-m", "jetcheck.cli", "certify"]
    assert certify.argv[-2:] == ["--server-version", "2.10.25"]
    assert load.argv[3:8] == ["load", "--scenario", "mixed", "--duration", "20s"]
    assert load.argv[-2:] == ["--server-version", "2.10.25"]


def test_a_url_target_reaches_both_steps_and_its_secrets_only_their_environment(tmp_path):
    """--server and credentials reach certify and load; the password is in their environment, never in an argv."""
    credentials = Credentials(user="vendor", password="s3cret-pw", tls_ca="/certs/ca.pem")
    steps = default_steps(tmp_path, "jc0001", None, "tls://nats.example:4222", credentials)
    for step in steps:
        assert step.argv[step.argv.index("--server") + 1] == "tls://nats.example:4222"
        assert not any("s3cret-pw" in arg for arg in step.argv)
        assert step.env == {
            "JETCHECK_USER": "vendor",
            "JETCHECK_PASSWORD": "s3cret-pw",
            "JETCHECK_TLS_CA": "/certs/ca.pem",
        }


def test_both_steps_create_under_the_run_prefix_preflight_claimed(tmp_path, monkeypatch):
    """`jetcheck run` resolves one run prefix (JETCHECK_RUN_PREFIX or a fresh one): its preflight claims it on the
    target, and certify and load create under it, so one prefix names all the run created."""
    import argparse

    import jetcheck.run

    def handed(prefix_variable: str | None) -> tuple[str, set[str]]:
        if prefix_variable is None:
            monkeypatch.delenv("JETCHECK_RUN_PREFIX", raising=False)
        else:
            monkeypatch.setenv("JETCHECK_RUN_PREFIX", prefix_variable)
        jobs = []
        monkeypatch.setattr(jetcheck.run, "main_job", lambda run_dir, steps, *_, **kw: jobs.append((steps, kw)) or 0)
        args = argparse.Namespace(out=str(tmp_path / "run"), master=None, strict=False, given={})
        jetcheck.run.run(args)
        ((steps, options),) = jobs
        claimed = options["preflight"].args[0].run_prefix  # the Config preflight is called with
        return claimed, {step.argv[step.argv.index("--run-prefix") + 1] for step in steps}

    claimed, used = handed(None)
    assert claimed.startswith("jc") and used == {claimed}
    assert handed(None)[0] != claimed  # fresh for every run
    assert handed("vendor1") == ("vendor1", {"vendor1"})


def test_off_a_terminal_run_relays_the_steps_progress_lines(tmp_path):
    """Off a terminal `jetcheck run` passes on certify's per-area progress lines as the step writes them, and
    nothing else of the step's output."""
    stream = io.StringIO()
    log = tmp_path / "certify.log"
    log.write_text("")
    progress = Progress(2, stream)
    started = progress.start(1, "certify", log)
    with open(log, "a") as fh:
        fh.write("jetcheck: 26 checks in 2 areas\n....\njetcheck: [9/26] dedup done: 9 pass; 0 failing so far\n")
        fh.write("jetcheck: [26/26] purge done: 17 pass; 0 failing so far\nresults: out/results.jsonl\n")
    progress.finish(started, "done")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/2] certify  ..."
    assert lines[1:3] == [
        "    jetcheck: [9/26] dedup done: 9 pass; 0 failing so far",
        "    jetcheck: [26/26] purge done: 17 pass; 0 failing so far",
    ]
    assert lines[3].startswith("[1/2] certify  done in ")
    assert len(lines) == 4
