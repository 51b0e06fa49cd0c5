"""Keeping secrets out of what jetcheck shows, logs and reports."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"


def redact_url(url: str) -> str:
    """Hide the user info (user:password, or a token) of a URL."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL urlsplit can read (an unclosed [): hide all before the last @
        _, at, tail = url.rpartition("@")
        return f"{REDACTED}@{tail}" if at else url
    if not parts.username and not parts.password:
        return url
    host = parts.netloc.rpartition("@")[2]  # as given: a port that is not a number is the parser's to refuse
    return urlunsplit((parts.scheme, f"{REDACTED}@{host}", parts.path, parts.query, parts.fragment))


def redact_text(text: str, secrets: list[str]) -> str:
    """Replace every occurrence of a secret value in free text (log lines, error messages)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
