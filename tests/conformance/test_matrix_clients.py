"""`jetcheck matrix --clients`: one result set per server version and client, compared both ways, and the report
shows the clients side by side with each client's failing client rules."""

from __future__ import annotations

import pytest

from jetcheck import cli
from jetcheck.conformance.matrix import client_differences, differences
from jetcheck.records import RESULTS_FILE, CheckResult
from jetcheck.verdict import COMPLETED_EXITS


def _result(rule: str, status: str, version: str, client: str) -> CheckResult:
    return CheckResult(id=rule, status=status, area=rule.split(".")[0], title="t.", level="MUST", source="s",
                       min_version="2.2.0", server_version=version, client={"name": client, "version": "1"},
                       duration_s=0.1, check=rule)  # fmt: skip


def test_a_rule_that_differs_only_between_clients_is_a_client_finding():
    """Between clients, a rule with the same status on every version for each client is named a client finding;
    one that also changes with the version is not."""
    runs = {
        ("2.12.8", "nats-py"): [_result("heartbeat.a", "pass", "2.12.8", "nats-py"),
                                _result("purge.b", "fail", "2.12.8", "nats-py")],
        ("2.15.1", "nats-py"): [_result("heartbeat.a", "pass", "2.15.1", "nats-py"),
                                _result("purge.b", "pass", "2.15.1", "nats-py")],
        ("2.12.8", "nats.js"): [_result("heartbeat.a", "fail", "2.12.8", "nats.js"),
                                _result("purge.b", "pass", "2.12.8", "nats.js"),
                                _result("kv.c", "skip", "2.12.8", "nats.js")],
        ("2.15.1", "nats.js"): [_result("heartbeat.a", "fail", "2.15.1", "nats.js"),
                                _result("purge.b", "pass", "2.15.1", "nats.js"),
                                _result("kv.c", "skip", "2.15.1", "nats.js")],
    }  # fmt: skip
    for version in ("2.12.8", "2.15.1"):
        runs[(version, "nats-py")].append(_result("kv.c", "fail", version, "nats-py"))
    assert client_differences(runs) == [
        "heartbeat.a: nats-py pass, nats.js fail (on every version: a client finding)",
        "purge.b: 2.12.8: nats-py fail, nats.js pass",
        "not compared where a client skipped them or did not run them: 1 rules",
    ]


def test_names_a_run_generates_are_no_difference_between_versions():
    """Consumer names (nuids) and the run prefix in a driver's reports change every run, not with the version."""

    def reported(version: str, prefix: str, nuid: str) -> CheckResult:
        observed = {"client_reports": [f'error: consumer_not_found {{"name":"{nuid}_1","stream":"{prefix}_S307"}}']}
        return CheckResult(**{**_result("ordered.x", "pass", version, "nats.js").__dict__, "observed": observed})

    assert differences({"2.12.8": [reported("2.12.8", "jc396fca", "U2Xq671orwf3T8BF3DWO5J")],
                        "2.15.1": [reported("2.15.1", "jc8eda4c", "ptSKnFfPrN5zPv2OQuhYfJ")]}) == []  # fmt: skip


@pytest.mark.parametrize("value", ["nats-rs", "nats-py,,", "nats-py,nats-py", "", "nats.js@x"])
def test_bad_clients_are_one_line_and_exit_2(value, tmp_path, capsys):
    code = cli.main(["matrix", "--versions", "2.12.8", "--clients", value, "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("jetcheck: --clients") and err.count("\n") == 1, err
    assert not (tmp_path / "m").exists()


def test_two_clients_on_one_version_write_both_result_sets_and_the_report_shows_both(tmp_path, capsys):
    """The real command with a small selection: OUT/<version>/<client>/ for each client, the counts per version
    and client, then `report --in OUT` finds both result sets and shows a column and a section per client."""
    out = tmp_path / "matrix"
    code = cli.main(["matrix", "--versions", "2.12.8", "--clients", "nats-py,nats.js", "--out", str(out),
                     "--", "-m", "heartbeat"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code in COMPLETED_EXITS, printed
    for client in ("nats-py", "nats.js"):
        assert (out / "2.12.8" / client / RESULTS_FILE).is_file()
        assert f"2.12.8    {client:<9}" in printed
    assert "what differs between clients:" in printed
    report = tmp_path / "report"
    assert cli.main(["report", "--in", str(out), "--out", str(report)]) in COMPLETED_EXITS
    html = (report / "index.html").read_text()
    assert "server 2.12.8 · nats-py " in html and "server 2.12.8 · nats.js " in html
    summary = (report / "summary.md").read_text()
    for client in ("nats-py", "nats.js"):
        assert f"### {client} " in summary, summary


@pytest.mark.parametrize(
    ("command", "option"),
    [("matrix", "--clients"), ("matrix", "--versions"), ("matrix", "--out"), ("certify", "--out"),
     ("certify", "--server")],
)  # fmt: skip
def test_an_option_given_only_the_remainder_marker_is_one_line_and_exit_2(command, option, tmp_path, capsys):
    """`--out=--` reaches a command that ends in a `--` remainder as a list (argparse), which must be refused, not a
    traceback, and not a run into a folder named `[]`."""
    given = ["--versions", "2.12.8", "--out", str(tmp_path / "m")] if command == "matrix" else []
    argv = [command, *given, f"{option}=--"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"jetcheck: {option}: expected a value, not --\n"
