"""One option table (jetcheck.options.TABLE): every command's parser, the pytest plugin's options and ini keys and
Locust's parser are generated from it, so each option has one name, parser, default, variable and help."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from jetcheck import cli
from jetcheck.conformance import plugin
from jetcheck.errors import ConfigError
from jetcheck.load.cli import LOCUSTFILE
from jetcheck.options import COMMANDS, LOCUST, PYTEST, TABLE, duration, new_run_prefix, options_for, resolve


def command_parser(command: str) -> argparse.ArgumentParser:
    subparsers = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[command]


def flags_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        flag: action
        for action in parser._actions
        for flag in action.option_strings
        if flag != "-h" and flag != "--help"
    }


TAKEN = [(command, option) for command in COMMANDS for option in options_for(command)]


@pytest.mark.parametrize(("command", "option"), TAKEN, ids=[f"{c}-{o.name}" for c, o in TAKEN])
def test_each_command_takes_the_tables_option_with_its_help_and_variable(command, option):
    """`jetcheck <command> --<name>` exists, with the table's help and, where it has one, its variable named."""
    action = flags_of(command_parser(command))[option.cli_flag]
    assert action.dest == option.name
    assert action.help == option.described()
    if option.env:
        assert action.help.endswith(f"[{option.env}]")
    assert action.required == option.required


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_has_no_flag_outside_the_table(command):
    """No command declares an option of its own beside the table."""
    assert set(flags_of(command_parser(command))) == {option.cli_flag for option in options_for(command)}


@pytest.mark.parametrize(
    ("argv", "variable", "value", "attribute", "expected"),
    [
        (["certify"], "JETCHECK_CHECK_TIMEOUT", "2m", "check_timeout", 120.0),
        (["load", "--scenario", "mixed"], "JETCHECK_PAYLOAD", "256", "payload", 256),
        (["load", "--scenario", "mixed"], "JETCHECK_DURATION", "1h30m", "duration", 5400.0),
        (["load", "--scenario", "mixed"], "JETCHECK_RUN_PREFIX", "mine", "run_prefix", "mine"),
        (["matrix"], "JETCHECK_VERSIONS", "2.12.8,2.15.1", "versions", ["2.12.8", "2.15.1"]),
        (["report", "--in", "x"], "JETCHECK_MAX_P99_RISE", "0.5", "max_p99_rise", 0.5),
        (["run"], "JETCHECK_STRICT", "yes", "strict", True),
    ],
)
def test_a_variable_gives_a_command_its_value(monkeypatch, argv, variable, value, attribute, expected):
    """Every command reads its options' variables the way certify always did, parsed by the same table."""
    monkeypatch.setenv(variable, value)
    assert getattr(cli.build_parser().parse_args(argv), attribute) == expected


def test_a_bad_variable_names_itself(monkeypatch):
    monkeypatch.setenv("JETCHECK_PAYLOAD", "-1")
    with pytest.raises(ConfigError, match=r"^JETCHECK_PAYLOAD: expected a payload size in bytes from 0 to"):
        cli.build_parser().parse_args(["load", "--scenario", "mixed"])


class RecordingPytestParser:
    """What the plugin's pytest_addoption declares (pytest's own Parser is private to it)."""

    def __init__(self) -> None:
        self.options: dict[str, dict] = {}
        self.ini: dict[str, str] = {}

    def getgroup(self, name: str, description: str = "") -> RecordingPytestParser:
        return self

    def addoption(self, flag: str, **kwargs) -> None:
        self.options[flag] = kwargs

    def addini(self, name: str, help: str) -> None:
        self.ini[name] = help


def test_the_pytest_plugin_takes_the_tables_options_and_ini_keys():
    """--jetcheck-<name> and ini jetcheck_<name> for each option of a conformance run, with the table's help."""
    recorded = RecordingPytestParser()
    plugin.pytest_addoption(recorded)
    options = options_for(PYTEST)
    assert set(recorded.options) == {option.flag for option in options}
    assert recorded.ini == {option.ini: option.help for option in options}
    for option in options:
        assert recorded.options[option.flag]["help"] == f"{option.help} [env {option.env}, ini {option.ini}]"
        assert recorded.options[option.flag]["dest"] == "jetcheck_" + option.name


# Locust monkey-patches the process on import: its parser is read in a child
LOCUST_PARSER = """
import importlib.util, json, sys
from locust.argument_parser import get_parser
spec = importlib.util.spec_from_file_location("jetcheck_locustfile", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
parser = get_parser(default_config_files=[])
print(json.dumps({
    flag: {"dest": a.dest, "help": a.help, "env": getattr(a, "env_var", None), "default": a.default,
           "flags": a.option_strings}
    for a in parser._actions for flag in a.option_strings if flag.startswith("--jetcheck-")
}, default=str))
"""


@pytest.fixture(scope="module")
def locust_flags() -> dict[str, dict]:
    found = subprocess.run(
        [sys.executable, "-c", LOCUST_PARSER, str(LOCUSTFILE)], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(found.stdout)


def test_the_locustfile_takes_the_tables_options(locust_flags):
    """--jetcheck-<name> for each option the locustfile takes (and earlier spellings), with the table's help,
    variable and default; nothing else."""
    options = options_for(LOCUST)
    assert set(locust_flags) == {flag for option in options for flag in (option.flag, *option.aliases)}
    for option in options:
        found = locust_flags[option.flag]
        assert (found["dest"], found["help"], found["env"]) == ("jetcheck_" + option.name, option.help, option.env)
        assert found["flags"] == [option.flag, *option.aliases]


def test_every_option_is_taken_somewhere_and_named_once():
    names = [option.name for option in TABLE]
    assert len(names) == len(set(names))
    for option in TABLE:
        assert option.commands, option.name
        assert set(option.commands) <= {*COMMANDS, PYTEST, LOCUST}
        assert set(option.variants) <= set(option.commands), option.name


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("2m", 120.0), ("1h30m", 5400.0), ("1h30m10s", 5410.0), (" 30s ", 30.0)],
)
def test_one_duration_syntax(text, seconds):
    """Every duration option (load's --duration, certify's --check-timeout) reads the same syntax, Locust's -t."""
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "1d", "-5s", "0", "0s", "5 m", "1e3", "0.5s", "1.5", "169h"])
def test_a_bad_duration_is_refused(text):
    with pytest.raises(ConfigError, match=r"^expected .*duration"):
        duration(text)


def test_the_duration_options_share_the_parser():
    durations = [option for option in TABLE if option.parse is duration]
    assert {option.name for option in durations} == {"duration", "check_timeout"}


def test_run_prefixes_come_from_one_generator():
    """certify's, load's and the pytest plugin's default run prefix is new_run_prefix's."""
    for command in ("certify", "load", PYTEST):
        (option,) = (o for o in options_for(command) if o.name == "run_prefix")
        assert option.default is new_run_prefix


def test_certify_hands_pytest_the_options_it_resolved(monkeypatch):
    """The variables certify sets for its pytest are read back by the plugin as the same options."""
    from jetcheck.conformance.certify import pytest_environment, validate

    for name in [n for n in os.environ if n.startswith("JETCHECK_")]:
        monkeypatch.delenv(name)
    args = cli.build_parser().parse_args(
        ["certify", "--check-timeout", "2m", "--clean-previous", "--profile", "thorough"]
    )
    cfg = validate(args)
    assert resolve(cli={}, env=pytest_environment(cfg)) == cfg


def test_a_spark_master_with_a_broken_address_is_refused_in_one_line(capsys):
    """--master spark://[ (an unclosed IPv6 bracket, which urlsplit rejects) is a one-line refusal, exit 2."""
    assert cli.validate(["report", "--in", "x", "--master", "spark://["]) == 2
    assert capsys.readouterr().err.startswith("jetcheck: --master: expected a Spark master")
