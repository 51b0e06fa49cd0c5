"""A target's answer to an operation a check needs, in words.

A client's (the KV and object store checks): what the client returned, or the refusal the ADR documents for the case;
anything else the client reports (another refusal, a failure inside it) is the deviation, and the check fails saying
what was documented, whose operation it was and the client's own words, never on the bare exception. No answer
(Indeterminate) is raised on: `error`. The server's (`refused`): the API error a request the documents refuse is
answered with; an answer without one fails the check saying the server accepted it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import pytest

from jetcheck.conformance.clients.base import ClientError, Indeterminate
from jetcheck.conformance.documented_errors import Refusal, refusal_of
from jetcheck.conformance.jsapi import ApiError, api

T = TypeVar("T")


def who(client) -> str:
    return f"{client.name} {client.version}"


async def answered(
    client, documented: str, op: str, call: Awaitable[T], refused_with: type[ClientError] | None = None
) -> T | ClientError:
    """What `call` (the client's `op`) returned, or its refusal when it is a `refused_with` (the documented one);
    any other ClientError fails the check: `documented` (what the ADR says), then what the client raised."""
    try:
        return await call
    except Indeterminate:
        raise
    except ClientError as exc:
        if refused_with is not None and isinstance(exc, refused_with):
            return exc
        happened = "failed" if refused_with is None else "raised another error"
        pytest.fail(f"{documented}; {who(client)}'s {op} {happened}: {exc}")


async def refused(nc, subject: str, body: dict, asked: str) -> Refusal:
    """The API error `subject` answers `body` with; a reply without an error fails the check: `asked` is documented
    as refused."""
    try:
        reply = await api(nc, subject, body)
    except ApiError as error:
        return refusal_of(error)
    pytest.fail(f"{asked} is documented as refused; the server accepted it and answered {reply}")
