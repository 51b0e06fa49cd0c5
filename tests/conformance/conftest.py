"""The proof gate at collection: a session that collects proof rows refuses to run while some check certify
collects is failed by none of them (tests/conformance/proof_gate.py says which)."""

from __future__ import annotations

import pytest

from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials

from ..conftest import SERVER_VERSION
from .proof_gate import gaps, is_proof_module


def pytest_collection_finish(session: pytest.Session) -> None:
    # only sessions that run proofs pay for collecting certify's checks (a subprocess, a few seconds)
    if not any(is_proof_module(item.path.stem) for item in session.items):
        return
    if problems := gaps():
        raise pytest.UsageError(
            "every check certify collects must be failed by some proof row (tests/conformance/proofs.py); "
            f"the proof gate found {len(problems)} shortfall(s):\n  " + "\n  ".join(problems)
        )


@pytest.fixture(scope="module")
def cluster_server():
    """A 3-node cluster on loopback for the rows that need replicated streams."""
    provider = provider_for("cluster", SERVER_VERSION, Credentials())
    yield provider.start()
    provider.stop()
