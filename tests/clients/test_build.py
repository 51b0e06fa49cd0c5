"""Driver builds and client selection: versions from the repo's pins, one-line errors, a cache safe to share."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from jetcheck.cli import main
from jetcheck.conformance.clients import adapter_for, build
from jetcheck.conformance.clients.build import (
    DONE,
    _built,
    _js_release,
    find_go,
    go_pinned_version,
    go_required,
    js_driver,
    js_pinned_version,
    prebuild,
    source_digest,
)
from jetcheck.conformance.clients.driven_clients import MISBEHAVE_MODES
from jetcheck.errors import ConfigError
from jetcheck.options import resolve
from jetcheck.versions import Version

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
        Version("1.26.0"),
    )


@pytest.mark.parametrize(
    "value",
    ["nats.js", "nats.js@3.4.0", "nats.go", "nats.go@v1.48.0", "nats.js+duplicate-delivery", "nats-py@2.2.0"],
)
def test_the_client_option_accepts_clients_with_a_version(value):
    assert resolve(cli={"client": value}, env={}).client == value


@pytest.mark.parametrize("value", ["nats.js@latest", "nats.go@1.48", "nats-py@2.16", "nats-py@v2.2.0", "nats.rs"])
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
    built = final.with_name(f"1.0.0-{source_digest(source)}")
    assert results == [built, built]
    assert (built / DONE).is_file() and (built / "driver").is_file()
    assert sorted(p.name for p in final.parent.iterdir()) == [built.name]


def test_a_changed_driver_source_is_built_anew_not_taken_from_the_cache(tmp_path):
    """An upgraded jetcheck whose driver changed runs the new driver: builds are keyed by the sources' digest."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "driver.mjs").write_text("first")
    final = tmp_path / "cache" / "fake" / "1.0.0"

    def build(staging: Path) -> None:
        (staging / "driver").write_text((staging / "driver.mjs").read_text())

    first = _built(final, source, build)
    (source / "driver.mjs").write_text("second")
    second = _built(final, source, build)
    assert first != second
    assert (second / "driver").read_text() == "second"


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


@pytest.fixture
def fake_npm(tmp_path) -> str:
    """An npm whose `view <pkg> versions --json` lists @nats-io/obj's releases (no 3.2.0, one prerelease)."""
    npm = tmp_path / "npm"
    npm.write_text('#!/bin/sh\necho \'["3.0.0-35", "3.0.2", "3.3.0", "3.4.0"]\'\n')
    npm.chmod(0o755)
    return str(npm)


def test_another_js_version_takes_each_packages_newest_release_not_newer(fake_npm):
    """@nats-io/* packages are not released together: a missing companion release falls back to the one before;
    npm's 3.0.0-35 is a prerelease, never chosen."""
    assert _js_release(fake_npm, "@nats-io/obj", "3.4.0", exact=False) == "3.4.0"
    assert _js_release(fake_npm, "@nats-io/obj", "3.2.0", exact=False) == "3.0.2"


def test_a_js_version_not_on_npm_is_one_line_listing_the_releases(fake_npm):
    with pytest.raises(
        ConfigError, match=r"@nats-io/jetstream 3\.1\.0 is not on npm; its latest releases: 3\.0\.2, 3\.3\.0, 3\.4\.0$"
    ):
        _js_release(fake_npm, "@nats-io/jetstream", "3.1.0", exact=True)


@pytest.fixture
def only_go(monkeypatch, tmp_path):
    """`only_go(line)`: the one go there is (on PATH, none in GO_PLACES) is a script printing `line` for `go version`;
    returns its path. `only_go(None)`: there is no go at all."""

    def install(version_line: str | None) -> Path | None:
        monkeypatch.setattr(build, "GO_PLACES", ())
        if version_line is None:
            monkeypatch.setenv("PATH", "/nonexistent")
            return None
        go = tmp_path / "go"
        go.write_text(f"#!/bin/sh\necho {version_line}\n")
        go.chmod(0o755)
        monkeypatch.setenv("PATH", str(tmp_path))
        return go

    return install


def test_no_go_at_all_is_one_line_with_the_version_go_mod_needs(only_go):
    only_go(None)
    with pytest.raises(ConfigError, match=r"^the nats\.go driver needs Go >= 1\.26\.0: no go on PATH or in /usr/local"):
        find_go(Version("1.26.0"))


def test_a_go_too_old_to_fetch_a_toolchain_is_named(only_go):
    """Debian's go 1.19 can neither build the driver nor fetch a newer toolchain (GOTOOLCHAIN needs 1.21)."""
    old_go = only_go("go1.19.8")
    with pytest.raises(ConfigError, match=rf"needs Go >= 1\.26\.0; the newest found is go1\.19\.8 at {old_go}$"):
        find_go(Version("1.26.0"))


def test_a_go_between_1_21_and_the_required_fetches_the_toolchain(only_go):
    go = only_go("go1.24.1")
    assert find_go(Version("1.26.0")) == (str(go), {**os.environ, "GOTOOLCHAIN": "auto"})


@pytest.mark.parametrize("reported", ["go1.26rc1", "go1.25.3 X:boringcrypto"])
def test_a_go_older_than_required_is_older_however_it_spells_its_version(only_go, reported):
    """go1.26rc1 comes before go1.26.0 and a GOEXPERIMENT suffix is no part of the version: both fetch 1.26.0."""
    go = only_go(reported)
    assert find_go(Version("1.26.0")) == (str(go), {**os.environ, "GOTOOLCHAIN": "auto"})
