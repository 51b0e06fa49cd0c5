"""Disk faults on a stopped node: its stream's last message block file is truncated, or one bit of it flipped, or
the newest Raft snapshot of each of its Raft groups deleted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jetcheck.durability.faults import ClusterFaults, damage_last_block, damage_store
from jetcheck.durability.schedule import PlannedFault, run_schedule
from jetcheck.fixtures.process import NatsServerProcess


def stopped_node_with_blocks(tmp_path: Path, name: str = "n1") -> tuple[NatsServerProcess, Path]:
    node = NatsServerProcess(Path("/nonexistent/nats-server"), tmp_path, name=name)  # never started
    msgs = node.store_dir / "jetstream" / "$G" / "streams" / "S" / "msgs"
    msgs.mkdir(parents=True)
    for number in (1, 2, 10):  # the last block is the highest number, not the last name in text order
        (msgs / f"{number}.blk").write_bytes(bytes(range(100)))
    return node, msgs


def test_truncate_cuts_the_last_block_file_to_the_drawn_share(tmp_path):
    """truncate-minority leaves the highest-numbered block file at `where` of its size, the others untouched."""
    node, msgs = stopped_node_with_blocks(tmp_path)
    said = damage_last_block(node, "truncate-minority", 0.25)
    assert said == "n1: 10.blk truncated from 100 to 25 bytes"
    assert (msgs / "10.blk").stat().st_size == 25
    assert (msgs / "2.blk").read_bytes() == bytes(range(100))


def test_bitflip_changes_exactly_one_bit_of_the_last_block_file(tmp_path):
    """bitflip-minority flips one bit at `where` of the file; every other byte is as it was."""
    node, msgs = stopped_node_with_blocks(tmp_path)
    said = damage_last_block(node, "bitflip-minority", 0.5)
    after = (msgs / "10.blk").read_bytes()
    changed = [i for i, (a, b) in enumerate(zip(bytes(range(100)), after, strict=True)) if a != b]
    assert changed == [50] and after[50] == 50 ^ 0x10
    assert said == "n1: 10.blk bit 4 of byte 50 of 100 flipped"


def test_snapshot_deletion_removes_the_newest_snapshot_of_each_raft_group(tmp_path):
    """snapshot-minority deletes each Raft group's newest snap.<term>.<index> (by term, then index, as numbers),
    and nothing else."""
    node = NatsServerProcess(Path("/nonexistent/nats-server"), tmp_path, name="n1")  # never started
    groups = node.store_dir / "jetstream" / "$SYS" / "_js_"
    names = {"_meta_": ["snap.1.3", "snap.2.10", "snap.2.9"], "S-R3F-abc": ["snap.1.1"], "C-R3F-def": []}
    for group, snapshots in names.items():
        (groups / group / "snapshots").mkdir(parents=True)
        (groups / group / "msgs").mkdir()
        (groups / group / "msgs" / "1.blk").write_bytes(b"x")
        for name in snapshots:
            (groups / group / "snapshots" / name).write_bytes(b"s")
    said = damage_store(node, "snapshot-minority", 0.5)
    assert said == "n1: deleted S-R3F-abc/snap.1.1, _meta_/snap.2.10"
    left = sorted(str(path.relative_to(groups)) for path in groups.rglob("*") if path.is_file())
    assert left == ["C-R3F-def/msgs/1.blk", "S-R3F-abc/msgs/1.blk", "_meta_/msgs/1.blk", "_meta_/snapshots/snap.1.3",
                    "_meta_/snapshots/snap.2.9"]  # fmt: skip


def test_a_store_without_snapshots_says_there_was_none_to_delete(tmp_path):
    """A node whose Raft groups have not snapshotted yet loses nothing, and the fault's record says so."""
    node, _ = stopped_node_with_blocks(tmp_path)
    assert damage_store(node, "snapshot-minority", 0.5) == "n1: no Raft snapshot to delete"


class StoppedNodes(ClusterFaults):
    """The fault schedule's view of three nodes that are already down: kills and heals change nothing."""

    def kill(self, indices: list[int]) -> None:
        self.killed = list(indices)

    async def heal_all(self) -> None:
        pass


@pytest.mark.asyncio
async def test_one_node_damaged_while_every_node_is_down(tmp_path):
    """truncate-one-kill-all kills every node and damages the store of the drawn node alone."""
    nodes = [stopped_node_with_blocks(tmp_path / name, name)[0] for name in ("n1", "n2", "n3")]
    faults = StoppedNodes(nodes)
    plan = [PlannedFault(at_s=0.0, kind="truncate-one-kill-all", hold_s=0.0, minority=(1,))]
    (record,) = await run_schedule(faults, plan, leader=None, started=time.monotonic(), seed=7)
    assert faults.killed == [0, 1, 2] and record.nodes == ["n1", "n2", "n3"]
    assert record.detail.startswith("n2: 10.blk truncated from 100 to ")
    sizes = [(node.store_dir / "jetstream/$G/streams/S/msgs/10.blk").stat().st_size for node in nodes]
    assert sizes[0] == sizes[2] == 100 and sizes[1] < 100
