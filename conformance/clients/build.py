"""Driver builds: the repo's driver sources built once per client version into jetcheck's cache (and nats-py
releases other than the installed one, installed there alone).

`<cache>/drivers/<client>/<version>-<digest of the driver's sources>/` holds one finished build (a changed driver,
e.g. after upgrading jetcheck, is a new build, never a stale one); a build happens in a sibling temporary directory
and is renamed into place, so a concurrent run never sees (or corrupts) a half-built driver. A missing tool or a
failed build is a ConfigError with one line saying what is missing: that client's run exits 2, nothing else does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from jetcheck.errors import ConfigError
from jetcheck.fixtures.binaries import default_cache_dir
from jetcheck.versions import InvalidVersion, Version, parse_version

SOURCES = Path(__file__).with_name("drivers")
JS_PACKAGE = "@nats-io/jetstream"
GO_MODULE = "github.com/nats-io/nats.go"
RUST_CRATE = "async-nats"
CARGO_PLACES = (str(Path.home() / ".cargo" / "bin" / "cargo"),)  # rustup's cargo, often not on a service's PATH
JNATS = "io.nats:jnats"
BUILD_TIMEOUT_S = 600
DONE = ".built"  # written last into a finished build
GO_FETCHES_TOOLCHAINS = parse_version("1.21")  # from this Go on, GOTOOLCHAIN=auto fetches the one go.mod asks for
GO_PLACES = ("/usr/local/go/bin/go", str(Path.home() / "go" / "bin" / "go"))  # Go's tarball, `go install`ed Gos


def cache_root() -> Path:
    """Beside the cached nats-server releases: `~/.cache/jetcheck/drivers` (XDG_CACHE_HOME honoured)."""
    return default_cache_dir().parent / "drivers"


# --- versions ----------------------------------------------------------------------------------------------------


def js_pinned_version(source: Path = SOURCES / "js") -> str:
    """The @nats-io/jetstream version the repo's package-lock.json pins ("" when there is none yet)."""
    try:
        lock = json.loads((source / "package-lock.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return lock.get("packages", {}).get(f"node_modules/{JS_PACKAGE}", {}).get("version", "")


def _pinned(build_file: Path, pattern: str) -> str:
    """The version `pattern`'s group 1 finds in a driver's build file ("" when the file or the version is missing)."""
    try:
        text = build_file.read_text(encoding="utf-8")
    except OSError:
        return ""
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1) if match else ""


def go_pinned_version(source: Path = SOURCES / "go") -> str:
    """The nats.go version the repo's go.mod requires ("" when there is none yet)."""
    return _pinned(source / "go.mod", rf"^\s*(?:require\s+)?{re.escape(GO_MODULE)}\s+(v\S+)")


def rust_pinned_version(source: Path = SOURCES / "rust") -> str:
    """The async-nats version the repo's Cargo.lock pins ("" when there is none yet)."""
    return _pinned(source / "Cargo.lock", rf'name = "{re.escape(RUST_CRATE)}"\nversion = "([^"]+)"')


def go_required(source: Path = SOURCES / "go") -> Version:
    """The Go version go.mod's `go` line asks for, e.g. 1.26.0."""
    try:
        match = re.search(r"^go\s+(\S+)", (source / "go.mod").read_text(encoding="utf-8"), re.MULTILINE)
    except OSError:
        match = None
    return parse_version(match.group(1)) if match else GO_FETCHES_TOOLCHAINS


# --- tools -------------------------------------------------------------------------------------------------------


def find_go(required: Version) -> tuple[str, dict[str, str]]:
    """A `go` able to build a module asking for `required`, and the environment to run it in.

    PATH's go, then the official tarball's /usr/local/go/bin/go; a go >= 1.21 older than required may fetch the
    required toolchain itself through the module proxy (GOTOOLCHAIN=auto)."""
    env = dict(os.environ)
    candidates = [shutil.which("go"), *GO_PLACES]
    found: list[tuple[Version, str]] = []
    for candidate in dict.fromkeys(c for c in candidates if c and os.access(c, os.X_OK)):
        version = _go_version(candidate)
        if version:
            found.append((version, candidate))
    need = str(required)
    if not found:
        raise ConfigError(f"the nats.go driver needs Go >= {need}: no go on PATH or in /usr/local/go/bin")
    best_version, best = max(found)
    if best_version >= required:
        env["GOTOOLCHAIN"] = "local"
        return best, env
    if best_version >= GO_FETCHES_TOOLCHAINS:
        env["GOTOOLCHAIN"] = "auto"  # Go fetches the toolchain go.mod asks for
        return best, env
    raise ConfigError(f"the nats.go driver needs Go >= {need}; the newest found is go{best_version} at {best}")


def _go_version(go: str) -> Version | None:
    env = {**os.environ, "GOTOOLCHAIN": "local"}  # what this binary is, not what it would fetch
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=30, env=env).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    # e.g. "go1.26.0", "go1.26rc1", "go1.25.0 X:boringcrypto" (a GOEXPERIMENT); "devel go1.27-abc" is no release
    try:
        return parse_version(out.split()[0]) if out.strip().startswith("go") else None
    except InvalidVersion:
        return None


def need_tool(tool: str, client: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ConfigError(f"the {client} driver needs {tool}, which is not on PATH (install Node.js >= 20 with npm)")
    return path


# --- builds ------------------------------------------------------------------------------------------------------


def _run(command: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{what}: `{' '.join(command)}` took more than {BUILD_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        lines = [line for line in lines if not re.search(r"complete log of this run|^npm error code", line)]
        telling = [
            line
            for line in lines
            if re.search(
                r"no matching|not found|unknown revision|invalid|could not (find|resolve)|cannot find symbol",
                line,
                re.I,
            )
        ]
        telling += [line for line in lines if re.match(r"error\[E\d+\]", line)]  # rustc's, after cargo's own
        errors = [line for line in lines if re.search(r"err", line, re.IGNORECASE)]
        said = telling[0] if telling else (errors or lines or [f"exit status {proc.returncode}"])[-1]
        raise ConfigError(f"{what}: `{' '.join(command[:3])}` failed: {said}")


# what a build makes, or a checkout may hold (cargo's target/): not sources
BUILD_OUTPUTS = ("node_modules", "driver", ".gitignore", "target")


def source_digest(source: Path, suffixes: tuple[str, ...] | None = None) -> str:
    """A short digest of the driver's source files (names and contents), which keys its builds; with `suffixes`,
    of the files with those suffixes only (a tree that also holds caches such as __pycache__)."""
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if suffixes is not None and path.suffix not in suffixes:
            continue
        if path.is_file() and not set(relative.parts) & set(BUILD_OUTPUTS):
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _built(final: Path, source: Path, build: Callable[[Path], None]) -> Path:
    """`final` (suffixed with the sources' digest), built from a copy of `source` by `build(staging)` unless a
    finished build is already there."""
    final = final.with_name(f"{final.name}-{source_digest(source)}")
    if (final / DONE).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        shutil.copytree(source, staging, ignore=shutil.ignore_patterns(*BUILD_OUTPUTS), dirs_exist_ok=True)
        build(staging)
        (staging / DONE).write_text("")
        _into_place(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _into_place(staging: Path, final: Path) -> None:
    """Rename a finished build to `final`; a finished one already there stays, an unfinished one is replaced."""
    try:
        staging.rename(final)
    except OSError:  # another run finished the same build first, or an unfinished one is in the way
        if not (final / DONE).is_file():
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)


def js_driver(version: str = "", cache: Path | None = None, source: Path = SOURCES / "js") -> list[str]:
    """The command running the nats.js driver for @nats-io/jetstream `version` (the lockfile's by default).

    The lockfile's version installs with `npm ci` (exactly what the repo pins). For another version, @nats-io/jetstream
    is that release and every other @nats-io/* dependency the newest of its releases not newer than it (they are
    not always released together: @nats-io/obj has no 3.2.0), installed with `npm install`."""
    node, npm = need_tool("node", "nats.js"), need_tool("npm", "nats.js")
    pinned = js_pinned_version(source)
    if not pinned:
        raise ConfigError(f"the nats.js driver sources are missing: no {source / 'package-lock.json'}")
    version = version or pinned

    def build(staging: Path) -> None:
        what = f"building the nats.js driver for {JS_PACKAGE} {version}"
        quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
        if version == pinned:
            _run([npm, "ci", *quiet], staging, what)
            return
        package = json.loads((staging / "package.json").read_text(encoding="utf-8"))
        deps = package.get("dependencies", {})
        for name in deps:
            if name.startswith("@nats-io/"):
                deps[name] = _js_release(npm, name, version, exact=name == JS_PACKAGE)
        (staging / "package.json").write_text(json.dumps(package, indent=2) + "\n", encoding="utf-8")
        (staging / "package-lock.json").unlink(missing_ok=True)
        _run([npm, "install", *quiet], staging, what)

    built = _built((cache or cache_root()) / "nats.js" / version, source, build)
    return [node, str(built / _js_main(built))]


def _js_release(npm: str, package: str, version: str, exact: bool) -> str:
    """`version` of `package` on npm if it exists (required when `exact`), else its newest release below it."""
    try:
        proc = subprocess.run([npm, "view", package, "versions", "--json"], capture_output=True, text=True, timeout=120)
        releases = json.loads(proc.stdout) if proc.returncode == 0 else []
    except (subprocess.TimeoutExpired, ValueError):
        releases = []
    if not releases:
        raise ConfigError(f"could not list the releases of {package} on npm (is the registry reachable?)")
    releases = [releases] if isinstance(releases, str) else releases
    if version in releases:
        return version
    wanted = parse_version(version)
    final = [r for r in releases if not parse_version(r).is_prerelease]  # npm's 3.0.0-35 is a prerelease
    if exact or not (older := [r for r in final if parse_version(r) <= wanted]):
        newest = ", ".join(sorted(final, key=parse_version)[-8:])
        raise ConfigError(f"{package} {version} is not on npm; its latest releases: {newest}")
    return max(older, key=parse_version)


def _js_main(built: Path) -> str:
    try:
        return json.loads((built / "package.json").read_text(encoding="utf-8")).get("main") or "driver.mjs"
    except (OSError, ValueError):
        return "driver.mjs"


def go_driver(version: str = "", cache: Path | None = None, source: Path = SOURCES / "go") -> list[str]:
    """The command running the nats.go driver built against nats.go `version` (go.mod's by default)."""
    pinned = go_pinned_version(source)
    if not pinned:
        raise ConfigError(f"the nats.go driver sources are missing: no nats.go requirement in {source / 'go.mod'}")
    version = version or pinned
    if not version.startswith("v"):
        version = "v" + version
    go, env = find_go(go_required(source))
    env.setdefault("GOFLAGS", "-mod=mod")

    def build(staging: Path) -> None:
        what = f"building the nats.go driver for nats.go {version}"
        if version != pinned:
            _release_only(staging / "go.mod")
            _run([go, "get", f"{GO_MODULE}@{version}"], staging, what, env)
        _go_build_release(go, env, staging, what)

    built = _built((cache or cache_root()) / "nats.go" / version, source, build)
    return [str(built / "driver")]


def _release_only(go_mod: Path) -> None:
    """go.mod without its other requirements, so `go get` takes the ones the nats.go release itself asks for (not
    `go mod tidy`, which moves nats.go up again to satisfy the tests of its other packages)."""
    kept = [line for line in go_mod.read_text(encoding="utf-8").splitlines() if re.match(r"(module|go)\s", line)]
    go_mod.write_text("\n".join(kept) + "\n", encoding="utf-8")
    go_mod.with_name("go.sum").unlink(missing_ok=True)


# The Go driver's files marked `//jetcheck:feature <name>` (and `//jetcheck:ops ...`) may be left out of a build for a
# nats.go release lacking the API they call: drivers/go/release.go.
_FEATURE = re.compile(r"^//jetcheck:feature (\S+)", re.MULTILINE)
_OPS = re.compile(r"^//jetcheck:ops (.+)$", re.MULTILINE)
_COMPILE_ERROR = re.compile(r"^\./([\w.-]+\.go):\d+:\d+: (.+)$", re.MULTILINE)
# What the compiler says a release lacks: undefined: jetstream.X / x.Y undefined (type jetstream.T has no field or
# method Y) / unknown field F in struct literal of type jetstream.T
_LACKS = (
    (re.compile(r"^undefined: ((?:jetstream|nats)\.\w+)"), "{0}"),
    (re.compile(r"^\S+\.(\w+) undefined \(type \*?((?:jetstream|nats)\.\w+) has no field or method"), "{1}.{0}"),
    (re.compile(r"^unknown field (\w+) in struct literal of type ((?:jetstream|nats)\.\w+)"), "{1}.{0}"),
)
_LOCAL_UNDEFINED = re.compile(r"^undefined: (\w+)$")
MAX_PRUNING_ROUNDS = 20
LACKS_NAMED = 3  # an na reason names the first few missing API names the compiler met


def _go_build_release(go: str, env: dict[str, str], staging: Path, what: str) -> None:
    """`go build` the driver, leaving out each feature file the release cannot compile: it is replaced by a file
    registering its ops as not in the release, with what the compiler said is missing (the answer's na reason)."""
    left_out: dict[str, tuple[str, str]] = {}  # file name -> (its source, what it lacks)
    command = [go, "build", "-gcflags=-e", "-o", "driver", "."]  # -e: every error, not the first ten
    for _ in range(MAX_PRUNING_ROUNDS):
        try:
            ran = subprocess.run(command, cwd=staging, env=env, text=True, capture_output=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"{what}: `go build` took more than {BUILD_TIMEOUT_S} s") from None
        if ran.returncode == 0:
            return
        errors: dict[str, list[str]] = {}
        for name, message in _COMPILE_ERROR.findall(ran.stderr):
            errors.setdefault(name, []).append(message)
        if not errors:
            _run(command, staging, what, env)  # not a compile error: say what go said
        sources = {name: (staging / name).read_text(encoding="utf-8") for name in errors}
        core = [name for name in errors if not _FEATURE.search(sources[name])]
        if core:
            raise ConfigError(f"{what}: the driver's core does not compile: {core[0]}: {errors[core[0]][0]}")
        for name, messages in errors.items():
            lacks = _lacks(messages, left_out)
            feature = _FEATURE.search(sources[name]).group(1)
            ops = " ".join(_OPS.findall(sources[name])).split()
            (staging / name).unlink()
            left_out[name] = (sources[name], lacks)
            args = ", ".join(json.dumps(arg) for arg in (feature, lacks, *ops))
            (staging / f"zz_absent_{name}").write_text(
                f"// Written by jetcheck's build: {name} left out, the nats.go release lacks {lacks}.\n\n"
                f"package main\n\nfunc init() {{ notInRelease({args}) }}\n",
                encoding="utf-8",
            )
    raise ConfigError(f"{what}: still failing after leaving out {', '.join(left_out)}")


def _lacks(messages: list[str], left_out: dict[str, tuple[str, str]]) -> str:
    """What a file's compile errors say the release lacks: its API names, else (a file needing a file left out)
    what that one lacks, else the compiler's first message."""
    found: list[str] = []
    for message in messages:
        for pattern, shape in _LACKS:
            if match := pattern.match(message):
                found.append(shape.format(*match.groups()))
                break
        else:
            if (local := _LOCAL_UNDEFINED.match(message)) and (via := _declared_in(local.group(1), left_out)):
                found.append(via)
    named = sorted(dict.fromkeys(found), key=_telling)
    if len(named) > LACKS_NAMED:
        return f"{', '.join(named[:LACKS_NAMED])} and {len(named) - LACKS_NAMED} more"
    return ", ".join(named) or messages[0]


def _telling(name: str) -> int:
    """Entry points first (JetStream.KeyValue says more than KeyValueStatus), sentinel errors last."""
    return 0 if ".JetStream." in name else 2 if name.rsplit(".", 1)[-1].startswith("Err") else 1


def _declared_in(symbol: str, left_out: dict[str, tuple[str, str]]) -> str:
    """What the left-out file declaring `symbol` lacks ("" when none does)."""
    declaration = re.compile(rf"^(?:func|type|var|const)\s+(?:\([^)]*\)\s*)?{re.escape(symbol)}\b", re.MULTILINE)
    return next((lacks for source, lacks in left_out.values() if declaration.search(source)), "")


def find_cargo() -> str:
    """PATH's cargo, else rustup's ~/.cargo/bin/cargo."""
    for candidate in (shutil.which("cargo"), *CARGO_PLACES):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise ConfigError("the async-nats driver needs cargo (Rust), which is not on PATH nor in ~/.cargo/bin")


def rust_driver(version: str = "", cache: Path | None = None, source: Path = SOURCES / "rust") -> list[str]:
    """The command running the async-nats driver built against async-nats `version` (Cargo.lock's by default).

    The pinned version builds `--locked` (exactly what the repo pins); another one sets the dependency to `=X` and
    lets cargo resolve the rest. The build keeps only the binary; cargo's target directory is one per version beside
    the builds (`<cache>/async-nats/.cargo-target/<version>`, cargo locks it), so a changed driver recompiles only
    itself, not async-nats and tokio (minutes on two cores)."""
    pinned = rust_pinned_version(source)
    if not pinned:
        raise ConfigError(f"the async-nats driver sources are missing: no async-nats in {source / 'Cargo.lock'}")
    version = (version or pinned).removeprefix("v")
    cargo = find_cargo()
    env = {**os.environ, "CARGO_TERM_COLOR": "never"}
    env["PATH"] = os.pathsep.join([str(Path(cargo).parent), env.get("PATH", "")])  # rustc beside cargo

    def build(staging: Path) -> None:
        what = f"building the async-nats driver for async-nats {version}"
        env["CARGO_TARGET_DIR"] = str(target)
        command = [cargo, "build", "--release", "--quiet"]
        if version == pinned:
            command.append("--locked")
        else:
            manifest = staging / "Cargo.toml"
            text = manifest.read_text(encoding="utf-8")
            text = re.sub(r'^async-nats = ".*"$', f'async-nats = "={version}"', text, count=1, flags=re.MULTILINE)
            manifest.write_text(text, encoding="utf-8")
        for path in staging.rglob("*"):  # copies keep their mtimes: cargo must not take the shared output as fresh
            path.touch()
        _run(command, staging, what, env)
        shutil.copy2(target / "release" / "driver", staging / "driver")
        for leftover in staging.iterdir():  # the binary needs nothing else: no sources
            if leftover.name not in ("driver", DONE):
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()

    root = (cache or cache_root()) / RUST_CRATE
    target = root / ".cargo-target" / version  # one per version: two versions' builds never swap binaries
    built = _built(root / version, source, build)
    return [str(built / "driver")]


def java_pinned_version(source: Path = SOURCES / "java") -> str:
    """The jnats version the repo's pom.xml pins (its `jnats.version` property; "" when there is none yet)."""
    return _pinned(source / "pom.xml", r"<jnats\.version>\s*([^<\s]+)\s*</jnats\.version>")


def java_driver(version: str = "", cache: Path | None = None, source: Path = SOURCES / "java") -> list[str]:
    """The command running the jnats driver built against jnats `version` (pom.xml's by default).

    `mvn -q -B package` in a staging copy makes one runnable jar with jnats inside (maven-shade); another release is
    the `jnats.version` property. Maven resolves from its local repository (~/.m2) after the first build, so later
    builds need no network. Only the jar is kept."""
    pinned = java_pinned_version(source)
    if not pinned:
        raise ConfigError(f"the jnats driver sources are missing: no jnats.version in {source / 'pom.xml'}")
    version = (version or pinned).removeprefix("v")
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not java or not mvn:
        missing = " and ".join(tool for tool, path in (("java", java), ("mvn", mvn)) if not path)
        raise ConfigError(f"the jnats driver needs {missing}, not on PATH (install a JDK >= 17 and Maven)")

    def build(staging: Path) -> None:
        what = f"building the jnats driver for {JNATS} {version}"
        _run([mvn, "-q", "-B", "package", f"-Djnats.version={version}"], staging, what)
        (staging / "target" / "driver.jar").rename(staging / "driver.jar.keep")
        for path in staging.iterdir():
            if path.name != "driver.jar.keep":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        (staging / "driver.jar.keep").rename(staging / "driver.jar")

    built = _built((cache or cache_root()) / "jnats" / version, source, build)
    # The serial collector: a small driver process on a shared machine, where G1's concurrent threads take CPU the
    # client needs (measured: 6.4 us of driver CPU per async publish with it, 7.7 with G1).
    return [java, "-XX:+UseSerialGC", "-jar", str(built / "driver.jar")]


NATSPY = "nats-py"


def natspy_installed() -> str:
    """The nats-py release `import nats` gives this interpreter."""
    return metadata.version(NATSPY)


def natspy_release(version: str, cache: Path | None = None) -> Path | None:
    """A folder holding nats-py `version` alone (pip's --target, no dependencies: those of jetcheck's environment
    serve), to put first on PYTHONPATH so `import nats` is that release; None when it is the installed one."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ConfigError(f"nats-py version {version!r} is not of the form X.Y.Z")
    if version == natspy_installed():
        return None
    final = (cache or cache_root()) / NATSPY / f"{version}-py{sys.version_info[0]}.{sys.version_info[1]}"
    if (final / DONE).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
        _run([*command, "--target", str(staging), f"{NATSPY}=={version}"], staging, f"installing nats-py {version}")
        (staging / DONE).write_text("")
        _into_place(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def prebuild() -> int:
    """Build every driver now (bootstrap, CI): one line each, ready or what is missing; never fails."""
    for client, build in (
        ("nats.js", js_driver),
        ("nats.go", go_driver),
        (RUST_CRATE, rust_driver),
        ("jnats", java_driver),
    ):
        try:
            command = build()
        except ConfigError as exc:
            print(f"bootstrap: {exc} (only --client {client} needs it)", file=sys.stderr)
            continue
        print(f"bootstrap: {client} driver ready: {command[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(prebuild())
