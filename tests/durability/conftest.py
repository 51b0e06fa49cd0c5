"""The durability tests' own setting: the workload's nats-py clients reconnect through kills and power cuts."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

# nats-py 2.16.0 does not close the socket of a reconnect attempt whose handshake fails (the server went down between
# accept and INFO): Python reports it unclosed when it is collected (docs/clients/nats-py.md has the program that shows
# it). That is the client's leak, not what these tests judge; any other unraisable exception still fails them.
NATS_PY_RECONNECT_LEAK = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <function StreamWriter\.__del__:pytest.PytestUnraisableExceptionWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(NATS_PY_RECONNECT_LEAK)
