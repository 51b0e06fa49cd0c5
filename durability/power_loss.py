"""A power cut for one node's store: a FUSE file system that keeps what was written but not yet fsynced apart,
and drops it when the power is "cut" (LazyFS, which Jepsen used, is the model).

Mounted over a node's store folder (`PowerLossDisk`), it passes every read and write through to a backing folder
(the node's "disk") with one difference: the bytes a file is given, and its new size, stay in this process's own
page cache until that file is fsynced (fsync or fdatasync), and only then reach the backing file. Reads see the
cached bytes over the backing ones, as reads through a kernel's page cache do. `cut()` is the power going out: the
cache is thrown away and its size reported, the mount is taken down and mounted afresh on the backing folder, which
holds exactly what was synced.

What it models, and what not:
- File contents and sizes (write, truncate, O_TRUNC) are lost unless the file was fsynced after them.
- Namespace operations (create, mkdir, rename, unlink, link, symlink, chmod, utimens) reach the backing folder at
  once: they are kept, as a journaling file system that committed them keeps them. A new file whose directory was
  never fsynced survives the cut, with its synced contents (empty if never fsynced). fsyncdir does nothing.
- Nothing is written back on a timer: a real kernel writes dirty pages back within about 30 s, so this loses more
  than a real power cut can, as LazyFS does (its point is to lose what the program did not make durable).
- The backing files are not fsynced themselves: the machine's own disk does not lose power here.

The layer runs in a process of its own (`python -m jetcheck.durability.power_loss BACKING MOUNT CONTROL`, libfuse3
through mfusepy), so the run's event loop and the file system do not share an interpreter; its control socket (abstract,
named CONTROL) answers `status` and `cut` with JSON figures (files, bytes and pages unsynced, the largest files).

mfusepy (ctypes over Debian's libfuse3) is used rather than pyfuse3 (needs libfuse3-dev and a compiler) or go-fuse
(a Go helper to build): no build step, and measured cheap enough for a durability run's write rate (durability
guide).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from jetcheck.fixtures import children
from jetcheck.fixtures.errors import TargetError

PAGE = 4096
MOUNT_TIMEOUT_S = 10.0
UNMOUNT_TIMEOUT_S = 10.0
CONTROL_TIMEOUT_S = 10.0
FSNAME = "jetcheck-power-loss"
LARGEST = 5  # files named in a cut's figures


@dataclass
class Unsynced:
    """What one file holds beyond its backing file: its size now, the pages written since its last fsync, and
    (per page) the span from the first to the last byte written there; backing bytes at or past `clip` (the
    smallest size it had since that fsync) are gone and read as zeros."""

    size: int
    clip: int
    pages: dict[int, bytearray] = field(default_factory=dict)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)

    def dirty_bytes(self) -> int:
        return sum(end - start for start, end in self.spans.values())


def _read_backing(fd: int, offset: int, size: int, clip: int) -> bytes:
    """`size` bytes at `offset` of a backing file as the layer sees it: zeros at and past `clip` and past its end."""
    if offset >= clip:
        return bytes(size)
    data = os.pread(fd, min(size, clip - offset), offset)
    return data + bytes(size - len(data))


class PowerLossLayer:
    """The file system's operations (mfusepy's Operations protocol) over the folder `backing`."""

    use_ns = True  # mfusepy: timestamps in nanoseconds

    def __init__(self, backing: Path) -> None:
        self.backing = str(backing)
        self.unsynced: dict[str, Unsynced] = {}  # by path in the mount
        self._state_lock = threading.Lock()  # not `lock`: mfusepy maps FUSE's lock operation to that name
        self.mounted = threading.Event()

    def _real(self, path: str) -> str:
        return self.backing + path

    # what a cut needs

    def figures(self) -> dict:
        with self._state_lock:
            return self._figures()

    def _figures(self) -> dict:
        """Files written or truncated since their last fsync, the bytes written to them since, their pages, and the
        LARGEST files of the most unsynced bytes (path: bytes), which say whose writes a cut loses."""
        dirty = {path: entry.dirty_bytes() for path, entry in self.unsynced.items()}
        return {
            "files": len(self.unsynced),
            "bytes": sum(dirty.values()),
            "pages": sum(len(u.pages) for u in self.unsynced.values()),
            "largest": dict(sorted(dirty.items(), key=lambda item: -item[1])[:LARGEST]),
        }

    def cut(self) -> dict:
        """Drop everything not synced; the figures of what was dropped."""
        with self._state_lock:
            dropped = self._figures()
            self.unsynced.clear()
        return dropped

    # the cache

    def _entry(self, path: str, fd: int | None = None) -> Unsynced:
        entry = self.unsynced.get(path)
        if entry is None:
            size = os.fstat(fd).st_size if fd is not None else os.lstat(self._real(path)).st_size
            entry = self.unsynced[path] = Unsynced(size, size)
        return entry

    def _page(self, entry: Unsynced, fd: int, index: int) -> bytearray:
        page = entry.pages.get(index)
        if page is None:
            page = entry.pages[index] = bytearray(_read_backing(fd, index * PAGE, PAGE, entry.clip))
        return page

    def _truncate(self, path: str, length: int) -> None:
        fd = os.open(self._real(path), os.O_RDONLY)
        try:
            entry = self._entry(path, fd)
            if length < entry.size:
                last = length // PAGE
                for index in [i for i in entry.pages if i > last or (i == last and length % PAGE == 0)]:
                    del entry.pages[index]
                    entry.spans.pop(index, None)
                if length % PAGE and last in entry.pages:
                    entry.pages[last][length % PAGE :] = bytes(PAGE - length % PAGE)
                    start, end = entry.spans.get(last, (0, 0))
                    if end > length:
                        entry.spans[last] = (min(start, length), length)
                entry.clip = min(entry.clip, length)
            entry.size = length
        finally:
            os.close(fd)

    # file operations

    def getattr(self, path: str, fh: int | None = None) -> dict:
        st = os.lstat(self._real(path))
        attrs = {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_ino", "st_dev")}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        with self._state_lock:
            entry = self.unsynced.get(path)
            attrs["st_size"] = entry.size if entry is not None else st.st_size
        attrs["st_blocks"] = (attrs["st_size"] + 511) // 512
        return attrs

    def open(self, path: str, flags: int) -> int:
        fd = os.open(self._real(path), (flags & os.O_ACCMODE) if flags & os.O_ACCMODE != os.O_WRONLY else os.O_RDWR)
        if flags & os.O_TRUNC:
            with self._state_lock:
                self._truncate(path, 0)
        return fd

    def create(self, path: str, mode: int, flags: int = os.O_RDWR) -> int:
        fd = os.open(self._real(path), os.O_RDWR | os.O_CREAT, mode)
        with self._state_lock:
            self.unsynced.pop(path, None)  # a new file (an existing one opened with O_CREAT comes through open)
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._state_lock:
            entry = self.unsynced.get(path)
            if entry is None:
                return os.pread(fh, size, offset)
            size = max(0, min(size, entry.size - offset))
            out = bytearray()
            position = offset
            while position < offset + size:
                index, within = divmod(position, PAGE)
                take = min(PAGE - within, offset + size - position)
                page = entry.pages.get(index)
                if page is not None:
                    out += page[within : within + take]
                else:
                    out += _read_backing(fh, position, take, entry.clip)
                position += take
            return bytes(out)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._state_lock:
            entry = self._entry(path, fh)
            position, view = offset, memoryview(data)
            while view:
                index, within = divmod(position, PAGE)
                take = min(PAGE - within, len(view))
                page = self._page(entry, fh, index)
                page[within : within + take] = view[:take]
                start, end = entry.spans.get(index, (within, within + take))
                entry.spans[index] = (min(start, within), max(end, within + take))
                position += take
                view = view[take:]
            entry.size = max(entry.size, offset + len(data))
        return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self._state_lock:
            self._truncate(path, length)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        """The file's cached pages and size reach its backing file: from now on they survive a cut."""
        with self._state_lock:
            entry = self.unsynced.pop(path, None)
            if entry is None:
                return 0
            fd = os.open(self._real(path), os.O_WRONLY)
            try:
                os.ftruncate(fd, entry.clip)  # the bytes a truncate removed stay removed if the file grew again
                os.ftruncate(fd, entry.size)
                for index, page in sorted(entry.pages.items()):
                    start = index * PAGE
                    if start < entry.size:
                        os.pwrite(fd, bytes(page[: entry.size - start]), start)
            finally:
                os.close(fd)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # close(2) makes nothing durable

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    # namespace operations: at once (see the module's docstring)

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._real(path))
        with self._state_lock:
            self.unsynced.pop(path, None)
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._real(old), self._real(new))
        with self._state_lock:
            self.unsynced.pop(new, None)
            for path in [p for p in self.unsynced if p == old or p.startswith(old + "/")]:
                self.unsynced[new + path[len(old) :]] = self.unsynced.pop(path)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._real(source), self._real(target))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._real(target))
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times:
            os.utime(self._real(path), ns=times)
        else:
            os.utime(self._real(path))
        return 0

    def statfs(self, path: str) -> dict:
        st = os.statvfs(self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_frsize")
        return {key: getattr(st, key) for key in (*keys, "f_namemax")}

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise OSError(errno.EACCES, "")
        return 0

    def init(self, path: str) -> None:
        self.mounted.set()


def serve(backing: Path, mount: Path, control: str) -> None:
    """Mount the layer over `mount` and serve it until it is unmounted; `control` (the name of an abstract Unix
    socket) answers `status` and `cut`. Prints `mounted` once the kernel has the mount."""
    import mfusepy  # here: only the layer's own process loads libfuse

    # the layer's operations first, mfusepy's defaults (each marked for libfuse to leave out) for the rest
    layer = type("PowerLossOperations", (PowerLossLayer, mfusepy.Operations), {})(backing)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + control)
    listener.listen()
    threading.Thread(target=_answer, args=(listener, layer), daemon=True).start()

    def announce() -> None:
        if layer.mounted.wait(MOUNT_TIMEOUT_S):
            print("mounted", flush=True)

    threading.Thread(target=announce, daemon=True).start()

    mfusepy.FUSE(layer, str(mount), foreground=True, fsname=FSNAME)


def _answer(listener: socket.socket, layer: PowerLossLayer) -> None:
    while True:
        connection, _ = listener.accept()
        with connection:
            asked = b""
            while chunk := connection.recv(64):
                asked += chunk
            answer = layer.cut() if asked.strip() == b"cut" else layer.figures()
            connection.sendall(json.dumps(answer).encode())


class PowerLossDisk:
    """A node's store folder on the power-loss layer: `mount()` before the node starts, `cut()` once it is killed
    (drops what it did not sync, says how much, and mounts afresh on what it did), `unmount()` at the end."""

    def __init__(self, store: Path, backing: Path) -> None:
        self.store = Path(store)
        self.backing = Path(backing)
        # an abstract Unix socket (Linux): no file to remove, and no 108-byte limit on the folder's path
        self.control = f"jetcheck-power-loss-{secrets.token_hex(8)}"
        self.log_path = self.backing.parent / f"{self.backing.name}-layer.log"  # a file: a full pipe would hang it
        self._process: children.Child | None = None

    @property
    def mounted(self) -> bool:
        return self._process is not None

    def mount(self) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.store.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "jetcheck.durability.power_loss", str(self.backing), str(self.store)]
        with open(self.log_path, "ab") as log:
            self._process = children.start([*argv, self.control], own_session=False, stdout=subprocess.PIPE, stderr=log)
        try:
            said = children.first_line(self._process, MOUNT_TIMEOUT_S)
        except (TimeoutError, children.ChildExited) as exc:
            self.unmount()
            said = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise TargetError(f"power-loss layer over {self.store} did not mount ({exc}): {' | '.join(said)}") from None
        if said.strip() != "mounted":
            self.unmount()
            raise TargetError(f"power-loss layer over {self.store} said {said!r}")

    def _ask(self, command: str) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(CONTROL_TIMEOUT_S)
            connection.connect("\0" + self.control)
            connection.sendall(command.encode())
            connection.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := connection.recv(4096):
                answer += chunk
        return json.loads(answer)

    def unsynced(self) -> dict:
        """What the layer holds that a cut now would drop: files, bytes and pages."""
        return self._ask("status")

    def cut(self) -> dict:
        """The power goes out for this store (its node must be stopped): the unsynced writes are dropped and the
        store is mounted afresh on the backing folder (nothing of the kernel's cache of the old mount is left)."""
        dropped = self._ask("cut")
        self.unmount()
        self.mount()
        return dropped

    def unmount(self) -> None:
        """Take the mount down (lazily if a process still holds a file in it) and end the layer's process."""
        process, self._process = self._process, None
        if process is None:
            return
        # whether or not os.path.ismount says so: it does not once the backing folder is gone (a provider's
        # cleanup may remove it first), and the mount outlives the process that served it
        done = subprocess.run(["fusermount3", "-u", str(self.store)], capture_output=True, check=False)
        if done.returncode != 0:
            subprocess.run(["fusermount3", "-uz", str(self.store)], capture_output=True, check=False)
        children.stop(process, UNMOUNT_TIMEOUT_S, ask=None)  # the unmount asked it to end; killed if it lingers
        if process.stdout is not None:
            process.stdout.close()


def what_is_missing() -> str:
    """Why this machine cannot mount the layer ("" when it can)."""
    if not os.path.exists("/dev/fuse"):
        return "a power cut needs FUSE: /dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "a power cut needs fusermount3 (Debian: fuse3)"
    if os.geteuid() != 0:
        return "a power cut mounts a FUSE file system under each node's store: run as root"
    return ""


class PowerLossDisks:
    """Every node's store on the power-loss layer, for as long as the block runs; the backing folder of a node is
    `<its workdir>/disk`. On leaving, every mount is taken down and, with `remove`, that folder removed."""

    def __init__(self, stores: list[Path], remove: Path | None = None) -> None:
        self.disks = [PowerLossDisk(store, Path(store).parent / "disk") for store in stores]
        self.remove = remove

    def __enter__(self) -> PowerLossDisks:
        try:
            with ThreadPoolExecutor(len(self.disks)) as pool:
                list(pool.map(PowerLossDisk.mount, self.disks))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        with ThreadPoolExecutor(len(self.disks)) as pool:
            list(pool.map(PowerLossDisk.unmount, self.disks))
        if self.remove is not None:
            shutil.rmtree(self.remove, ignore_errors=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        serve(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
