"""A cluster the user describes in a TOML file: each node's client URL, monitoring URL and the shell commands that
kill, start (and optionally pause and resume) it. jetcheck starts nothing of its own: it runs those commands when a
fault schedule asks, and heals what it did when the run ends, however it ends.

    [[node]]
    name = "n1"                                 # the node's server name (what the stream's leader is called)
    url = "nats://127.0.0.1:4222"
    monitor = "http://127.0.0.1:8222"           # /healthz after a restart, /jsz for its replica's state
    kill = "kill -9 $(cat /var/run/n1.pid)"     # must end the process at once (no graceful shutdown)
    start = "systemctl start nats-n1"           # must return once the server is started (in the background)
    pause = "kill -STOP $(cat /var/run/n1.pid)" # optional, with resume: needed for the pause-* faults
    resume = "kill -CONT $(cat /var/run/n1.pid)"

Each command runs with /bin/sh, bounded by COMMAND_TIMEOUT_S; its output goes to a file whose tail is kept for
error messages. Whether faults may be done at all is the command's decision (jetcheck durability --allow-faults).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from jetcheck.fixtures import children
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import monitor_json
from jetcheck.fixtures.target import Target

COMMAND_TIMEOUT_S = 60.0
REQUIRED = ("name", "url", "monitor", "kill", "start")
OPTIONAL = ("pause", "resume")
READY_TIMEOUT_S = 30.0
HEALTH_POLL_S = 0.1
PREFIX = "cluster-file:"


class DescribedNode:
    """One node of a described cluster, with the surface of fixtures.process.NatsServerProcess that the fault
    schedule and the durability run use. `running` is what jetcheck knows: false only between its kill and start."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.name = fields["name"]
        self.url = fields["url"]
        self.monitor_url = fields["monitor"].rstrip("/")
        self.commands = {key: fields[key] for key in (*REQUIRED[3:], *OPTIONAL) if key in fields}
        self.running = True
        self.paused = False
        self.last_output = ""

    def _run(self, action: str) -> None:
        command = self.commands[action]
        with tempfile.TemporaryFile() as output:  # a file, not a pipe: a started server keeps its stdout open
            try:
                done = subprocess.run(
                    ["/bin/sh", "-c", command],
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=COMMAND_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise TargetError(
                    f"{self.name}: {action} command still running after {COMMAND_TIMEOUT_S:g} s"
                ) from None
            output.seek(0)
            self.last_output = output.read().decode(errors="replace")[-2000:]
        if done.returncode != 0:
            raise TargetError(f"{self.name}: {action} command exited {done.returncode}: {self.log_tail(3)}")

    def kill(self) -> None:
        self._run("kill")
        self.running, self.paused = False, False

    def launch(self) -> None:
        self._run("start")
        self.running = True

    def pause(self) -> None:
        self._run("pause")
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            self._run("resume")
        self.paused = False

    def healthy(self) -> bool:
        return children.http_ok(self.monitor_url + "/healthz")()

    def monitor(self, endpoint: str) -> dict:
        return monitor_json(self.monitor_url, endpoint)

    def log_tail(self, lines: int) -> str:
        return " | ".join(self.last_output.strip().splitlines()[-lines:]) or "(no output from its commands)"


def read_cluster_file(path: Path) -> list[DescribedNode]:
    """The nodes of a cluster file; TargetError naming what is wrong with it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TargetError(f"cluster file {path}: {exc}") from None
    entries = data.get("node")
    if not isinstance(entries, list) or len(entries) < 3:
        raise TargetError(f"cluster file {path}: needs at least three [[node]] tables, found {len(entries or [])}")
    nodes = []
    for number, entry in enumerate(entries, 1):
        missing = [key for key in REQUIRED if not isinstance(entry.get(key), str) or not entry[key].strip()]
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        if missing or unknown:
            said = "; ".join(
                part for part in (missing and f"missing {', '.join(missing)}", unknown and f"unknown {unknown}") if part
            )
            raise TargetError(f"cluster file {path}: node {number}: {said}")
        if ("pause" in entry) != ("resume" in entry):
            raise TargetError(f"cluster file {path}: node {number}: pause and resume come together")
        nodes.append(DescribedNode(entry))
    if len({node.name for node in nodes}) != len(nodes):
        raise TargetError(f"cluster file {path}: node names repeat")
    return nodes


class DescribedClusterProvider:
    """The cluster of a cluster file: start() checks every node answers /healthz (it starts nothing); stop() undoes
    what jetcheck did, continuing each node it paused and starting each it killed."""

    name = "cluster-file"
    links = None  # no relays: routes are the user's, and are never cut

    def __init__(self, path: Path) -> None:
        self.path = path
        self.nodes = read_cluster_file(path)
        self.version = ""

    @property
    def can_pause(self) -> bool:
        return all("pause" in node.commands for node in self.nodes)

    def start(self) -> Target:
        for node in self.nodes:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not node.healthy():
                if time.monotonic() >= deadline:
                    raise TargetError(f"{node.name}: {node.monitor_url}/healthz not 200 within {READY_TIMEOUT_S:g} s")
                time.sleep(HEALTH_POLL_S)
        self.version = str(self.nodes[0].monitor("varz").get("version", ""))
        return Target(url=self.nodes[0].url)

    def stop(self) -> None:
        for node in self.nodes:
            try:
                node.resume()
                if not node.running:
                    node.launch()
            except TargetError as exc:  # each on its own: one that fails must not leave the next one down
                print(f"jetcheck: could not heal {node.name}: {exc}", file=sys.stderr)
