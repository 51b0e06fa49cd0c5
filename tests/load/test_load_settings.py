"""`jetcheck load` builds its settings once and hands them to the locustfile through the option table: the
locustfile's settings, built from what it parsed, are the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jetcheck import cli
from jetcheck.load.cli import LOCUSTFILE, run_values, validate
from jetcheck.load.settings import load_settings, locust_handover

# Locust monkey-patches the process on import: the locustfile parses what it was handed in a child
LOCUSTFILE_SETTINGS = """
import importlib.util, json, sys
from locust.argument_parser import get_parser
spec = importlib.util.spec_from_file_location("jetcheck_locustfile", sys.argv[1])
locustfile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(locustfile)
options = get_parser(default_config_files=[]).parse_args(json.loads(sys.argv[2]))
print(json.dumps(locustfile.settings_from(options).as_dict()))
"""
SERVER = "nats://vendor:s3cret-pw@127.0.0.1:4222"


@pytest.mark.parametrize(
    "argv",
    [
        ["--scenario", "mixed", "--users", "3", "--consumers", "1", "--rate", "2000", "--payload", "64"],
        ["--scenario", "publish", "--max", "--max-inflight", "10", "--replicas", "3"],
        [
            "--scenario",
            "pull-consume",
            "--prefill",
            "100",
            "--run-prefix",
            "vendor1",
            "--server",
            SERVER,
            "--monitor",
            "http://h:1",
        ],
    ],
    ids=["mixed-open-loop", "alias-closed-loop", "consume"],
)
def test_the_locustfile_builds_the_settings_jetcheck_load_built(argv, tmp_path):
    """Every option reaches the locustfile with its value, and its settings come out as `jetcheck load`'s; the
    server's URL, credentials included, travels in the environment only."""
    args = cli.build_parser().parse_args(["load", *argv])
    validate(args)
    values = run_values(args, SERVER, "load-0000", tmp_path / "out", args.monitor or "http://127.0.0.1:8222")
    handed, environment = locust_handover({**values, "server_version": "2.12.8"})
    assert not any("s3cret-pw" in argument for argument in handed)
    child = subprocess.run(
        [sys.executable, "-c", LOCUSTFILE_SETTINGS, str(LOCUSTFILE), json.dumps(["-u", str(args.users), *handed])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("JETCHECK_")}, **environment},
    )
    assert json.loads(child.stdout) == json.loads(json.dumps(load_settings(values).as_dict()))
    assert Path(load_settings(values).out_dir) == tmp_path / "out"
