"""The seeded fault schedule of a durability run: which fault when, done and healed in turn.

A schedule (`plan_faults`) is a list of faults, each at a time into the workload, of one kind, held for a while and
then healed: a killed node is started again on its own store and ports, a paused one continued. It is drawn from a
seed alone, so the same seed gives the same schedule on every server version (and a schedule without network
faults the same draws as before they existed); which node is "the leader" is the
one thing only known when the fault is done, and the record of each fault names the nodes it hit.

`run_schedule` does the faults through durability.faults.ClusterFaults, whose `heal_all` continues every paused
node and starts every stopped one, and is what a run calls before its final read, whatever happened.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jetcheck.fault_kinds import DISK_FAULTS, HOLD_S, LOSS_FAULTS, MEMBER_FAULTS, NETWORK_FAULTS, POWER_FAULTS
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.relay import Link

from .faults import ClusterFaults, damage_store
from .history import FaultRecord

# the fault kinds and the default hold are a shared leaf (jetcheck.fault_kinds): the option table offers them; the
# lossy-* ones drop LOSS_PERCENT % of the packets of the leader's links, or of the minority's (durability.packet_loss);
# slow-leader holds every read on the leader's links SLOW_DELAY_S before the relay forwards it (tc netem's delay is
# not in every kernel; the relays are jetcheck's own)
LOSS_PERCENT = 30
SLOW_DELAY_S = 0.1
SPACING_S = 12.0  # one fault about this often, or three times the longest hold if that is longer


@dataclass(frozen=True)
class PlannedFault:
    at_s: float  # seconds into the workload
    kind: str  # one of jetcheck.fault_kinds.FAULT_KINDS
    hold_s: float
    minority: tuple[int, ...]  # node indices for the *-minority kinds (its first for the *-one kinds)


def plan_faults(
    seed: int,
    kinds: list[str],
    window_s: float,
    size: int,
    hold_s: tuple[float, float] = HOLD_S,
    first_at_s: tuple[float, float] | None = None,
) -> list[PlannedFault]:
    """The schedule for a workload of `window_s` seconds on `size` nodes: one fault about every 12 s (at least one,
    each of `kinds` once before any repeats, in an order drawn from `seed`), none in the first or last tenth, each
    held for a time drawn from `hold_s` (at most half the gap to the next; longer holds space the faults wider, so
    the default holds give the schedules they always gave). `first_at_s` (MIN, MAX seconds) moves the first fault
    to a time drawn from it, right after the stream's creation, with a draw of its own (every other draw stays)."""
    rng = random.Random(seed)
    count = max(1, int(window_s // max(SPACING_S, 3 * hold_s[1])))
    order: list[str] = []
    while len(order) < count:
        round_ = list(kinds)
        rng.shuffle(round_)
        order += round_
    start, end = window_s * 0.1, window_s * 0.9
    step = (end - start) / count
    faults = []
    for number, kind in enumerate(order[:count]):
        at = start + step * number + rng.uniform(0, step * 0.3)
        hold = round(rng.uniform(*hold_s), 2)
        minority = tuple(sorted(rng.sample(range(size), (size - 1) // 2)))
        faults.append(PlannedFault(round(at, 2), kind, min(hold, step * 0.5), minority))
    if first_at_s is not None:
        early = random.Random(f"{seed}-first").uniform(*first_at_s)
        faults[0] = PlannedFault(round(early, 2), faults[0].kind, faults[0].hold_s, faults[0].minority)
    return faults


def describe(plan: list[PlannedFault]) -> str:
    """The schedule in one line, for result messages: `kill-leader@6.1s/2.3s, ...`."""
    return ", ".join(f"{fault.kind}@{fault.at_s:g}s/{fault.hold_s:g}s" for fault in plan)


def severed_links(kind: str, targets: list[int], size: int) -> list[Link]:
    """The links a network fault cuts or stalls: every link between `targets` (the minority, or the leader alone)
    and the other nodes; for partition-bridge, the lowest other node keeps both sides and the rest are cut from
    `targets`."""
    others = [i for i in range(size) if i not in targets]
    if kind == "partition-bridge":
        others = others[1:]
    return [(i, j) for i in targets for j in others]


def describe_cut(node: str, dropped: dict) -> str:
    """A power cut's record for one node: `jetcheck-n1: 81,920 unsynced bytes dropped (3 files, 21 pages)`."""
    return f"{node}: {dropped['bytes']:,} unsynced bytes dropped ({dropped['files']} files, {dropped['pages']} pages)"


@dataclass(frozen=True)
class MemberChange:
    """Who a member-* fault hits: the node removed (the stream's leader or a follower) and the nodes killed just
    before (a minority of the others, for member-cycle-kill-minority)."""

    removed: int
    role: str  # "leader" or "follower"
    killed_first: tuple[int, ...]


def draw_member_change(
    kind: str, seed: int, index: int, size: int, leader: int | None, meta_leader: int | None = None
) -> MemberChange:
    """The `index`-th fault's membership change on `size` nodes whose stream leader is `leader` (None: unknown, the
    first node stands in), from a draw of its own (every other schedule's draws stay as they were): the leader or a
    follower, half and half; for member-cycle-kill-minority, also (size - 1) // 2 of the other nodes, never the meta
    group's leader `meta_leader`: it stays up to take the removal while a minority of the meta group is down, the
    state in which #7545's removals went wrong (a leader acting on one without quorum, nats-io/nats-server#7561)."""
    rng = random.Random(f"{seed}-{index}-member")
    lead = leader if leader is not None else 0
    followers = [i for i in range(size) if i != lead]
    if rng.random() < 0.5 or not followers:
        removed, role = lead, "leader"
    else:
        removed, role = rng.choice(followers), "follower"
    others = [i for i in range(size) if i not in (removed, meta_leader)]
    killed = tuple(sorted(rng.sample(others, (size - 1) // 2))) if kind.endswith("-kill-minority") else ()
    return MemberChange(removed, role, killed)


def describe_links(links: list[Link], nodes: list[NatsServerProcess]) -> str:
    return ", ".join(f"{nodes[i].name}-{nodes[j].name}" for i, j in links)


async def run_schedule(
    faults: ClusterFaults,
    plan: list[PlannedFault],
    leader: Callable[[], Awaitable[str | None]],
    started: float,
    seed: int = 0,
    first_healed: asyncio.Event | None = None,
) -> list[FaultRecord]:
    """Do each fault of `plan` at its time after `started` (time.monotonic()), hold it, heal it; `leader` names
    the stream's leader node now (None when there is none: a leader fault then hits the first node). `seed` picks
    where a disk fault damages a file; `first_healed` is set once the first fault has healed (or there is none)."""
    done = []
    for index, fault in enumerate(plan):
        await asyncio.sleep(max(0.0, started + fault.at_s - time.monotonic()))
        if fault.kind in MEMBER_FAULTS:
            name = await leader()
            meta = await faults.members.meta_leader() if faults.members is not None else None
            found, meta_found = faults.index_of(name or ""), faults.index_of(meta or "")
            change = draw_member_change(fault.kind, seed, index, len(faults.nodes), found, meta_found)
            targets = [change.removed, *change.killed_first]
            detail = ""
        elif fault.kind.endswith("-leader"):
            name = await leader()
            found = faults.index_of(name) if name else None
            targets = [found if found is not None else 0]
            detail = f"leader {name}" if found is not None else "no leader answered: the first node"
        elif fault.kind.endswith("-minority") or fault.kind == "partition-bridge":
            targets, detail = list(fault.minority), ""
        elif fault.kind.endswith("-one"):
            targets, detail = list(fault.minority[:1]), ""
        else:
            targets, detail = list(range(len(faults.nodes))), ""
        start_ns = time.time_ns()
        if fault.kind in NETWORK_FAULTS:
            links = severed_links(fault.kind, targets, len(faults.nodes))
            if fault.kind in LOSS_FAULTS:
                await asyncio.to_thread(faults.lose, links, LOSS_PERCENT)
                said = f"{LOSS_PERCENT}% of packets dropped on {describe_links(links, faults.nodes)}"
            elif fault.kind == "slow-leader":
                await asyncio.to_thread(faults.slow, links, SLOW_DELAY_S)
                said = f"{SLOW_DELAY_S * 1000:g} ms added on {describe_links(links, faults.nodes)}"
            else:
                await asyncio.to_thread(faults.sever, links, fault.kind.startswith("stall"))
                how = "stalled" if fault.kind.startswith("stall") else "cut"
                said = f"{how} {describe_links(links, faults.nodes)}"
            if fault.kind == "partition-bridge":
                bridge = set(range(len(faults.nodes))) - set(targets) - {j for _, j in links}
                said = f"bridge {', '.join(faults.nodes[i].name for i in sorted(bridge))}; {said}"
            detail = f"{detail}; {said}" if detail else said
        elif fault.kind in MEMBER_FAULTS:
            # kills first, then the removal, in quick succession as #7545's run did them
            faults.kill(list(change.killed_first))
            killed = ", ".join(faults.nodes[i].name for i in change.killed_first)
            removal = await faults.remove_member(change.removed)
            detail = f"{change.role} {removal}" + (f"; killed just before: {killed}" if killed else "")
            detail += f"; meta leader {meta or 'unknown'}"
        elif fault.kind in POWER_FAULTS:
            dropped = await asyncio.to_thread(faults.power_cut, targets)
            detail = "; ".join(
                describe_cut(faults.nodes[i].name, lost) for i, lost in zip(targets, dropped, strict=True)
            )
        else:
            (faults.pause if fault.kind.startswith("pause") else faults.kill)(targets)
        if fault.kind in DISK_FAULTS:
            # a draw of its own, so the schedule's draws (and every schedule without disk faults) stay the same
            where = random.Random(f"{seed}-{index}").random()
            damaged = fault.minority[:1] if fault.kind.endswith("-one-kill-all") else targets
            detail = "; ".join(damage_store(faults.nodes[i], fault.kind, where) for i in damaged)
        names = [faults.nodes[i].name for i in targets]  # before the heal: a removed node returns renamed
        await asyncio.sleep(fault.hold_s)
        await faults.heal_all()
        if fault.kind in LOSS_FAULTS:
            detail += f" ({faults.dropped} dropped)"
        if fault.kind in MEMBER_FAULTS and faults.members is not None:
            detail = "; ".join([detail, *faults.members.said])
        done.append(FaultRecord(index, fault.kind, names, start_ns, time.time_ns(), detail))
        if first_healed is not None:
            first_healed.set()
    if first_healed is not None:
        first_healed.set()
    return done
