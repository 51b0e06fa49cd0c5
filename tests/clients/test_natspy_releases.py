"""nats-py at any release: `--client nats-py@X` installs X alone into jetcheck's cache and runs the checks with it
first on PYTHONPATH; what X lacks of the API the adapter uses is `na`, "not in nats-py X"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jetcheck import cli
from jetcheck.conformance.clients import adapter_for, client_environment, without_release
from jetcheck.conformance.clients.build import natspy_installed, natspy_release
from jetcheck.errors import ConfigError
from jetcheck.records import RESULTS_FILE

OLD = "2.2.0"  # the first release the suite certifies: no object store, no TTLs, no pause


def test_the_installed_release_needs_nothing_installed():
    assert natspy_release(natspy_installed()) is None
    assert client_environment(f"nats-py@{natspy_installed()}") == client_environment("nats-py") == {}
    assert client_environment("nats.go@v1.55.0") == {}


def test_another_release_is_refused_in_this_process_with_the_command_that_runs_it():
    with pytest.raises(ConfigError, match=f"jetcheck certify --client nats-py@{OLD}` installs that release"):
        adapter_for(f"nats-py@{OLD}")
    assert without_release(f"nats-py@{OLD}+some-variant") == "nats-py+some-variant"
    assert without_release("nats.go@v1.55.0+mode") == "nats.go@v1.55.0+mode"


@pytest.mark.parametrize("version", ["2.2", "latest", "2.2.0; rm -rf /"])
def test_a_release_that_is_no_version_is_refused(version):
    with pytest.raises(ConfigError, match=r"is not of the form X\.Y\.Z"):
        natspy_release(version)


def test_the_release_is_what_the_checks_import(tmp_path):
    """PYTHONPATH from client_environment makes `import nats` that release, and the rest jetcheck's environment."""
    folder = natspy_release(OLD)
    assert folder is not None and folder.name.startswith(f"{OLD}-py")
    assert natspy_release(OLD) == folder  # cached: the second call installs nothing
    env = {**os.environ, **client_environment(f"nats-py@{OLD}")}
    probe = "from importlib import metadata; import jetcheck.conformance.clients as c; " \
            f"print(metadata.version('nats-py'), c.adapter_for('nats-py@{OLD}').version)"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [OLD, OLD]


def test_what_an_old_release_lacks_is_na_not_in_that_release(tmp_path):
    """nats-py 2.2.0 has no object store: every object store client rule is na, saying so; its KV rules run."""
    out = tmp_path / "certify"
    selection = ["--", "-m", "(objectstore or kv) and client"]
    code = cli.main(["certify", "--client", f"nats-py@{OLD}", "--out", str(out), *selection])
    results = [json.loads(line) for line in (out / RESULTS_FILE).read_text().splitlines()]
    assert code in (0, 1) and results
    assert {r["client"]["version"] for r in results} == {OLD}
    store = [r for r in results if r["area"] == "objectstore"]
    assert store and all(r["status"] == "na" for r in store), [(r["id"], r["status"]) for r in store]
    assert {r["message"] for r in store} == {f"not in nats-py {OLD}: JetStreamContext.create_object_store"}
    kv = {r["id"]: r["status"] for r in results if r["area"] == "kv"}
    assert kv["kv.put-get"] == "pass" and kv["kv.limit-markers-config"] == "na", kv
