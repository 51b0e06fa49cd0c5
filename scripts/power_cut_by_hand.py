"""The power-loss finding by hand, with nothing of `jetcheck durability` but the layer: a 3-node cluster on
127.0.0.1 with every store on the power-loss layer, an R3 stream, one publisher acknowledged write by write for
`--write-for` seconds, then every node killed (-9) and its unsynced writes dropped at once, every node started again,
and the stream asked what it still holds. The durability guide quotes its output.

    .venv/bin/python scripts/power_cut_by_hand.py --write-for 20     # cut before the first 2-minute sync
    .venv/bin/python scripts/power_cut_by_hand.py --write-for 130    # cut 10 s after it
    .venv/bin/python scripts/power_cut_by_hand.py --write-for 20 --sync-interval always
"""

from __future__ import annotations

import argparse
import asyncio
import time

import nats.errors
import nats.js.errors

from jetcheck.durability.power_loss import PowerLossDisks
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.fixtures.target import Target
from jetcheck.specs import DEFAULT_VERSION

STREAM = "JETCHECK_POWER_CUT"
ANSWER_WITHIN_S = 60.0


async def until_answered(step, within_s: float):
    """`step()`'s answer once it gives one (a cluster just started may still elect); its last error after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return await step()
        except (nats.errors.Error, TimeoutError) as exc:
            if time.monotonic() > deadline or isinstance(exc, nats.js.errors.NotFoundError):
                raise
            await asyncio.sleep(0.25)


async def write(url: str, seconds: float) -> int:
    """The highest sequence acknowledged after `seconds` of writes, one at a time."""
    nc = await Target(url).connect()
    js = nc.jetstream(timeout=5.0)
    await until_answered(lambda: js.add_stream(name=STREAM, subjects=["cut.>"], num_replicas=3), ANSWER_WITHIN_S)
    last, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        last = (await js.publish("cut.w", b"x" * 128)).seq
    await nc.close()
    return last


async def what_is_left(url: str) -> str:
    nc = await Target(url).connect()
    try:
        info = await until_answered(lambda: nc.jetstream(timeout=5.0).stream_info(STREAM), ANSWER_WITHIN_S)
    except nats.js.errors.NotFoundError as exc:
        return f"the stream is gone: STREAM.INFO answered {exc.code}/{exc.err_code} {exc.description}"
    finally:
        await nc.close()
    return f"the stream holds {info.state.messages:,} messages, sequences {info.state.first_seq}-{info.state.last_seq}"


def healthy_within(node, within_s: float) -> str:
    """ "healthy", or what /healthz still said after `within_s` (a node may be up and still catching up)."""
    try:
        node.wait_ready(within_s)
    except TargetError as exc:
        return f"not healthy after {within_s:g} s ({str(exc).rsplit(' | ', 1)[-1]})"
    return "healthy"


def replica_state(node) -> str:
    """What the node's own replica of the stream holds, from its /jsz."""
    try:
        jsz = node.monitor("jsz?accounts=true&streams=true")
    except OSError as exc:
        return f"/jsz did not answer ({exc})"
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") == STREAM:
                state = stream.get("state", {})
                return f"{state.get('messages', 0):,} messages, last seq {state.get('last_seq', 0):,}"
    return "no such stream"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-for", type=float, default=20.0, help="seconds of writes before the power cut")
    parser.add_argument("--sync-interval", choices=("default", "always"), default="default")
    parser.add_argument("--server-version", default=DEFAULT_VERSION)
    args = parser.parse_args()
    config = "jetstream {\n  sync_interval: always\n}\n" if args.sync_interval == "always" else ""
    provider = ClusterProvider(wheel_binary(args.server_version), config=config)
    with PowerLossDisks([node.store_dir for node in provider.nodes], remove=provider.workdir) as disks:
        try:
            target = provider.start()
            acked = asyncio.run(write(target.url, args.write_for))
            for node in provider.nodes:
                node.kill()
            dropped = [disk.cut() for disk in disks.disks]
            for node in provider.nodes:
                node.launch()
            health = {node.name: healthy_within(node, ANSWER_WITHIN_S) for node in provider.nodes}
            left = asyncio.run(what_is_left(target.url))
            replicas = {node.name: replica_state(node) for node in provider.nodes}
        finally:
            provider.stop()
    print(f"nats-server {provider.version}, sync_interval {args.sync_interval}, {args.write_for:g} s of writes")
    print(f"acknowledged: sequences 1-{acked:,}")
    print("unsynced bytes dropped per node: " + ", ".join(f"{cut['bytes']:,}" for cut in dropped))
    print(f"after the power cut: {left}")
    for name, said in health.items():
        print(f"  {name}: {said}; its replica: {replicas[name]}")


if __name__ == "__main__":
    main()
