"""Faults done to the nodes of a cluster: kill -9, SIGSTOP and SIGCONT, route links cut, stalled, slowed or made
lossy, and a stopped node's store damaged; `ClusterFaults.heal_all` undoes every one of them.

Every signal goes through the node's process (fixtures.process, fixtures.children) or, on a described cluster, the
user's commands (durability.described_cluster); links go through the cluster's route relays (fixtures.relay) and
packet loss through the run's own network namespace (durability.packet_loss). The schedule (durability.schedule)
says which fault when.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.relay import Link, RouteMesh

from .membership import Membership
from .packet_loss import PacketLoss
from .power_loss import PowerLossDisks

NODE_READY_TIMEOUT_S = 90.0  # a node restarted on a busy machine replays its store before /healthz says 200
HEALTH_POLL_S = 0.1


class ClusterFaults:
    """Kills, pauses, partitions and heals nodes of one cluster; remembers what is hurt so `heal_all` can undo
    everything. `links` (the cluster's route relays) is needed for the network faults alone."""

    def __init__(
        self,
        nodes: list[NatsServerProcess],
        links: RouteMesh | None = None,
        loss: PacketLoss | None = None,
        disks: PowerLossDisks | None = None,
        members: Membership | None = None,
    ) -> None:
        self.nodes = nodes
        self.links = links
        self.loss = loss  # for the lossy-* faults: the run's own network namespace
        self.disks = disks  # for the power-cut-* faults: each node's store on the power-loss layer
        self.members = members  # for the member-* faults: peer removal through the API, and the return
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        self.cut_off: set[int] = set()  # nodes with a cut, stalled, slowed or lossy link
        self.dropped = 0  # packets the last heal found dropped since its lossy fault began
        self.power_cuts: list[dict] = []  # per node of each power cut: its name and what it dropped

    def _mesh(self) -> RouteMesh:
        if self.links is None:
            raise TargetError("a network fault needs a cluster whose routes go through relays (partitionable)")
        return self.links

    def _touched(self, links: list[Link]) -> None:
        self.cut_off.update(i for link in links for i in link)

    def sever(self, links: list[Link], stall: bool = False) -> None:
        mesh = self._mesh()
        (mesh.stall if stall else mesh.cut)(links)
        self._touched(links)

    def slow(self, links: list[Link], delay_s: float) -> None:
        """Hold each read on `links` `delay_s` before it is forwarded, until the heal."""
        self._mesh().slow(links, delay_s)
        self._touched(links)

    def lose(self, links: list[Link], percent: int) -> None:
        """Drop `percent` % of the packets of `links` until the heal."""
        mesh = self._mesh()
        if self.loss is None:
            raise TargetError("packet loss needs a network namespace of the run's own")
        self.loss.drop(mesh.ports_of(links), percent)
        self._touched(links)

    def index_of(self, name: str) -> int | None:
        return next((i for i, node in enumerate(self.nodes) if node.name == name), None)

    def kill(self, indices: list[int]) -> None:
        for i in indices:
            node = self.nodes[i]
            node.kill()
            self.killed.add(i)
            self.paused.discard(i)

    def power_cut(self, indices: list[int]) -> list[dict]:
        """kill -9 each node of `indices`, then drop what its store was given and not synced (the power cut) and
        mount it afresh; the figures of what each lost (files, bytes, pages). Started again by `heal_all`."""
        if self.disks is None:
            raise TargetError("a power cut needs the nodes' stores on the power-loss layer (durability.power_loss)")
        self.kill(indices)
        with ThreadPoolExecutor(len(indices)) as pool:  # at once, as the power goes out: each remount takes a while
            dropped = list(pool.map(lambda i: self.disks.disks[i].cut(), indices))
        self.power_cuts += [{"node": self.nodes[i].name, **lost} for i, lost in zip(indices, dropped, strict=True)]
        return dropped

    async def remove_member(self, index: int) -> str:
        """kill -9 node `index`, wipe its store and peer-remove it (durability.membership); what the servers said.
        `heal_all` brings it back as a new server."""
        if self.members is None:
            raise TargetError("a membership change needs a cluster with a system account (durability.membership)")
        self.kill([index])
        return await self.members.remove(index)

    def pause(self, indices: list[int]) -> None:
        for i in indices:
            self.nodes[i].pause()
            self.paused.add(i)

    async def heal_all(self) -> None:
        """Reconnect every link, continue every paused node, start every killed one, and wait until each says it
        is healthy (a TargetError if one exits or is not healthy in time). Awaited rather than blocking, so an
        interrupt reaches the run at once and its cleanup stops every node. A peer-removed node starts last, under
        a fresh name once the others are up, and is waited for until the stream has a replica on it again."""
        removed = set(self.members.removed) if self.members is not None else set()
        hurt = sorted((self.paused | self.killed | self.cut_off) - removed)
        if self.loss is not None:
            self.dropped = await asyncio.to_thread(self.loss.heal)
        if self.links is not None:
            await asyncio.to_thread(self.links.heal)
        self.cut_off.clear()
        for i in sorted(self.paused):
            self.nodes[i].resume()
        for i in sorted(self.killed - removed):
            self.nodes[i].launch()
        self.paused.clear()
        self.killed.clear()
        for i in hurt:
            await wait_healthy(self.nodes[i], NODE_READY_TIMEOUT_S)
        if removed and self.members is not None:
            await self.members.rename_removed()
            for i in sorted(removed):
                self.nodes[i].launch()
            for i in sorted(removed):
                await wait_healthy(self.nodes[i], NODE_READY_TIMEOUT_S)
            await self.members.await_placed()


async def wait_healthy(node: NatsServerProcess, timeout_s: float) -> None:
    """Return once `node`'s /healthz answers 200; TargetError if it exits first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(node.healthy):
        if not node.running:
            raise TargetError(f"{node.name} exited while it restarted: {node.log_tail(3)}")
        if time.monotonic() >= deadline:
            raise TargetError(f"{node.name} not healthy {timeout_s:g} s after it restarted: {node.log_tail(3)}")
        await asyncio.sleep(HEALTH_POLL_S)


def damage_store(node: NatsServerProcess, kind: str, where: float) -> str:
    """Do the disk fault `kind` to a stopped node's store; says what it did, for the fault's record."""
    if kind.startswith("snapshot"):
        return delete_newest_snapshots(node)
    return damage_last_block(node, kind, where)


def delete_newest_snapshots(node: NatsServerProcess) -> str:
    """Delete the newest Raft snapshot (snapshots/snap.<term>.<index>) of each Raft group (the meta group, each
    stream's and each consumer's) in a stopped node's store; says which, for the fault's record. A group that has
    not snapshotted yet has none to lose, and the record says so."""
    assert not node.running, "a disk fault is done to a stopped node"
    deleted = []
    for group in sorted(node.store_dir.glob("jetstream/$SYS/_js_/*/snapshots")):
        snapshots = [path for path in group.glob("snap.*.*") if _snapshot_position(path) is not None]
        if snapshots:
            newest = max(snapshots, key=_snapshot_position)
            newest.unlink()
            deleted.append(f"{group.parent.name}/{newest.name}")
    if not deleted:
        return f"{node.name}: no Raft snapshot to delete"
    return f"{node.name}: deleted {', '.join(deleted)}"


def _snapshot_position(path: Path) -> tuple[int, int] | None:
    """(term, index) of a Raft snapshot file named snap.<term>.<index>; None for any other name."""
    _, _, position = path.name.partition(".")
    term, _, index = position.partition(".")
    return (int(term), int(index)) if term.isdigit() and index.isdigit() else None


def damage_last_block(node: NatsServerProcess, kind: str, where: float) -> str:
    """Truncate (to `where` of its size) or flip one bit (at `where` of its size) of the last message block file of
    the streams in a stopped node's store; says what it did, for the fault's record."""
    assert not node.running, "a disk fault is done to a stopped node"
    blocks = sorted(node.store_dir.glob("jetstream/*/streams/*/msgs/*.blk"), key=lambda path: int(path.stem))
    if not blocks:
        return f"{node.name}: no block file to damage"
    last = blocks[-1]
    size = last.stat().st_size
    offset = min(int(size * where), max(size - 1, 0))
    if kind.startswith("truncate"):
        os.truncate(last, offset)
        return f"{node.name}: {last.name} truncated from {size} to {offset} bytes"
    if size == 0:
        return f"{node.name}: {last.name} is empty, no bit to flip"
    with open(last, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ 0x10]))
    return f"{node.name}: {last.name} bit 4 of byte {offset} of {size} flipped"
