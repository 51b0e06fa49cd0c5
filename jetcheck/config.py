"""The resolved options of a conformance run (`Config`, frozen), as the pytest plugin and `jetcheck certify` resolve
them (`resolve`); ``redacted()`` is what may be shown or logged. A shared leaf."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from jetcheck.credentials import CREDENTIAL_OPTIONS, Credentials
from jetcheck.option import Option
from jetcheck.option_resolution import resolve_values
from jetcheck.option_table import OPTION_BY_NAME, OPTIONS
from jetcheck.redact import REDACTED, redact_url
from jetcheck.specs import ClientSpec, ServerSpec, is_managed


@dataclass(frozen=True)
class Config:
    server: ServerSpec
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
    client: ClientSpec
    server_cache: str

    def __post_init__(self) -> None:
        # the specs as objects, also when a Config is made by hand from their text (a test's)
        object.__setattr__(self, "server", ServerSpec(self.server))
        object.__setattr__(self, "client", ClientSpec(self.client))

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
