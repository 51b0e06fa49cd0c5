"""pytest plugin offering the suite's client variants to `--jetcheck-client <client>+<variant>`, and
`--no-shrink` to the runs that only show a check can fail.

Load it with `-p jetcheck.testing.plugin` (after `--` on `jetcheck certify`, which loads the run's plugins in its
preflight too) or PYTEST_PLUGINS. The variants are registered on import: certify resolves the client before
pytest starts, and pytest imports `-p` plugins before the jetcheck plugin configures the run.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings

from jetcheck.conformance.hypothesis_profiles import HYPOTHESIS_PROFILES

from .variants import register_variants

register_variants()

NO_SHRINK = "--no-shrink"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        NO_SHRINK,
        action="store_true",
        help="property checks report the first failing example they find, unshrunk (a proof that a check fails "
        "needs no minimal example, and shrinking one against a server is most of such a run's time)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption(NO_SHRINK):
        unshrunk = tuple(phase for phase in Phase if phase not in (Phase.shrink, Phase.explain))
        for name in HYPOTHESIS_PROFILES.values():
            settings.register_profile(name, settings.get_profile(name), phases=unshrunk)
