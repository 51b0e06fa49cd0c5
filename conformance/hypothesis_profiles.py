"""The Hypothesis profiles of jetcheck's property checks, one per `--profile` (registered on import)."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

# One bug per failing check keeps the result's message to one minimal program; no example database is written
# into the user's working directory.
_COMMON = {
    "deadline": None,
    "database": None,
    "report_multiple_bugs": False,
    "suppress_health_check": [HealthCheck.too_slow],
}
HYPOTHESIS_PROFILES = {"fast": "jetcheck-fast", "thorough": "jetcheck-thorough"}  # --profile -> Hypothesis profile
settings.register_profile(HYPOTHESIS_PROFILES["fast"], max_examples=40, derandomize=True, **_COMMON)
settings.register_profile(HYPOTHESIS_PROFILES["thorough"], max_examples=300, **_COMMON)
# The oracles' examples per check, by --profile: each example is one short program and its reads, cheap enough for
# more than the other property checks get, and their power grows with the examples.
ORACLE_EXAMPLES = {"fast": 100, "thorough": 1000}


def shrinking_only_when_thorough(profile: settings) -> settings:
    """`profile` for a property check whose failing examples each wait out a timeout against the server (a copy that
    never catches up): it shrinks only in the thorough profile, where a run has the time; the fast one reports the
    first failing example as found (each shrinking step would wait the timeout again)."""
    if profile.max_examples >= settings.get_profile(HYPOTHESIS_PROFILES["thorough"]).max_examples:
        return profile
    return settings(profile, phases=[p for p in profile.phases if p not in (Phase.shrink, Phase.explain)])
