"""The power-loss layer: what a file was given after its last fsync is gone after a cut, what was synced is all
there, and the figures of a cut say how much was dropped. First on the layer's operations alone, then through a
real FUSE mount and a small program that writes through it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jetcheck.durability.power_loss import PAGE, PowerLossDisk, PowerLossLayer, what_is_missing

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
    assert layer.cut() == {"files": 1, "bytes": 3000, "pages": 1}
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
    assert layer.figures() == {"files": 0, "bytes": 0, "pages": 0}


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
        assert disk.unsynced() == {"files": 2, "bytes": 7000 + 3500, "pages": 3}
        dropped = disk.cut()
        assert dropped == {"files": 2, "bytes": 10500, "pages": 3}
        assert os.path.ismount(disk.store)
        assert (disk.store / "msgs" / "1.blk").read_bytes() == b"synced-1|" * 1000
        assert (disk.store / "msgs" / "2.blk").read_bytes() == b""  # created (kept), never synced
        assert (disk.store / "index.db").read_bytes() == b"synced-index"
        assert disk.unsynced() == {"files": 0, "bytes": 0, "pages": 0}
    finally:
        disk.unmount()
    assert not os.path.ismount(disk.store)
    assert (tmp_path / "disk" / "msgs" / "1.blk").read_bytes() == b"synced-1|" * 1000
