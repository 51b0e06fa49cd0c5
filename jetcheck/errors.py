"""The error every layer raises for an option or input jetcheck cannot use (a shared leaf: the application turns it
into one `jetcheck: ` line and exit 2)."""

from __future__ import annotations

from jetcheck.fixtures.errors import TargetError


class ConfigError(TargetError):
    """An option has a value jetcheck cannot use."""
