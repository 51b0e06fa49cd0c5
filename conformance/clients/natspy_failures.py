"""How nats-py's exceptions and missing APIs reach the adapter: as its errors (ClientError with the server's codes,
KeyNotFound, ObjectNotFound, ...), Indeterminate where no answer came, and NotInRelease or Unsupported where the
installed release lacks a call, an option or a field."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
from collections.abc import Callable
from importlib import metadata

import nats.errors
import nats.js.errors

from .base import (
    ClientError,
    DigestMismatch,
    Indeterminate,
    KeyNotFound,
    NotInRelease,
    ObjectExists,
    ObjectNotFound,
    Unsupported,
)


def natspy_api_error(op: str, exc: nats.js.errors.APIError) -> ClientError:
    """The server's refusal as nats-py raised it, with its codes, named by the operation."""
    return ClientError("api", f"{op}: {type(exc).__name__}: {exc}", exc.code, exc.err_code)


WRONG_LAST_SEQUENCE = 10071  # JSStreamWrongLastSequenceErr


# nats-py's errors for an operation that got no answer: the outcome is unknown, not a refusal
NO_ANSWER = (
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.NoServersError,
    nats.errors.StaleConnectionError,
    asyncio.TimeoutError,
)


@contextlib.contextmanager
def kv_errors(op: str):
    """nats-py's KV exceptions as the adapter's: a key without a value is KeyNotFound, API refusals keep codes."""
    try:
        yield
    except nats.js.errors.KeyNotFoundError as exc:  # KeyDeletedError too
        raise KeyNotFound("not_found", f"{op}: {type(exc).__name__}: {exc}") from None
    except nats.js.errors.KeyWrongLastSequenceError as exc:
        # nats-py names the server's 400/10071 by this class and drops the codes; the class is the code's meaning
        raise ClientError("api", f"{op}: {type(exc).__name__}: {exc}", 400, WRONG_LAST_SEQUENCE) from None
    except nats.js.errors.APIError as exc:
        raise natspy_api_error(op, exc) from None
    # the rest (no answer, the client's other errors) is natspy_failures', around every KV method


@contextlib.contextmanager
def natspy_failures(op: str):
    """What the adapter's own mappings leave of an exception from inside nats-py (an error they give no meaning, or
    a Python error of nats-py's code, e.g. the AttributeError its object store get raises on an info without a
    digest): ClientError kind "other" in the client's words, as a driver answers for a client's failed operation.
    The adapter's errors pass as they are; no answer (a timeout, a lost connection) stays Indeterminate."""
    try:
        yield
    except (ClientError, NotInRelease):
        raise
    except NO_ANSWER as exc:
        raise Indeterminate("timeout", f"{op}: {type(exc).__name__}: {exc}") from None
    except ConnectionError as exc:
        raise Indeterminate("connection", f"{op}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:
        raise ClientError("other", f"{op}: {type(exc).__name__}: {exc}") from None


def failures_in_words(cls: type) -> type:
    """`cls` with each of its public coroutine methods under natspy_failures (named by the method)."""

    def guarded(name: str, method: Callable) -> Callable:
        @functools.wraps(method)
        async def call(*args, **kwargs):
            with natspy_failures(name):
                return await method(*args, **kwargs)

        return call

    for name, method in list(vars(cls).items()):
        if inspect.iscoroutinefunction(method) and not name.startswith("_"):
            setattr(cls, name, guarded(name, method))
    return cls


def natspy_lacks(call, option: str, version: str) -> None:
    """Unsupported when nats-py's `call` takes no `option` argument (it would raise TypeError)."""
    if option not in inspect.signature(call).parameters:
        raise Unsupported("unsupported", f"nats-py {version}'s {call.__qualname__} has no {option} option")


def call_shape(call) -> str:
    """`call` as the installed release has it: its name and parameters, e.g. JetStreamContext.publish(subject, ...)."""
    names = [name for name in inspect.signature(call).parameters if name != "self"]
    return f"{call.__qualname__}({', '.join(names)})"


def not_in_release(what: str) -> NotInRelease:
    return NotInRelease(f"not in nats-py {metadata.version('nats-py')}: {what}")


def release_call(owner, name: str):
    """`owner.name`, an API of later nats-py releases that this adapter uses; NotInRelease when the installed
    release lacks it."""
    found = getattr(owner, name, None)
    if found is None:
        raise not_in_release(f"{type(owner).__qualname__}.{name}")
    return found


def release_option(call, option: str) -> None:
    """NotInRelease when the installed release's `call` takes no `option` (later releases do)."""
    if option not in inspect.signature(call).parameters:
        raise not_in_release(f"{call.__qualname__}({option}=)")


def release_field(config: type, field: str) -> None:
    """NotInRelease when the installed release's config dataclass `config` has no `field` (later releases do)."""
    if field not in {f.name for f in dataclasses.fields(config)}:
        raise not_in_release(f"{config.__qualname__}.{field}")


@contextlib.contextmanager
def not_found_as_adapter_error():
    """nats-py's object store errors as the adapter's: ObjectNotFoundError (and NotFoundError for a missing bucket),
    ObjectAlreadyExists, DigestMismatchError."""
    try:
        yield
    except NO_ANSWER as exc:
        raise Indeterminate("timeout", f"{type(exc).__name__}: {exc}") from None
    except nats.js.errors.NotFoundError as exc:
        raise ObjectNotFound("not_found", f"{type(exc).__name__}: {exc}") from None
    except nats.js.errors.ObjectAlreadyExists as exc:
        raise ObjectExists("exists", f"{type(exc).__name__}: {exc}") from None
    except nats.js.errors.DigestMismatchError as exc:
        raise DigestMismatch("digest_mismatch", f"{type(exc).__name__}: {exc}") from None
