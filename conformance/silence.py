"""Silence in a check: a subscription, watch or client that stays quiet tells something about a rule only while the
one that should speak still answers.

After every silence a check asks (`answering`): the server, through a nats-py connection's round trip, and the
client under test, through its session's `ping`. A party that does not answer leaves the outcome undetermined: the
check ends in `error` (Indeterminate), never in a pass (nothing came, as the rule wants) nor in a fail (nothing
came, against the rule).
"""

from __future__ import annotations

import nats.errors
from nats.aio.client import Client

from jetcheck.conformance.clients.base import (
    ClientError,
    ClientSession,
    Delivery,
    Indeterminate,
    Subscription,
    Unsupported,
)

PING_TIMEOUT_S = 5.0


async def answering(*parties: Client | ClientSession) -> None:
    """Return when every party answers a ping within PING_TIMEOUT_S; otherwise raise Indeterminate."""
    for party in parties:
        server = isinstance(party, Client)
        who = "the server" if server else "the client under test"
        try:
            if server:
                await party.flush(timeout=PING_TIMEOUT_S)
            else:
                await party.ping(PING_TIMEOUT_S)
        except Unsupported:
            continue  # a driver without the op still answered: the client program is alive
        except (ClientError, nats.errors.Error, ConnectionError, TimeoutError) as exc:
            raise Indeterminate(
                "silent",
                f"{who} went silent and then did not answer a ping within {PING_TIMEOUT_S:.0f} s "
                f"({type(exc).__name__}: {exc}): the outcome is not determined",
            ) from None


async def deliveries(sub: Subscription, count: int, timeout: float, *parties: Client | ClientSession) -> list[Delivery]:
    """What `sub` delivered once `count` deliveries arrived or `timeout` passed; fewer than `count` count only while
    `parties` still answer (`answering`)."""
    got = await sub.inbox.until(count, timeout)
    if len(got) < count:
        await answering(*parties)
    return got
