"""Keeping secrets out of what jetcheck shows, logs and reports."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"


def redact_url(url: str) -> str:
    """Hide the user info (user:password, or a token) of a URL."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{REDACTED}@{host}", parts.path, parts.query, parts.fragment))


def redact_text(text: str, secrets: list[str]) -> str:
    """Replace every occurrence of a secret value in free text (log lines, error messages)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
