"""Who says it leads which Raft group, sampled from every node's `/raftz` while a durability run goes on.

Each node is asked on its own loop (a paused node holds up only its own samples), about every SAMPLE_EVERY_S, and
every group it reports in state LEADER becomes a LeaderClaim with the term and the sample's window (asked at,
answered by). The checker (durability.checker) finds split-brain in these claims: two nodes leading one group in the
same term. A node that cannot answer (killed, paused, restarting) gives no sample; that is silence, not a claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Protocol

from .history import LeaderClaim

SAMPLE_EVERY_S = 0.5
LEADER_STATE = "LEADER"
# /raftz shows one account's groups: the system account's (the meta group) unless asked for another; the stream's
# and its consumers' groups are in the account of the run's clients, $G on a cluster without accounts
ENDPOINTS = ("raftz", "raftz?acc=%24G")


@dataclass(frozen=True)
class LeaderChange:
    """A group's leadership as the samples first showed it or showed it pass on: `node` leads `group` in `term`,
    said in a sample answered by `at_ns`."""

    group: str
    node: str
    term: int
    at_ns: int

    @property
    def kind(self) -> str:
        """What the group replicates: "meta", "stream" or "consumer" (/raftz's ids: _meta_, S-..., C-...)."""
        if self.group == "_meta_":
            return "meta"
        return {"S": "stream", "C": "consumer"}.get(self.group.partition("-")[0], self.group)


def leader_changes(claims: list[LeaderClaim]) -> list[LeaderChange]:
    """Each group's first leader and every later claim of a newer term or of another node in the same term (the
    latter is a split-brain, which the checker fails), in the order the samples were answered; a claim of an older
    term (a deposed leader not yet told) changes nothing."""
    changes: list[LeaderChange] = []
    current: dict[str, tuple[int, str]] = {}
    for claim in sorted(claims, key=lambda c: c.received_ns):
        held = current.get(claim.group)
        if held is None or claim.term > held[0] or (claim.term == held[0] and claim.node != held[1]):
            current[claim.group] = (claim.term, claim.node)
            changes.append(LeaderChange(claim.group, claim.node, claim.term, claim.received_ns))
    return changes


class Monitored(Protocol):
    name: str

    def monitor(self, endpoint: str) -> dict: ...


def leader_claims(node: str, raftz: dict[str, Any], sent_ns: int, received_ns: int) -> list[LeaderClaim]:
    """The groups a `/raftz` answer (account -> group id -> group) says `node` leads."""
    return [
        LeaderClaim(node, group_id, int(group.get("term", 0)), sent_ns, received_ns)
        for groups in raftz.values()
        if isinstance(groups, dict)
        for group_id, group in groups.items()
        if isinstance(group, dict) and group.get("state") == LEADER_STATE
    ]


async def _sample_node(node: Monitored, claims: list[LeaderClaim], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for endpoint in ENDPOINTS:
            sent = time.time_ns()
            try:
                raftz = await asyncio.to_thread(node.monitor, endpoint)
            except (OSError, ValueError):  # down, paused past the timeout, no such groups (404), or not JSON
                continue
            claims += leader_claims(node.name, raftz, sent, time.time_ns())
        with contextlib.suppress(TimeoutError):  # the next sample is due
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)


async def sample_leaders(nodes: list[Monitored], stop: asyncio.Event) -> list[LeaderClaim]:
    """Every leadership claim of every node, until `stop` is set."""
    claims: list[LeaderClaim] = []
    await asyncio.gather(*(_sample_node(node, claims, stop) for node in nodes))
    return claims
