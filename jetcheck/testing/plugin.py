"""pytest plugin offering the suite's client variants to `--jetcheck-client <client>+<variant>`.

Load it with `-p jetcheck.testing.plugin` (after `--` on `jetcheck certify`, which loads the run's plugins in its
preflight too) or PYTEST_PLUGINS. The variants are registered on import: certify resolves the client before
pytest starts, and pytest imports `-p` plugins before the jetcheck plugin configures the run.
"""

from __future__ import annotations

from .variants import register_variants

register_variants()
