"""Outcomes with their reason: a client that gives no answer (timeout, lost connection) never refuses, passes or
fails a rule; the check ends in `error`. One place says what is an answer: conformance.clients.base (the
plugin's side: tests/conformance/test_plugin.py)."""

from __future__ import annotations

import contextlib

import nats.errors
import nats.js.errors
import pytest

from jetcheck.conformance.clients.base import ClientError, Indeterminate, Unsupported, refusal
from jetcheck.conformance.clients.driver_pipe import DriverConnectionError, DriverTimeout, error_for
from jetcheck.conformance.clients.natspy_failures import kv_errors, natspy_failures, not_found_as_adapter_error

NO_ANSWERS = [
    DriverTimeout("timeout", "get: timeout: the driver did not answer"),
    DriverConnectionError("connection", "get: connection: closed"),
    error_for("kv_get", {"kind": "timeout", "message": "nats: timeout"}),
    error_for("kv_get", {"kind": "connection", "message": "nats: connection closed"}),
]
NATS_PY_NO_ANSWERS = [
    nats.errors.TimeoutError(),
    nats.errors.ConnectionClosedError(),
    nats.errors.NoServersError(),
    TimeoutError(),
]


async def _raising(exc: BaseException | None):
    if exc is not None:
        raise exc
    return "done"


@pytest.mark.asyncio
@pytest.mark.parametrize("exc", NO_ANSWERS, ids=lambda e: f"{type(e).__name__}-{e.kind}")
async def test_no_answer_is_never_a_refusal(exc):
    """A driver's timeout or lost connection is raised on by refusal(): a check expecting a refusal cannot pass
    on it."""
    assert isinstance(exc, Indeterminate)
    with pytest.raises(type(exc)):
        await refusal(_raising(exc))


@pytest.mark.asyncio
async def test_a_refusal_is_the_clients_answer_and_success_is_none():
    """The client's own refusal (with its codes) is returned, an unsupported feature too, success is None."""
    refused = ClientError("api", "create: wrong last sequence", 400, 10071)
    assert await refusal(_raising(refused)) is refused
    assert isinstance(await refusal(_raising(Unsupported("unsupported", "no add_link"))), Unsupported)
    assert await refusal(_raising(None)) is None


@contextlib.contextmanager
def kv_adapter(op: str):
    """What wraps a NatsPyKeyValue method: natspy_failures (every method) around kv_errors (its own)."""
    with natspy_failures(op), kv_errors(op):
        yield


@contextlib.contextmanager
def object_store_adapter(op: str):
    with natspy_failures(op), not_found_as_adapter_error():
        yield


ADAPTERS = [kv_adapter, object_store_adapter]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=["kv", "objectstore"])
@pytest.mark.parametrize("exc", NATS_PY_NO_ANSWERS, ids=lambda e: type(e).__name__)
def test_nats_py_operations_without_an_answer_are_indeterminate(adapter, exc):
    """nats-py's timeouts and closed connections reach the checks as Indeterminate, not as the client's refusal."""
    with pytest.raises(Indeterminate), adapter("get"):
        raise exc


@pytest.mark.parametrize("adapter", ADAPTERS, ids=["kv", "objectstore"])
def test_a_failure_inside_nats_py_is_the_clients_answer_in_its_words(adapter):
    """An exception of nats-py's own code (its object store get on an info without a digest raises AttributeError)
    is the client's failed operation, kind other, with its words: a deviation a check words, not a crash."""
    with pytest.raises(ClientError) as failed, adapter("get"):
        raise AttributeError("'NoneType' object has no attribute 'replace'")
    assert not isinstance(failed.value, Indeterminate)
    assert (failed.value.kind, str(failed.value)) == (
        "other",
        "get: AttributeError: 'NoneType' object has no attribute 'replace'",
    )


def test_nats_py_api_refusals_keep_their_codes():
    with pytest.raises(ClientError) as refused, kv_errors("create"):
        raise nats.js.errors.APIError(code=400, err_code=10071, description="wrong last sequence: 3")
    assert (refused.value.kind, refused.value.code, refused.value.err_code) == ("api", 400, 10071)
    assert not isinstance(refused.value, Indeterminate)
