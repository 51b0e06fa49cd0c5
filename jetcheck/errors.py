"""The errors a user sees as one line (a shared leaf): `JetcheckError`, the root of every layer's user-facing error
(fixtures' TargetError derives from it), and `ConfigError`, an option or input jetcheck cannot use. The application
turns each into one `jetcheck: ` line and exit 2."""

from __future__ import annotations


class JetcheckError(Exception):
    """A problem with the user's input or target; the message is shown to the user as it is."""


class ConfigError(JetcheckError):
    """An option has a value jetcheck cannot use."""
