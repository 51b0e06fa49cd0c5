"""By hand, the smallest program: does a kill -9 of every node soon after an R3 stream is created make the cluster
forget the stream (Jepsen, nats-io/nats-server#6888: 2.10.20-2.10.22, fixed in 2.10.23)?

Per try: a fresh 3-node cluster of VERSION on 127.0.0.1, an R3 file stream and a durable consumer, a few
acknowledged writes, then `--after` seconds later every node killed with SIGKILL at once, every node started again
on its own store, and once each is healthy the stream's and the consumer's info asked for (a bounded wait for a meta
leader; "not found" is the server saying it no longer has it).

    .venv/bin/python scripts/stream_vanish.py 2.10.22 --tries 5 --after 2
    .venv/bin/python scripts/stream_vanish.py 2.10.23 --tries 5 --after 2
"""

from __future__ import annotations

import argparse
import asyncio
import time

import nats
import nats.errors
import nats.js.errors
from nats.js.api import StreamConfig

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.providers import ClusterProvider

ANSWER_WITHIN_S = 30.0


async def _quiet(_exc: Exception) -> None:
    """The disconnects of the kill are expected; nats-py would print each."""


async def _until_answered(ask):
    """`ask()`'s answer, or the NotFoundError the server gives; keeps asking through timeouts (no meta leader yet)."""
    deadline = time.monotonic() + ANSWER_WITHIN_S
    while True:
        try:
            return await ask()
        except nats.js.errors.NotFoundError as exc:
            return exc
        except (nats.errors.Error, TimeoutError) as exc:
            if time.monotonic() >= deadline:
                return exc
        await asyncio.sleep(0.25)


async def one_try(version: str, after_s: float, writes: int, with_consumer: bool) -> str:
    cluster = ClusterProvider(wheel_binary(version), size=3)
    cluster.start()
    try:
        urls = [node.url for node in cluster.nodes]
        nc = await nats.connect(urls, max_reconnect_attempts=-1, reconnect_time_wait=0.25, error_cb=_quiet)
        js = nc.jetstream(timeout=2)
        config = StreamConfig(name="VANISH", subjects=["vanish.>"], num_replicas=3)
        await _until_answered(lambda: js.add_stream(config))
        if with_consumer:
            await _until_answered(lambda: js.add_consumer("VANISH", durable_name="D"))
        created = time.monotonic()
        for n in range(writes):
            await js.publish("vanish.w", str(n).encode())
        await asyncio.sleep(max(0.0, created + after_s - time.monotonic()))  # the fault's time: no event to await
        for node in cluster.nodes:
            node.kill()
        killed_at = time.monotonic() - created
        for node in cluster.nodes:
            node.launch()
        for node in cluster.nodes:
            node.wait_ready(90)
        stream = await _until_answered(lambda: js.stream_info("VANISH"))
        consumer = await _until_answered(lambda: js.consumer_info("VANISH", "D")) if with_consumer else None
        await nc.close()
    finally:
        cluster.stop()
    said_stream = f"{stream.state.messages} messages" if hasattr(stream, "state") else f"{stream!r}"
    said_consumer = "answers" if hasattr(consumer, "num_pending") else f"{consumer!r}" if with_consumer else "none made"
    return f"killed all {killed_at:.1f}s after creation; stream: {said_stream}; consumer: {said_consumer}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version")
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--after", type=float, default=2.0, help="seconds from the stream's creation to the kill")
    parser.add_argument("--writes", type=int, default=10)
    parser.add_argument("--no-consumer", action="store_true", help="create the stream alone")
    args = parser.parse_args()
    for number in range(1, args.tries + 1):
        said = asyncio.run(one_try(args.version, args.after, args.writes, not args.no_consumer))
        print(f"{args.version} try {number}: {said}", flush=True)


if __name__ == "__main__":
    main()
