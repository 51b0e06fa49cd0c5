"""What the power-loss layer costs: acknowledged writes per second to an R3 stream on a 3-node cluster on 127.0.0.1,
with every node's store on the layer and without it, publishing as fast as acks come back (one synchronous
publisher, then pipelined publishes). The durability guide quotes its output.

    .venv/bin/python scripts/power_loss_cost.py --seconds 10 [--sync-interval always]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

import nats.errors

from jetcheck.durability.power_loss import PowerLossDisks
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.fixtures.target import Target
from jetcheck.specs import DEFAULT_VERSION

STREAM = "JETCHECK_LAYER_COST"
PIPELINE = 200  # publishes in flight in the pipelined phase
PAYLOAD = b"x" * 128


async def rates(url: str, seconds: float) -> tuple[float, float]:
    """Acked writes/s: one publish at a time, then PIPELINE at a time, each for `seconds`."""
    nc = await Target(url).connect()
    js = nc.jetstream(timeout=5.0)
    deadline = time.monotonic() + 30.0
    while True:  # a cluster that has just said it is healthy may still be electing its meta leader
        try:
            await js.add_stream(name=STREAM, subjects=["cost.>"], num_replicas=3)
            break
        except (nats.errors.Error, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)
    acked, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        await js.publish("cost.sync", PAYLOAD)
        acked += 1
    one_at_a_time = acked / seconds
    acked, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.gather(*(js.publish("cost.piped", PAYLOAD) for _ in range(PIPELINE)))
        acked += PIPELINE
    await nc.close()
    return one_at_a_time, acked / seconds


def measure(on_layer: bool, seconds: float, sync_always: bool) -> tuple[float, float]:
    config = "jetstream {\n  sync_interval: always\n}\n" if sync_always else ""
    provider = ClusterProvider(wheel_binary(DEFAULT_VERSION), config=config)
    stores = [node.store_dir for node in provider.nodes]
    layer = PowerLossDisks(stores, remove=provider.workdir) if on_layer else contextlib.nullcontext()
    with layer:
        try:
            target = provider.start()
            return asyncio.run(rates(target.url, seconds))
        finally:
            provider.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sync-interval", choices=("default", "always"), default="default")
    args = parser.parse_args()
    for on_layer in (False, True):
        sync, piped = measure(on_layer, args.seconds, args.sync_interval == "always")
        where = "on the power-loss layer" if on_layer else "plain store folders  "
        said = f"{sync:,.0f} acked/s one at a time, {piped:,.0f} pipelined"
        print(f"{where} (sync_interval {args.sync_interval}): {said}", flush=True)


if __name__ == "__main__":
    main()
