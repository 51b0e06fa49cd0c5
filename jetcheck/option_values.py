"""The checks of option values: each takes the text given (a flag, a variable, an ini key or a default) and returns
the value, or raises ConfigError with one line saying what is expected (a shared leaf: the option table's `parse`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jetcheck.errors import ConfigError
from jetcheck.fault_kinds import HOLD_S
from jetcheck.specs import url_parts

MAX_HOLD_S = 120.0
HOLD_RANGE = f"{HOLD_S[0]:g}-{HOLD_S[1]:g}"  # the default --hold
MAX_SECONDS = 7 * 24 * 3600.0  # a week: longer timeouts or runs are typing mistakes, and overflow timers


def hold_range(value: str) -> tuple[float, float]:
    low, dash, high = value.partition("-")
    try:
        bounds = (float(low), float(high)) if dash else (float(low), float(low))
    except ValueError:
        bounds = (0.0, -1.0)
    if not 0 < bounds[0] <= bounds[1] <= MAX_HOLD_S:
        raise ConfigError(f"expected MIN-MAX seconds with 0 < MIN <= MAX <= {MAX_HOLD_S:g}, such as 1-4, not {value!r}")
    return bounds


def server_release(value: str) -> str:
    if not re.fullmatch(r"\d+\.\d+\.\d+", value):
        raise ConfigError(f"server version must be X.Y.Z, not {value!r}")
    return value


def release_or_url(value: str) -> str:
    """A nats-server release (X.Y.Z) or a nats:// (tls://) URL."""
    if "://" in value:
        if not re.match(r"(nats|tls)://[^\s/]+$", value):
            raise ConfigError(f"expected nats://host:port or tls://host:port, not {value!r}")
        return value
    return server_release(value)


def run_prefix(value: str) -> str:
    # Stream, consumer and bucket names allow these; subjects get the prefix lower-cased.
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{1,23}", value):
        raise ConfigError(f"run prefix must be 2-24 letters, digits, '_' or '-', starting with a letter: {value!r}")
    return value


def rules_of(value: str) -> str:
    # conformance.profiles reads it: every rule, the target's own release when that is one, or a release (line)
    value = value.strip().lower().removeprefix("v")
    if not re.fullmatch(r"auto|latest|\d+\.\d+(\.\d+)?", value):
        raise ConfigError(f"expected auto, latest or a nats-server release (X.Y or X.Y.Z), not {value!r}")
    return value


def yes_no(value: str) -> bool:
    words = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False}
    if value.lower() not in words:
        raise ConfigError(f"expected yes or no, not {value!r}")
    return words[value.lower()]


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


def rate_or_closed_loop(value: str) -> float:
    """Locust's --jetcheck-rate, where 0 is closed loop (jetcheck load passes --max on as 0)."""
    return 0.0 if value.strip() in ("0", "0.0") else positive_rate(value)


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ConfigError(f"expected one of {', '.join(allowed)}, not {value!r}")
        return value

    return parse


def release_range(value: str) -> str:
    low, dots, high = value.partition("..")
    if (value and not dots) or not all(re.fullmatch(r"(v?\d+\.\d+\.\d+)?", end) for end in (low, high)):
        raise ConfigError(f"expected A..B with X.Y.Z releases (either end may be left out), not {value!r}")
    return value


def existing_file(value: str) -> str:
    if value and not Path(value).is_file():
        raise ConfigError(f"no such file: {value}")
    return value


_MAX_KEY_FILE = 64 * 1024  # a seed or creds file is a few hundred bytes
# An nkey seed: 'S', the key type, then base32 (58 characters in all).
_NKEY_SEED = re.compile(r"S[A-Z][A-Z2-7]{56}")


def _key_file_text(value: str) -> str:
    existing_file(value)
    try:
        with open(value, "rb") as fh:
            return fh.read(_MAX_KEY_FILE).decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(f"{value} is not a text file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {value}: {exc.strerror}") from None


def nkey_seed_file(value: str) -> str:
    # the contents are a secret: say what is wrong without echoing them
    if value and not _NKEY_SEED.fullmatch(_key_file_text(value).strip()):
        raise ConfigError(f"{value} does not hold an nkey seed (one line of 58 characters starting with S)")
    return value


def creds_file(value: str) -> str:
    if value:
        text = _key_file_text(value)
        if "BEGIN NATS USER JWT" not in text or not _NKEY_SEED.search(text):
            raise ConfigError(f"{value} is not a NATS credentials file (a user JWT and an nkey seed block)")
    return value


def directory(value: str) -> str:
    if Path(value).exists() and not Path(value).is_dir():
        raise ConfigError(f"{value} exists and is not a directory")
    return value


def as_text(value: str) -> str:
    return value


def monitor_url(value: str) -> str:
    parts = url_parts(value)
    if parts is None:
        raise ConfigError(f"monitoring URL needs a host and a port from 0 to 65535, not {value!r}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"monitoring URL must look like http://host:8222, not {value!r}")
    return value.rstrip("/")


def optional(parse: Callable[[str], Any], empty: Any = "") -> Callable[[str], Any]:
    """`parse`, with "" (not given) as `empty`."""

    def parse_or_empty(value: str) -> Any:
        return parse(value) if value else empty

    return parse_or_empty


def share(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number < 10:  # also refuses nan
        raise ConfigError(f"expected a share such as 0.1 (10 %), not {value!r}")
    return number


def spark_master(value: str) -> str:
    # local, local[4], local[*], local[4,2] (retries), or a cluster manager's URL
    parts = url_parts(value)
    if not (re.fullmatch(r"local(\[(\d+|\*)(,\d+)?\])?", value) or (parts and parts.scheme in ("spark", "k8s"))):
        raise ConfigError(f"expected a Spark master such as local[*] or spark://host:7077, not {value!r}")
    return value


def listed(parse: Callable[[str], Any], what: str, skip_empty: bool) -> Callable[[str], list[str]]:
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
