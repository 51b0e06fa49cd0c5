"""Membership changes of a local cluster, as Jepsen's membership nemesis made them (jepsen-io/nats; the loss it
found is nats-io/nats-server#7545): a node is killed and its store wiped, then, through a node that is still up, it
is removed from the stream's peers (`$JS.API.STREAM.PEER.REMOVE.<stream>`, in the stream's account) and from the
JetStream meta group (`$JS.API.SERVER.REMOVE`, in the system account: `nats server raft peer-remove`). At the heal
it joins again as a new server on its empty store: under a fresh server_name, since a peer-removed server may not
come back under its old one (nats-io/nats-server#7561), and the cluster places the stream's missing replica on it.

The cluster gets a system account for this (CLUSTER_CONFIG); the run's clients, which send no credentials, stay in
the global account ($G) through `no_auth_user`, so the stream and its Raft groups are where every other run has them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import time
from collections.abc import Callable

import nats.errors
from nats.aio.client import Client

from jetcheck.credentials import Credentials
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.target import Target

SYSTEM_USER = "jetcheck-system"
_SYSTEM_PASSWORD = secrets.token_hex(16)  # the cluster is the run's own, on loopback; a fresh one per process
_CLIENT_PASSWORD = secrets.token_hex(16)  # nobody logs in as the no_auth_user: it only names the global account
CLUSTER_CONFIG = f"""
authorization {{
  users: [ {{user: jetcheck, password: "{_CLIENT_PASSWORD}"}} ]
}}
accounts {{
  SYS: {{ users: [ {{user: {SYSTEM_USER}, password: "{_SYSTEM_PASSWORD}"}} ] }}
}}
system_account: SYS
no_auth_user: jetcheck
"""
SYSTEM_CREDENTIALS = Credentials(user=SYSTEM_USER, password=_SYSTEM_PASSWORD)  # peer removal is asked as this user
API_TIMEOUT_S = 5.0
GONE_TIMEOUT_S = 5.0  # for the stream's info to stop naming the removed node (it may have no quorum to answer)
PLACED_TIMEOUT_S = 30.0  # for the meta leader to put the stream's missing replica on the node that joined again
POLL_S = 0.25


def answer_of(reply: bytes) -> tuple[bool, str]:
    """Whether a JetStream API reply says success, and the reply in a few words: `success` or
    `503/10075 peer remap failed`."""
    try:
        body = json.loads(reply)
    except ValueError:
        return False, f"not JSON: {reply[:80]!r}"
    error = body.get("error") if isinstance(body, dict) else None
    if error:
        return False, f"{error.get('code')}/{error.get('err_code')} {error.get('description', '')}".strip()
    if isinstance(body, dict) and body.get("success"):
        return True, "success"
    return False, f"no success: {json.dumps(body)[:120]}"


def fresh_name(base: str, joins: int) -> str:
    """The server_name of `base`'s `joins`-th return after a removal: `jetcheck-n2-r1`, `jetcheck-n2-r2`, ..."""
    return f"{base}-r{joins}"


def wipe_store(node: NatsServerProcess) -> int:
    """Delete everything in a stopped node's store (the folder itself stays: it may be a mount point); the number of
    files deleted."""
    assert not node.running, "a store is wiped on a stopped node"
    if not node.store_dir.is_dir():
        return 0
    files = sum(1 for path in node.store_dir.rglob("*") if path.is_file())
    for child in node.store_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    return files


class Membership:
    """Removes nodes of `nodes` from the stream `stream` and from the meta group, and brings them back as new
    servers; remembers which are out until `rejoin` brings them back."""

    def __init__(self, nodes: list[NatsServerProcess], stream: str) -> None:
        self.nodes = nodes
        self.stream = stream
        self.removed: dict[int, tuple[str, bool]] = {}  # node index -> (its name when removed, meta removal done)
        self.bases = [node.name for node in nodes]  # each node's first name, which its fresh names extend
        self.joins = [0] * len(nodes)
        self.said: list[str] = []  # what the last rejoins did, for the fault's record

    async def _ask(self, subject: str, payload: dict, system: bool) -> tuple[bool, str]:
        """Send a JetStream API request through the first running node (the system account's user when `system`);
        success and the answer, `via` the node that took it."""
        credentials = SYSTEM_CREDENTIALS if system else Credentials()
        last = "no node running to ask"
        for node in self.nodes:
            if not node.running or node.paused:
                continue
            try:
                nc: Client = await Target(node.url, credentials).connect()
            except TargetError as exc:
                last = f"via {node.name}: {exc}"
                continue
            try:
                reply = await nc.request(subject, json.dumps(payload).encode(), timeout=API_TIMEOUT_S)
                ok, said = answer_of(reply.data)
                return ok, f"via {node.name}: {said}"
            except (nats.errors.Error, TimeoutError) as exc:
                last = f"via {node.name}: no answer ({type(exc).__name__})"
            finally:
                await nc.close()
        return False, last

    async def remove(self, index: int) -> str:
        """Wipe the store of node `index` (killed already) and peer-remove it from the stream and the meta group, in
        that order, as Jepsen's nemesis did; what was done and what the servers answered."""
        node = self.nodes[index]
        files = await asyncio.to_thread(wipe_store, node)
        peer = {"peer": node.name}
        _, from_stream = await self._ask(f"$JS.API.STREAM.PEER.REMOVE.{self.stream}", peer, system=False)
        done, from_meta = await self._ask("$JS.API.SERVER.REMOVE", peer, system=True)
        self.removed[index] = (node.name, done)
        peers = await self._peers_within(GONE_TIMEOUT_S, lambda peers: bool(peers) and node.name not in peers)
        return (
            f"{node.name} killed, store wiped ({files} files); STREAM.PEER.REMOVE {from_stream}; "
            f"SERVER.REMOVE {from_meta}; stream peers then {', '.join(peers) or 'unknown (no answer)'}"
        )

    async def _peers_within(self, timeout_s: float, wanted: Callable[[list[str]], bool]) -> list[str]:
        """The stream's peers once they are `wanted`, or as they were last when `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        while not wanted(peers := await self.stream_peers()) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        return peers

    async def rename_removed(self) -> None:
        """Before the removed nodes start again: the meta removal asked once more where it was not answered with
        success (no quorum then; every other node is up now), and each given its fresh server_name."""
        self.said = []
        for index, (name, done) in sorted(self.removed.items()):
            if not done:
                _, again = await self._ask("$JS.API.SERVER.REMOVE", {"peer": name}, system=True)
                self.said.append(f"SERVER.REMOVE {name} asked again {again}")
            self.joins[index] += 1
            self.nodes[index].name = fresh_name(self.bases[index], self.joins[index])

    async def await_placed(self) -> None:
        """Once the renamed nodes are healthy: until the stream's peers include each of them (or the bound passes),
        the stream's peers as its info gave them last, for the record."""
        renamed = [self.nodes[index] for index in sorted(self.removed)]
        self.removed.clear()
        started = time.monotonic()
        peers = await self._peers_within(PLACED_TIMEOUT_S, lambda peers: all(n.name in peers for n in renamed))
        took = time.monotonic() - started
        missing = [node.name for node in renamed if node.name not in peers]
        joined = ", ".join(node.name for node in renamed)
        where = f"stream peers {', '.join(peers) or 'unknown'}"
        if missing:
            self.said.append(f"joined again as {joined}; not among the {where} {PLACED_TIMEOUT_S:g} s later")
        else:
            self.said.append(f"joined again as {joined}; {where} {took:.1f} s later")

    async def meta_leader(self) -> str | None:
        """The JetStream meta group's leader as the first running node's /jsz names it (None: no answer, no leader)."""
        for node in self.nodes:
            if node.running and not node.paused:
                try:
                    jsz = await asyncio.to_thread(node.monitor, "jsz")
                except (OSError, ValueError):
                    continue
                return (jsz.get("meta_cluster") or {}).get("leader") or None
        return None

    async def stream_peers(self) -> list[str]:
        """The stream's leader and replicas as its info names them (empty when no node answers)."""
        for node in self.nodes:
            if not node.running:
                continue
            try:
                nc = await Target(node.url).connect()
            except TargetError:
                continue
            try:
                info = await nc.jetstream(timeout=API_TIMEOUT_S).stream_info(self.stream)
            except (nats.errors.Error, TimeoutError):
                continue
            finally:
                await nc.close()
            if info.cluster is None:
                return []
            return [name for name in [info.cluster.leader, *(p.name for p in info.cluster.replicas or [])] if name]
        return []
