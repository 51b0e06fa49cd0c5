"""Bad input is one `jetcheck: ` line on stderr and exit 2, never a traceback: one test per defect found.

Each runs `jetcheck.cli.main` in this process. Where a value used to be accepted, the target is a closed port, so
an accepted value shows as "cannot connect" instead of starting any load.
"""

from __future__ import annotations

import json

import pytest

from jetcheck import cli
from jetcheck.cli import build_parser, main
from jetcheck.load import cli as load_cli
from jetcheck.options import resolve
from jetcheck.records import RESULTS_FILE, RUN_FILE, CheckResult

CLOSED = "nats://127.0.0.1:1"  # nothing listens on port 1
CANNOT_CONNECT = f"cannot connect to {CLOSED}"


@pytest.fixture(autouse=True)
def _no_ambient_options(monkeypatch):
    # tox sets JETCHECK_SERVER_VERSION; these tests give every option on the command line
    monkeypatch.delenv("JETCHECK_SERVER_VERSION", raising=False)


def bad_input_line(capsys, *argv: str) -> str:
    """Run jetcheck with `argv`; assert exit 2 with exactly one `jetcheck: ` line on stderr; return the line
    without its `jetcheck: `."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("jetcheck: "), err
    return err.strip().removeprefix("jetcheck: ")


def a_result(**changes) -> CheckResult:
    fields = {
        "id": "publish.rule-01",
        "status": "pass",
        "area": "publish",
        "title": "a publish is acknowledged",
        "level": "MUST",
        "source": "ADR-1",
        "min_version": "2.9.0",
        "server_version": "2.15.1",
        "client": {"name": "nats-py", "version": "2.16.0"},
        "duration_s": 0.1,
    }
    return CheckResult(**{**fields, **changes})


@pytest.fixture
def certify_folder(tmp_path):
    folder = tmp_path / "certify"
    folder.mkdir()
    (folder / RUN_FILE).write_text(json.dumps({"server": {"version": "2.15.1"}, "client": {"name": "nats-py"}}))
    return folder


def test_a_truncated_results_line_names_the_file_and_line(capsys, tmp_path, certify_folder):
    """A results.jsonl cut off mid-line (a certify that was killed) is one line naming file:line, not a
    JSONDecodeError traceback."""
    whole = a_result().to_json()
    (certify_folder / RESULTS_FILE).write_text(whole + "\n" + whole[: len(whole) // 2])
    line = bad_input_line(capsys, "report", "--in", str(certify_folder), "--out", str(tmp_path / "report"))
    assert line.startswith(f"{certify_folder / RESULTS_FILE}:2: not a JSON line")


def test_a_results_line_missing_fields_names_them(capsys, tmp_path, certify_folder):
    """A JSON line without the fields of a check result is refused naming the file, line and missing fields."""
    (certify_folder / RESULTS_FILE).write_text(json.dumps({"id": "publish.rule-01", "status": "pass"}) + "\n")
    line = bad_input_line(capsys, "report", "--in", str(certify_folder), "--out", str(tmp_path / "report"))
    assert line.startswith(f"{certify_folder / RESULTS_FILE}:1: not a check result: missing field(s) area, title")


def test_a_run_json_whose_collected_count_is_not_a_number_is_one_line(capsys, tmp_path, certify_folder):
    """run.json's `collected` (which the verdict compares with the results) must be a whole number; a list there is
    one line naming the file and field, not a TypeError from the verdict."""
    (certify_folder / RUN_FILE).write_text(json.dumps({"server": {"version": "2.15.1"}, "collected": []}))
    (certify_folder / RESULTS_FILE).write_text(a_result().to_json() + "\n")
    line = bad_input_line(capsys, "report", "--in", str(certify_folder), "--out", str(tmp_path / "report"))
    assert line.startswith(f"{certify_folder / RUN_FILE}: field collected is list, not int")


def test_a_tls_ca_that_is_not_a_certificate_is_one_line(capsys, tmp_path):
    """--tls-ca naming a file that holds no certificate is refused naming the file (was an ssl traceback)."""
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    line = bad_input_line(capsys, "certify", "--server", CLOSED, "--tls-ca", str(garbage), "--out", str(tmp_path))
    assert line == f"--tls-ca: TLS CA file {garbage}: not a PEM CA certificate (NO_CERTIFICATE_OR_CRL_FOUND)"


def test_rate_zero_is_refused_not_run_closed_loop(capsys):
    """--rate 0 used to run closed loop at full speed; it is refused with the way to ask for closed loop."""
    line = bad_input_line(capsys, "load", "--scenario", "publish-async", "--rate", "0", "--server", CLOSED)
    assert line.startswith("--rate: expected a positive number of operations per second, not '0'")
    assert "--max" in line


def test_negative_payload_is_refused(capsys):
    """--payload -1 used to be accepted (and recorded in load.json)."""
    line = bad_input_line(capsys, "load", "--scenario", "publish-async", "--payload", "-1", "--server", CLOSED)
    assert line == "--payload: expected a payload size in bytes from 0 to 67108864, not '-1'"


@pytest.mark.parametrize("argv", [["--duration", "-5s"], ["--duration=-5s"]], ids=["separate", "equals"])
def test_negative_duration_says_it_must_be_positive(capsys, argv):
    """`--duration -5s` used to be argparse's "expected one argument" (with a usage block)."""
    line = bad_input_line(capsys, "load", "--scenario", "publish-async", *argv, "--server", CLOSED)
    assert (
        line
        == "--duration: expected a positive number of seconds or a duration such as 90, 90s, 2m or 1h30m, not '-5s'"
    )


def test_run_against_an_unreachable_server_stops_before_any_step(capsys, tmp_path):
    """`jetcheck run` used to run certify, load and report against a closed port and exit 3 without a verdict;
    its preflight now stops it with exit 2 before any step has run or any folder was made."""
    run = tmp_path / "run"
    line = bad_input_line(capsys, "run", "--server", CLOSED, "--out", str(run))
    assert line.startswith(CANNOT_CONNECT)
    assert not run.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["certify", "--server", CLOSED, "--server-version", "2.12.8"],
        ["run", "--server", CLOSED, "--server-version", "2.12.8"],
        ["load", "--scenario", "publish-async", "--server", CLOSED, "--server-version", "2.12.8"],
        ["certify", "--server", "system", "--server-version", "2.12.8"],
    ],
    ids=["certify", "run", "load", "system"],
)
def test_server_version_with_a_server_jetcheck_does_not_install_is_refused(capsys, tmp_path, argv):
    """--server-version is not used for a URL (or the system's server): given explicitly it is refused, instead of
    being echoed and recorded in run.json as if it had been used."""
    line = bad_input_line(capsys, *argv, "--out", str(tmp_path / "out"))
    assert line.startswith("--server-version: a server version applies to the servers jetcheck installs")


def test_server_version_is_not_recorded_for_a_url_target():
    """Without --server-version a URL target's options (echoed, and in run.json) carry no version it did not use."""
    assert resolve(cli={"server": CLOSED}, env={}).redacted()["server_version"] == ""
    assert resolve(cli={}, env={}).server_version != ""


def test_an_unreachable_monitor_is_refused_at_start(capsys):
    """An explicit --monitor that does not answer used to leave the run without server samples, silently."""
    line = bad_input_line(
        capsys, "load", "--scenario", "publish-async", "--server", CLOSED, "--monitor", "http://127.0.0.1:1"
    )
    assert line == "--monitor http://127.0.0.1:1 does not answer /varz: no server samples could be recorded"


def test_mixed_runs_with_its_own_defaults(capsys):
    """`load --scenario mixed` used to refuse its own defaults (1 user, 1 consumer); users default to consumers+1."""
    line = bad_input_line(capsys, "load", "--scenario", "mixed", "--server", CLOSED)
    assert line.startswith(CANNOT_CONNECT)
    args = build_parser().parse_args(["load", "--scenario", "mixed", "--consumers", "2"])
    load_cli.validate(args)
    assert (args.users, args.consumers, args.processes) == (3, 2, 3)


def test_processes_without_users_gives_each_process_a_user(capsys):
    """`--processes 2` alone used to be refused (processes > users); users now default to the processes."""
    line = bad_input_line(capsys, "load", "--scenario", "publish-async", "--processes", "2", "--server", CLOSED)
    assert line.startswith(CANNOT_CONNECT)
    args = build_parser().parse_args(["load", "--scenario", "publish-async", "--processes", "2"])
    load_cli.validate(args)
    assert (args.users, args.processes) == (2, 2)


def test_validate_stops_before_anything_starts(capsys):
    """validate() accepts good options without starting a server (a closed port would otherwise refuse them)."""
    assert cli.validate(["load", "--scenario", "mixed", "--server", CLOSED]) == 0
    assert cli.validate(["certify", "--server", CLOSED]) == 0
    assert capsys.readouterr().err == ""
