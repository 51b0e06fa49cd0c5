"""What the plugin's hooks and fixtures keep on pytest's config (the run) and on each check's item."""

from __future__ import annotations

import pytest

from .catalog import Rule
from .progress import Progress
from .run_record import RunRecord

RUN = pytest.StashKey[RunRecord]()
RULE = pytest.StashKey[Rule]()
NA_REASON = pytest.StashKey[str]()
OBSERVED = pytest.StashKey[dict]()
LOG_OFFSET = pytest.StashKey[int]()
SERVER_LOG = pytest.StashKey[str]()  # the server's log while the check ran, read before the server may stop
# the seconds the check's teardown spent asking whether the target still answers: the run's time, not the check's
PROBED = pytest.StashKey[float]()
REPORTS = pytest.StashKey[dict]()
PROGRESS = pytest.StashKey[Progress]()
# a bad JETCHECK_* setting, kept until jetcheck's fixtures or checks are used: someone else's run stays unharmed
CONFIG_ERROR = pytest.StashKey[str]()


def run_of(config: pytest.Config) -> RunRecord:
    if RUN not in config.stash:
        raise pytest.UsageError(config.stash[CONFIG_ERROR])
    return config.stash[RUN]
