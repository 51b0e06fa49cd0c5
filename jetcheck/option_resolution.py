"""Resolving options: each option's value from the command line, else its variable, else the ini file, else its
default, parsed once by the table's check; a refusal names where the value came from (a shared leaf).

Precedence: command line, then environment, then ini file, then the default. Among the values, the server version
is the one for the server (`server_version_for`), and TLS files are loaded when the credentials are resolved."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jetcheck.credentials import CREDENTIAL_OPTIONS, Credentials
from jetcheck.errors import ConfigError
from jetcheck.option import Option
from jetcheck.option_table import OPTION_BY_NAME, options_for
from jetcheck.redact import redact_url
from jetcheck.specs import VERSIONED_SERVERS, ServerSpec


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
    if ServerSpec(server).versioned:
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
    except ConfigError as exc:
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
