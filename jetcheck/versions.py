"""Versions, compared in one way: every version jetcheck compares goes through `parse_version`.

The versions it meets are spelled several ways: nats-server's `2.15.1` and `2.12.0-RC.1`, Go module versions
`v1.55.0`, Go toolchains `go1.26.0` and `go1.26rc1`, npm's `3.0.0-35`. `parse_version` drops a leading `v` or `go`
and reads a semver prerelease (anything after the first `-`) as one, so it sorts before its release:
`-RC.1` / `-beta.2` / `-alpha.1` become packaging's rc/b/a, any other suffix (npm's `-35`) a dev release.
Everything else is packaging's `Version` as it is.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

__all__ = ["InvalidVersion", "Version", "parse_version", "version_sort_key"]

_PREFIX = re.compile(r"^(?:go|v)(?=\d)", re.IGNORECASE)
_NAMED_PRERELEASE = re.compile(r"^(?:a|alpha|b|beta|c|rc|pre|preview)[.-]?\d*$", re.IGNORECASE)


def parse_version(text: str) -> Version:
    """`text` as a packaging Version (see the module's docstring); InvalidVersion when it is not a version."""
    core, dash, prerelease = _PREFIX.sub("", text.strip()).partition("-")
    if not dash or _NAMED_PRERELEASE.match(prerelease):
        return Version(core + dash + prerelease)
    return Version(f"{core}.dev{''.join(re.findall(r'[0-9]', prerelease)) or 0}")


def version_sort_key(text: str) -> tuple[int, Version | str]:
    """A sort key putting versions in release order, then whatever is not a version (e.g. "", "unknown") by name."""
    try:
        return (0, parse_version(text or ""))
    except InvalidVersion:
        return (1, text or "")
