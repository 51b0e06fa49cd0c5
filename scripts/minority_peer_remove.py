"""By hand, the smallest program: does the JetStream meta group's leader take a peer removal while a majority of
the group is down, without quorum (nats-io/nats-server#7545's membership changes; the mechanism the maintainers
found, #7561 "Minority peer-remove succeeds")?

Per try: a fresh 5-node cluster of VERSION on 127.0.0.1 with a system account (durability.membership's), an R5 file
stream with a few acknowledged writes; then, with the meta leader (from /jsz) left alone, kill -9 of two other nodes
and of a third, whose store is wiped, and `$JS.API.SERVER.REMOVE` for that third one sent to the meta leader (two
nodes of five up: the meta group has no quorum). Printed: the server's answer, and the meta group as each of the two
live nodes' /jsz then sees it (its size and peers); then every node but the removed one started again, and the
same view from each of the four once they are healthy.

    .venv/bin/python scripts/minority_peer_remove.py 2.12.1 --tries 3
    .venv/bin/python scripts/minority_peer_remove.py 2.15.1 --tries 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import nats
import nats.errors
from nats.js.api import StreamConfig

from jetcheck.durability.faults import wait_healthy
from jetcheck.durability.membership import CLUSTER_CONFIG as SYSTEM_ACCOUNT
from jetcheck.durability.membership import SYSTEM_CREDENTIALS, Membership, answer_of, wipe_store
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.fixtures.target import Target

SETTLE_S = 5.0  # for the meta leader's /jsz to show the removal, if it acted on it


async def _quiet(_exc: Exception) -> None:
    """The disconnects of the kills are expected; nats-py would print each."""


def meta_view(node) -> str:
    meta = node.monitor("jsz").get("meta_cluster") or {}
    return f"{node.name}: meta leader {meta.get('leader')}, cluster_size {meta.get('cluster_size')}"


async def _until_shrunk(leader, size: int) -> None:
    """Until the meta leader's /jsz counts fewer than `size` peers, or SETTLE_S passes (it never acted on it)."""
    deadline = time.monotonic() + SETTLE_S
    while (leader.monitor("jsz").get("meta_cluster") or {}).get("cluster_size") == size:
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(0.1)


async def one_try(version: str, writes: int) -> list[str]:
    cluster = ClusterProvider(wheel_binary(version), size=5, config=SYSTEM_ACCOUNT)
    cluster.start()
    said = []
    try:
        nodes = cluster.nodes
        nc = await nats.connect(nodes[0].url, error_cb=_quiet)
        js = nc.jetstream(timeout=5)
        await js.add_stream(StreamConfig(name="MEMBERS", subjects=["members.>"], num_replicas=5))
        for n in range(writes):
            await js.publish("members.w", str(n).encode())
        await nc.close()
        members = Membership(nodes, "MEMBERS")
        leader_name = await members.meta_leader()
        leader = next(node for node in nodes if node.name == leader_name)
        others = [node for node in nodes if node is not leader]
        killed, removed, survivor = others[:2], others[2], others[3]
        for node in [*killed, removed]:
            node.kill()
        files = wipe_store(removed)
        system = await Target(leader.url, SYSTEM_CREDENTIALS).connect()
        try:
            reply = await system.request("$JS.API.SERVER.REMOVE", json.dumps({"peer": removed.name}).encode(), 5)
            answer = answer_of(reply.data)[1]
        except (nats.errors.Error, TimeoutError) as exc:
            answer = f"no answer ({type(exc).__name__})"
        finally:
            await system.close()
        said.append(
            f"killed {', '.join(n.name for n in killed)} and {removed.name} (store wiped, {files} files); "
            f"SERVER.REMOVE {removed.name} sent to meta leader {leader.name} with 2 of 5 up: {answer}"
        )
        await _until_shrunk(leader, len(nodes))
        said += [f"  then {meta_view(node)}" for node in (leader, survivor)]
        for node in killed:
            node.launch()
        for node in (leader, survivor, *killed):
            await wait_healthy(node, 90.0)
        said += [f"  healed {meta_view(node)}" for node in (leader, survivor, *killed)]
    finally:
        cluster.stop()
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version")
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--writes", type=int, default=100)
    args = parser.parse_args()
    for number in range(1, args.tries + 1):
        lines = asyncio.run(one_try(args.version, args.writes))
        print(f"nats-server {args.version} try {number}: " + "\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
