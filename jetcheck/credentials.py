"""How jetcheck authenticates to a URL target and trusts it: the eight credential options as one value (a shared
leaf: the options resolve it, the fixtures connect with it)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from jetcheck.errors import ConfigError
from jetcheck.redact import REDACTED


@dataclass(frozen=True)
class Credentials:
    user: str = ""
    password: str = ""
    token: str = ""
    nkey_seed: str = ""  # path to a file holding the seed
    creds: str = ""  # path to a .creds file
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""

    def __repr__(self) -> str:
        # reprs reach tracebacks (pytest prints a failing check's arguments) and logs: secrets must not
        shown = {name: value for name, value in vars(self).items() if value}
        for secret in ("password", "token"):
            if secret in shown:
                shown[secret] = REDACTED
        return "Credentials(" + ", ".join(f"{name}={value!r}" for name, value in shown.items()) + ")"

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert or self.tls_key)

    @property
    def tls_option(self) -> str:
        """The first TLS option given, as the command line spells it ('' when none)."""
        given = [name for name in ("tls_ca", "tls_cert", "tls_key") if getattr(self, name)]
        return "--" + given[0].replace("_", "-") if given else ""

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context of the files given (None without a CA or certificate); ConfigError when a file is not
        what it should be."""
        if not (self.tls_ca or self.tls_cert):
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.tls_ca or None)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"TLS CA file {self.tls_ca}: not a PEM CA certificate ({_reason(exc)})") from None
        if self.tls_cert:
            try:
                ctx.load_cert_chain(self.tls_cert, self.tls_key or None)
            except (ssl.SSLError, OSError) as exc:
                files = f"TLS certificate file {self.tls_cert}" + (f" with key {self.tls_key}" if self.tls_key else "")
                raise ConfigError(f"{files}: not a PEM certificate and its private key ({_reason(exc)})") from None
        return ctx


# the credential options' names: the fields of Credentials
CREDENTIAL_OPTIONS = ("user", "password", "token", "nkey_seed", "creds", "tls_ca", "tls_cert", "tls_key")


def _reason(exc: Exception) -> str:
    # ssl errors carry OpenSSL's reason ("NO_CERTIFICATE_OR_CRL_FOUND"); OSErrors their strerror
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)
