"""The power-loss layer: what a file was given after its last fsync is gone after a cut, what was synced is all
there, and the figures of a cut say how much was dropped. First on the layer's operations alone, then through a
real FUSE mount and a small program that writes through it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from jetcheck import cli
from jetcheck.durability import power_loss
from jetcheck.durability.faults import ClusterFaults
from jetcheck.durability.history import HISTORY_DIR, FaultRecord, read_history
from jetcheck.durability.power_loss import PAGE, PowerLossDisk, PowerLossDisks, PowerLossLayer, what_is_missing
from jetcheck.durability.schedule import PlannedFault, run_schedule
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.records import RUN_FILE

from ..conftest import SERVER_VERSION
from .test_durability_run import run_with_failing_session

MISSING = what_is_missing()
NEEDS_FUSE = pytest.mark.skipif(bool(MISSING), reason=MISSING)


def backing_bytes(layer: PowerLossLayer, path: str) -> bytes:
    return Path(layer.backing + path).read_bytes()


def test_only_what_was_fsynced_reaches_the_backing_file(tmp_path):
    """write, fsync, write: the backing file holds the first write alone, reads see both, a cut drops the second."""
    layer = PowerLossLayer(tmp_path)
    fh = layer.create("/f", 0o644)
    layer.write("/f", b"a" * 5000, 0, fh)
    layer.fsync("/f", 0, fh)
    layer.write("/f", b"b" * 3000, 5000, fh)
    assert layer.getattr("/f")["st_size"] == 8000
    assert layer.read("/f", 9000, 0, fh) == b"a" * 5000 + b"b" * 3000
    assert backing_bytes(layer, "/f") == b"a" * 5000
    assert layer.cut() == {"files": 1, "bytes": 3000, "pages": 1, "largest": {"/f": 3000}}
    assert layer.read("/f", 9000, 0, fh) == b"a" * 5000
    layer.release("/f", fh)


def test_an_overwrite_of_synced_bytes_is_undone_by_a_cut(tmp_path):
    """Bytes overwritten in place after the fsync come back as they were synced."""
    layer = PowerLossLayer(tmp_path)
    fh = layer.create("/f", 0o644)
    layer.write("/f", b"x" * (2 * PAGE), 0, fh)
    layer.fsync("/f", 1, fh)  # fdatasync counts as much
    layer.write("/f", b"y" * 10, PAGE - 5, fh)
    assert layer.read("/f", 20, PAGE - 10, fh) == b"x" * 5 + b"y" * 10 + b"x" * 5
    assert layer.cut()["bytes"] == 10
    assert backing_bytes(layer, "/f") == b"x" * (2 * PAGE)


def test_a_truncate_is_held_until_the_fsync_and_its_bytes_stay_gone(tmp_path):
    """A truncate is not durable until the fsync; after it, a file grown again reads zeros where the cut bytes were,
    and so does its backing file once synced."""
    layer = PowerLossLayer(tmp_path)
    fh = layer.create("/f", 0o644)
    layer.write("/f", b"z" * 10000, 0, fh)
    layer.fsync("/f", 0, fh)
    layer.truncate("/f", 100)
    assert layer.getattr("/f")["st_size"] == 100
    assert backing_bytes(layer, "/f") == b"z" * 10000
    layer.truncate("/f", 9000)
    assert layer.read("/f", 9000, 0, fh) == b"z" * 100 + bytes(8900)
    layer.fsync("/f", 0, fh)
    assert backing_bytes(layer, "/f") == b"z" * 100 + bytes(8900)
    layer.truncate("/f", 0)
    layer.cut()
    assert backing_bytes(layer, "/f") == b"z" * 100 + bytes(8900)


def test_unsynced_data_follows_a_rename_and_goes_with_an_unlink(tmp_path):
    """Renames and unlinks reach the disk at once (the layer's model); unsynced bytes move with the name."""
    layer = PowerLossLayer(tmp_path)
    layer.mkdir("/d", 0o755)
    fh = layer.create("/d/tmp", 0o644)
    layer.write("/d/tmp", b"new", 0, fh)
    layer.rename("/d/tmp", "/d/final")
    assert sorted(os.listdir(tmp_path / "d")) == ["final"]
    assert layer.read("/d/final", 10, 0, fh) == b"new"
    layer.fsync("/d/final", 0, fh)
    assert backing_bytes(layer, "/d/final") == b"new"
    fh2 = layer.create("/d/gone", 0o644)
    layer.write("/d/gone", b"q" * 100, 0, fh2)
    layer.unlink("/d/gone")
    assert layer.figures() == {"files": 0, "bytes": 0, "pages": 0, "largest": {}}


# A program that writes through the mount as a server would: some files fsynced, some not, one synced and then
# written again; it prints nothing, the test reads the files after the cut.
WRITER = textwrap.dedent(
    """
    import os, sys
    root = sys.argv[1]
    os.makedirs(f"{root}/msgs", exist_ok=True)
    fd = os.open(f"{root}/msgs/1.blk", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"synced-1|" * 1000)
    os.fsync(fd)
    os.write(fd, b"lost-1|" * 1000)
    os.close(fd)
    fd = os.open(f"{root}/msgs/2.blk", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"lost-2|" * 500)
    os.close(fd)
    fd = os.open(f"{root}/index.db", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"synced-index")
    os.fdatasync(fd)
    os.close(fd)
    """
)


@NEEDS_FUSE
def test_a_cut_leaves_exactly_the_synced_bytes_of_a_program_that_wrote_through_the_mount(tmp_path):
    """Through a real mount: after the cut and a fresh mount, the program's synced bytes are all there and nothing
    it wrote after its last fsync is; the cut's figures count the dropped bytes and files."""
    disk = PowerLossDisk(tmp_path / "store", tmp_path / "disk")
    disk.mount()
    try:
        subprocess.run([sys.executable, "-c", WRITER, str(disk.store)], check=True, timeout=30)
        before = (disk.store / "msgs" / "1.blk").read_bytes()
        assert before == b"synced-1|" * 1000 + b"lost-1|" * 1000  # a read sees what was written
        held = {"files": 2, "bytes": 7000 + 3500, "pages": 3, "largest": {"/msgs/1.blk": 7000, "/msgs/2.blk": 3500}}
        assert disk.unsynced() == held
        assert disk.cut() == held
        assert os.path.ismount(disk.store)
        assert (disk.store / "msgs" / "1.blk").read_bytes() == b"synced-1|" * 1000
        assert (disk.store / "msgs" / "2.blk").read_bytes() == b""  # created (kept), never synced
        assert (disk.store / "index.db").read_bytes() == b"synced-index"
        assert disk.unsynced()["bytes"] == 0
    finally:
        disk.unmount()
    assert not os.path.ismount(disk.store)
    assert (tmp_path / "disk" / "msgs" / "1.blk").read_bytes() == b"synced-1|" * 1000


@NEEDS_FUSE
def test_a_mount_whose_folders_were_removed_under_it_is_still_taken_down(tmp_path):
    """A cluster's cleanup removes the node folders (backing folder included) before the layer is unmounted; the
    mount must not outlive the run (os.path.ismount no longer sees it then)."""
    disk = PowerLossDisk(tmp_path / "n1" / "store", tmp_path / "n1" / "disk")
    disk.mount()
    (disk.store / "f").write_bytes(b"x")
    shutil.rmtree(tmp_path / "n1", ignore_errors=True)
    disk.unmount()
    mounts = Path("/proc/mounts").read_text()
    assert str(disk.store) not in mounts
    shutil.rmtree(tmp_path / "n1")


class DownNodes(ClusterFaults):
    """The fault schedule's view of nodes that are not running: kills and heals change nothing, the power cuts are
    real (the stores are mounted on the layer)."""

    def kill(self, indices: list[int]) -> None:
        self.killed = set(indices)

    async def heal_all(self) -> None:
        pass


@NEEDS_FUSE
@pytest.mark.asyncio
async def test_power_cuts_drop_the_unsynced_writes_of_the_one_the_minority_or_every_node(tmp_path):
    """power-cut-one cuts the drawn node alone, power-cut-minority the minority, power-cut-all every node; each
    cut node loses what it had not synced, the record and the figures say how much, the others keep theirs."""
    names = [f"n{i}" for i in range(1, 6)]
    nodes = [NatsServerProcess(Path("/nonexistent/nats-server"), tmp_path / name, name=name) for name in names]
    with PowerLossDisks([node.store_dir for node in nodes]) as disks:
        faults = DownNodes(nodes, disks=disks)

        def write_unsynced() -> None:
            for number, node in enumerate(nodes, 1):
                (node.store_dir / "1.blk").write_bytes(b"m" * 100 * number)

        plan = [
            PlannedFault(at_s=0.0, kind="power-cut-one", hold_s=0.0, minority=(3, 1)),
            PlannedFault(at_s=0.0, kind="power-cut-minority", hold_s=0.0, minority=(1, 3)),
            PlannedFault(at_s=0.0, kind="power-cut-all", hold_s=0.0, minority=(0, 2)),
        ]
        records = []
        for fault in plan:
            write_unsynced()
            (record,) = await run_schedule(faults, [fault], leader=None, started=time.monotonic())
            records.append(record)
            kept = [(node.store_dir / "1.blk").stat().st_size for node in nodes]
            assert [size == 0 for size in kept] == [name in record.nodes for name in names], (fault.kind, kept)
    assert [r.nodes for r in records] == [["n4"], ["n2", "n4"], names]
    assert records[0].detail == "n4: 400 unsynced bytes dropped (1 files, 1 pages)"
    assert [(cut["node"], cut["bytes"]) for cut in faults.power_cuts] == [
        ("n4", 400), ("n2", 200), ("n4", 400), ("n1", 100), ("n2", 200), ("n3", 300), ("n4", 400), ("n5", 500)
    ]  # fmt: skip
    assert not any(str(tmp_path) in line for line in Path("/proc/mounts").read_text().splitlines())


def mounts_under(folder: Path) -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if str(folder) in line]


@NEEDS_FUSE
def test_a_short_run_with_power_cuts_and_sync_always_loses_nothing_and_says_what_each_cut_dropped(
    tmp_path, monkeypatch, capsys
):
    """12 s of writes on three nodes whose stores are on the layer, every node's power cut: with sync_interval
    always every rule holds; each cut's record and run.json say how many unsynced bytes each node lost; no mount
    and no folder is left."""
    temp = tmp_path / "tmp"  # the cluster's folders go here alone, whatever other tests run beside this one
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    out = tmp_path / "out"
    argv = ["durability", "--server-version", SERVER_VERSION, "--duration", "12s", "--seed", "1"]
    code = cli.main([*argv, "--faults", "power-cut-all", "--sync-interval", "always", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "sync_interval always, power-loss layer, schedule power-cut-all@" in printed.out
    (fault,) = read_history(out / HISTORY_DIR, FaultRecord)
    assert fault.kind == "power-cut-all" and len(fault.nodes) == 3
    assert re.fullmatch(r"(jetcheck-n\d: [\d,]+ unsynced bytes dropped \(\d+ files, \d+ pages\)(; )?){3}", fault.detail)
    run = json.loads((out / RUN_FILE).read_text())
    assert run["server"]["power_loss_layer"] is True
    assert sorted(cut["node"] for cut in run["power_cuts"]) == fault.nodes
    assert mounts_under(temp) == []
    assert list(temp.iterdir()) == []


@NEEDS_FUSE
def test_a_failing_run_on_the_layer_leaves_no_mount_no_layer_and_no_folder(tmp_path, monkeypatch, capsys):
    """When the run fails once the cluster is up on the layer, every mount is taken down, every layer process
    ended and the temp folder removed."""
    seen: list[int] = []

    def look(nodes, links, temp):
        seen.append(len(mounts_under(temp)))

    run_with_failing_session(tmp_path, monkeypatch, capsys, ["--faults", "power-cut-one"], look)
    assert seen == [3]
    assert mounts_under(tmp_path) == []


def test_the_layer_is_refused_on_a_described_cluster(tmp_path, capsys):
    """A user's cluster keeps its own stores: a power cut or --power-loss-layer is refused in one line, exit 2."""
    described = ["durability", "--server", f"cluster-file:{tmp_path / 'c.toml'}", "--allow-faults"]
    assert cli.main([*described, "--faults", "power-cut-all"]) == 2
    assert "power-cut-all need a cluster jetcheck starts" in capsys.readouterr().err
    assert cli.main([*described, "--power-loss-layer"]) == 2
    assert "--power-loss-layer needs a cluster jetcheck starts" in capsys.readouterr().err


def test_a_power_cut_without_root_is_one_line_and_exit_2(monkeypatch, capsys):
    """Without root (or FUSE) a power cut is refused before any node starts, naming what is needed."""
    monkeypatch.setattr(power_loss.os, "geteuid", lambda: 1000)
    assert cli.main(["durability", "--faults", "power-cut-one", "--duration", "5s"]) == 2
    assert "the power-loss layer (power-cut-* faults, --power-loss-layer):" in capsys.readouterr().err
