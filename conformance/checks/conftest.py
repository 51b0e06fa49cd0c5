"""Fixtures shared by the checks: prefixed streams, created for one check and removed by the plugin's cleanup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from jetcheck.conformance.jsapi import ApiError, create_stream
from jetcheck.conformance.oracle_runs import OracleRun


@dataclass(frozen=True)
class StreamUnderTest:
    name: str
    root: str  # the stream binds `<root>.>`
    config: dict[str, Any]  # as the server settled it

    def subject(self, *tokens: str) -> str:
        return ".".join((self.root, *tokens))


@pytest.fixture
def make_stream(nc, names):
    """Create a stream with the run prefix on `<root>.>` (a fresh root unless one is given, for a config that names
    its own subjects; none for a mirror or a stream of sources, which take their messages from other streams);
    `config` overrides the defaults (file storage). The checks ask only for documented configurations, so a refusal
    fails the check in words (a deviation, not a crash)."""

    async def make(root: str | None = None, **config: Any) -> StreamUnderTest:
        name, root = names.stream(), root or names.subject()
        subjects = [] if {"mirror", "sources"} & config.keys() else [f"{root}.>"]
        try:
            settled = await create_stream(nc, name, subjects, **config)
        except ApiError as error:
            pytest.fail(
                f"a stream with {config or 'the defaults'} is documented as valid; the server refused it: {error}"
            )
        return StreamUnderTest(name, root, settled)

    return make


@pytest.fixture
def oracle(target, hypothesis_settings, jetcheck_config, observe) -> OracleRun:
    """Runs an oracle's generated examples against the target, in the run's profile (see OracleRun)."""
    return OracleRun(target, hypothesis_settings, jetcheck_config.profile, observe)
