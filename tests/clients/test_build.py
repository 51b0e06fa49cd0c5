"""Driver builds and client selection: versions from the repo's pins, one-line errors, a cache safe to share."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from jetcheck.cli import main
from jetcheck.config import ConfigError, resolve
from jetcheck.conformance.clients import adapter_for
from jetcheck.conformance.clients.build import (
    DONE,
    _built,
    go_pinned_version,
    go_required,
    js_driver,
    js_pinned_version,
    prebuild,
)
from jetcheck.conformance.clients.driven import MISBEHAVE_MODES

GO_MOD = """module jetcheck/driver

go 1.26.0

require (
\tgithub.com/klauspost/compress v1.20.0 // indirect
\tgithub.com/nats-io/nats.go v1.55.0
)
"""


def test_pinned_versions_come_from_the_lockfile_and_go_mod(tmp_path):
    """The default client version is the one the repo's driver pins: package-lock.json, go.mod."""
    (tmp_path / "package-lock.json").write_text(
        json.dumps({"packages": {"node_modules/@nats-io/jetstream": {"version": "3.4.0"}}})
    )
    (tmp_path / "go.mod").write_text(GO_MOD)
    assert (js_pinned_version(tmp_path), go_pinned_version(tmp_path), go_required(tmp_path)) == (
        "3.4.0",
        "v1.55.0",
        (1, 26, 0),
    )


@pytest.mark.parametrize(
    "value", ["nats.js", "nats.js@3.4.0", "nats.go", "nats.go@v1.48.0", "nats.js+duplicate-delivery"]
)
def test_the_client_option_accepts_driven_clients_with_a_version(value):
    assert resolve(cli={"client": value}, env={}).client == value


@pytest.mark.parametrize("value", ["nats.js@latest", "nats.go@1.48", "nats-py@2.16.0", "nats.rs"])
def test_the_client_option_refuses_other_spellings(value):
    with pytest.raises(ConfigError, match=r"expected one of nats-py, nats\.js, nats\.go"):
        resolve(cli={"client": value}, env={})


def test_a_driven_client_accepts_only_the_protocols_misbehave_modes():
    """`nats.go+never-reset` is a nats-py variant, not a driver mode: refused, naming the modes."""
    with pytest.raises(ConfigError, match=MISBEHAVE_MODES[0]):
        adapter_for("nats.go+never-reset")


def test_a_driven_adapter_is_shared_and_starts_nothing_until_used():
    """Every lookup of the same client returns the run's one adapter; naming it starts no process."""
    first, second = adapter_for("nats.js@3.1.0"), adapter_for("nats.js@3.1.0")
    assert first is second and first._process is None
    assert (first.name, first.version) == ("nats.js", "3.1.0")


def test_a_missing_node_is_one_line_naming_it(monkeypatch):
    """Without node on PATH the nats.js driver cannot be built: a ConfigError saying so."""
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match=r"the nats\.js driver needs node, which is not on PATH"):
        js_driver()


def test_certify_with_a_missing_node_exits_2_with_that_line(monkeypatch, capsys, tmp_path):
    """`jetcheck certify --client nats.js` without node: exit 2 and one `jetcheck:` line, no traceback."""
    monkeypatch.setenv("PATH", "/nonexistent")
    status = main(["certify", "--client", "nats.js", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2
    assert err == "jetcheck: the nats.js driver needs node, which is not on PATH (install Node.js >= 20 with npm)\n"


def test_concurrent_builds_leave_one_finished_build(tmp_path):
    """Two runs building the same version at once: both get the finished build, no staging directory is left."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "main.txt").write_text("source")
    final = tmp_path / "cache" / "fake" / "1.0.0"
    started = threading.Barrier(2)

    def build(staging: Path) -> None:
        started.wait(10)  # both builds run at the same time
        (staging / "driver").write_text(f"built in {staging.name}")

    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(_built(final, source, build))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [final, final]
    assert (final / DONE).is_file() and (final / "driver").is_file()
    assert sorted(p.name for p in final.parent.iterdir()) == ["1.0.0"]


def test_a_failed_build_leaves_nothing_in_the_cache(tmp_path):
    """A build that fails raises its error and leaves no directory a later run would take for a build."""
    source = tmp_path / "src"
    source.mkdir()
    final = tmp_path / "cache" / "fake" / "1.0.0"

    def build(staging: Path) -> None:
        raise ConfigError("building fake: npm failed")

    with pytest.raises(ConfigError, match="npm failed"):
        _built(final, source, build)
    assert list(final.parent.iterdir()) == []


def test_prebuild_names_what_is_missing_and_does_not_fail(monkeypatch, capsys):
    """bootstrap's driver step: without node it says so in one line for nats.js and still exits 0."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert prebuild() == 0
    err = capsys.readouterr().err
    assert "bootstrap: the nats.js driver needs node, which is not on PATH" in err
