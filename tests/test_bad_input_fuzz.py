"""No traceback escapes jetcheck, whatever the options and input files: Hypothesis over every option of every
command and over corrupted results.jsonl, run.json, load.json and Parquet logs.

Options go through `jetcheck.cli.validate`, which parses and checks them as `main` does and stops before a
command's first step, so a value that happens to be valid starts no server, load or Spark. Every outcome must be
0 (it would run) or 2 with one `jetcheck: ` line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jetcheck import cli
from jetcheck.records import LOAD_FILE, OPS_DIR, RESULTS_FILE, RUN_FILE, SAMPLES_DIR
from jetcheck.testing.synthetic import LoadSpec, sample_results, write_certify_run, write_load_run

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(run: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = run(argv)
    return code, err.getvalue()


def assert_clean(code: int, err: str, argv: list[str]) -> None:
    event(f"exit {code}")  # --hypothesis-show-statistics: how many examples were refused, how many accepted
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert err.startswith("jetcheck: "), (argv, err)
        assert len(err.strip().splitlines()) == 1, (argv, err)


@pytest.fixture(autouse=True)
def _no_ambient_options(monkeypatch):
    for name in [name for name in __import__("os").environ if name.startswith("JETCHECK_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Paths an option may name: missing, a directory, garbage, empty, binary, and valid result folders."""
    root = tmp_path_factory.mktemp("fuzz-files")
    (root / "garbage.txt").write_text("this is not what you think\n")
    (root / "empty").write_bytes(b"")
    (root / "binary").write_bytes(bytes(range(256)))
    (root / "dir").mkdir()
    write_certify_run(root / "certify", sample_results(rules=6))
    write_load_run(root / "load", LoadSpec(records=200, duration_s=2.0, processes=1))
    return {
        "missing": root / "no-such-file",
        "dir": root / "dir",
        "garbage": root / "garbage.txt",
        "empty": root / "empty",
        "binary": root / "binary",
        "certify": root / "certify",
        "load": root / "load",
    }


def _value_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of a command that takes one value (flags and -- remainders are not fuzzed)."""
    return [
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings and action.nargs is None and action.option_strings[-1] != "--help"
    ]


def _commands() -> dict[str, argparse.ArgumentParser]:
    subparsers = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


COMMANDS = _commands()
OPTIONS = {name: _value_options(parser) for name, parser in COMMANDS.items()}

TRICKY = [
    "",
    " ",
    "0",
    "-0",
    "-1",
    "1",
    "2",
    "-5s",
    "0s",
    "1e309",
    "-1e3",
    "nan",
    "inf",
    "-inf",
    "1.5",
    "99999999999999999999",
    "--",
    "-",
    "=",
    "local",
    "system",
    "cluster",
    "nats://",
    "nats://127.0.0.1:99999",
    "nats://u:p@127.0.0.1:x",
    "tls://[::1",
    "http://127.0.0.1:1",
    "https://",
    "2.12.8",
    "2.x",
    "2.9.10,2.9.10",
    ",",
    "local[*]",
    "spark://",
    "publish-async",
    "mixed",
    "fast",
    "nats-py+",
    "nats-py,nats.js",
    "nats.go@1.55.0,nats-py",
    "jc",
    "a" * 300,
    "30s",
    "1h",
    "2m30s",
    "1.5.5.5",
]
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
numbers = st.one_of(st.integers(-(10**20), 10**20).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str))


@st.composite
def option_value(draw, files: dict[str, Path]) -> str:
    kind = draw(st.sampled_from(["tricky", "text", "number", "path"]))
    if kind == "tricky":
        return draw(st.sampled_from(TRICKY))
    if kind == "text":
        return draw(text)
    if kind == "number":
        return draw(numbers)
    return str(draw(st.sampled_from(sorted(files.values()))))


def base_argv(command: str, files: dict[str, Path], scratch: Path) -> list[str]:
    """The least a command needs to run, with everything it would write under `scratch`."""
    return {
        "certify": ["certify", "--out", str(scratch / "certify")],
        "matrix": ["matrix", "--versions", "2.15.1", "--out", str(scratch / "matrix")],
        "bisect": ["bisect", "--out", str(scratch / "bisect")],
        "diff": ["diff", "--out", str(scratch / "diff")],
        "load": ["load", "--scenario", "publish-async", "--out", str(scratch / "load")],
        "report": ["report", "--in", str(files["certify"]), "--out", str(scratch / "report")],
        "run": ["run", "--out", str(scratch / "run")],
        "durability": ["durability", "--out", str(scratch / "durability")],
    }[command]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_option_value_gives_a_traceback(command, files, tmp_path):
    """Any value of any option of `command` (one to three at a time, `--opt v` or `--opt=v`) is accepted, or
    refused with one line and exit 2."""

    @FUZZ
    @given(st.data())
    def check(data):
        chosen = data.draw(st.lists(st.sampled_from(OPTIONS[command]), min_size=1, max_size=3, unique=True))
        argv = base_argv(command, files, tmp_path)
        for option in chosen:
            value = data.draw(option_value(files))
            argv += [f"{option}={value}"] if data.draw(st.booleans()) else [option, value]
        code, err = outcome(cli.validate, argv)
        assert_clean(code, err, argv)

    check()


def test_every_command_has_its_options_fuzzed():
    """The fuzz reads the options from the parser, so an option added later is fuzzed too."""
    assert set(COMMANDS) == {"certify", "matrix", "bisect", "diff", "load", "report", "run", "durability"}
    assert {"--rate", "--duration", "--payload", "--users", "--processes", "--monitor"} <= set(OPTIONS["load"])
    assert {"--tls-ca", "--creds", "--nkey-seed", "--server-version"} <= set(OPTIONS["certify"])
    assert {"--versions", "--clients", "--out"} <= set(OPTIONS["matrix"])
    assert {"--client", "--rule", "--releases", "--server-version", "--out"} <= set(OPTIONS["bisect"])
    assert {"--seed", "--nodes", "--faults", "--sync-interval", "--server-version"} <= set(OPTIONS["durability"])
    assert {"--against", "--programs", "--seed", "--storage", "--server", "--tls-ca"} <= set(OPTIONS["diff"])


JSON_DAMAGE = st.tuples(
    st.sampled_from(["drop", "retype", "not-object"]),
    st.floats(0, 1),  # which field
    st.sampled_from([None, "", "x", -1, 1.5, True, [], {}, [1], {"a": []}, "2.15.1"]),
)


def _damage_json(text_: str, damage: tuple[str, float, object]) -> str:
    kind, which, value = damage
    data = json.loads(text_)
    if kind == "not-object" or not data:
        return json.dumps([data] if isinstance(value, list) else value)
    key = sorted(data)[min(int(len(data) * which), len(data) - 1)]
    if kind == "drop":
        del data[key]
    else:
        data[key] = value
    return json.dumps(data)


@st.composite
def corruption(draw) -> Callable[[Path], None]:
    """A change to one file of a copied run folder: truncated, a byte flipped, a JSON field dropped or retyped
    (in one results line), or the file replaced by garbage."""
    relative = draw(
        st.sampled_from(
            [
                f"certify/{RESULTS_FILE}",
                f"certify/{RUN_FILE}",
                f"load/{LOAD_FILE}",
                f"load/{OPS_DIR}",
                f"load/{SAMPLES_DIR}",
            ]
        )
    )
    how = draw(st.sampled_from(["truncate", "flip", "json", "garbage"]))
    offset = draw(st.floats(0, 1))
    byte = draw(st.integers(0, 255))
    damage = draw(JSON_DAMAGE)

    def apply(run: Path) -> None:
        target = run / relative
        if target.is_dir():  # ops/ and samples/: one of their Parquet files
            target = sorted(target.iterdir())[0]
        content = target.read_bytes()
        if how == "truncate":
            target.write_bytes(content[: int(len(content) * offset)])
        elif how == "flip" and content:
            at = min(int(len(content) * offset), len(content) - 1)
            target.write_bytes(content[:at] + bytes([content[at] ^ (byte or 1)]) + content[at + 1 :])
        elif how == "json" and target.suffix == ".jsonl":
            lines = content.decode().splitlines()
            at = min(int(len(lines) * offset), len(lines) - 1)
            lines[at] = _damage_json(lines[at], damage)
            target.write_text("\n".join(lines) + "\n")
        elif how == "json" and target.suffix == ".json":
            target.write_text(_damage_json(content.decode(), damage))
        else:
            target.write_bytes(b"\x00garbage" * (byte % 5))

    return apply


def test_no_corrupted_input_file_gives_a_traceback(files):
    """A run folder with one file truncated, flipped, retyped or replaced is reported, or refused with one line
    naming the file, before Spark starts."""
    source = Path(tempfile.mkdtemp(prefix="jetcheck-fuzz-run-"))
    try:
        shutil.copytree(files["certify"], source / "certify")
        shutil.copytree(files["load"], source / "load")

        @FUZZ
        @given(corruption())
        def check(apply):
            with tempfile.TemporaryDirectory(prefix="jetcheck-fuzz-") as scratch:
                run = Path(scratch) / "run"
                shutil.copytree(source, run)
                apply(run)
                argv = ["report", "--in", str(run), "--out", str(Path(scratch) / "report")]
                code, err = outcome(cli.validate, argv)
                assert_clean(code, err, argv)

        check()
    finally:
        shutil.rmtree(source)


@pytest.mark.parametrize("field", ["server", "client", "options", "counts"])
def test_a_run_json_field_that_is_null_reads_as_absent(files, tmp_path, field):
    """run.json's object fields may be null (absent, as inputs.RUN_FIELDS says): the report is written (found by
    the fuzz test below: `"options": null` raised AttributeError in the report's "what was tested")."""
    run = tmp_path / "certify"
    shutil.copytree(files["certify"], run)
    info = json.loads((run / RUN_FILE).read_text())
    (run / RUN_FILE).write_text(json.dumps({**info, field: None}))
    argv = ["report", "--in", str(run), "--out", str(tmp_path / "report")]
    code, err = outcome(cli.main, argv)
    assert code == 0 and "Traceback" not in err, err
    assert any((tmp_path / "report").iterdir()), "no report written"


def test_a_corrupted_certify_folder_is_reported_or_refused_end_to_end(files):
    """Without load logs `jetcheck report` needs no Spark: main itself runs on corrupted results and run.json
    and either writes the report or refuses with one line."""

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(corruption())
    def check(apply):
        with tempfile.TemporaryDirectory(prefix="jetcheck-fuzz-") as scratch:
            run = Path(scratch) / "run"
            shutil.copytree(files["certify"], run / "certify")
            shutil.copytree(files["load"], run / "load")
            apply(run)
            shutil.rmtree(run / "load")
            argv = ["report", "--in", str(run / "certify"), "--out", str(Path(scratch) / "report")]
            code, err = outcome(cli.main, argv)
            assert_clean(code, err, argv)

    check()
