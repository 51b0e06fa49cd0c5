"""Prints how close `jetcheck load` (Locust + op log) comes to plain nats-py, and to `nats bench`, on one server.

    python benchmarks/load_bench.py [--duration 10] [--prefill 200000] [--rounds 3] [--nats PATH]

1. publish: a raw nats-py `publish_async` loop (1000 in flight) vs `jetcheck load --scenario publish-async --max`
   (one user, max in-flight 1000), both for --duration seconds; ratio target >= 0.9.
2. pull consume: a raw `fetch(500)` + ack loop over a prefilled stream vs `jetcheck load --scenario pull-consume`.
3. `nats bench js pub async` (if a natscli binary is given or on PATH) on the same server, side by side.
Figures are msgs/s. The machine's other load makes them noisy, so each pair runs back to back, the pairs alternate
for --rounds rounds, and the round with the median ratio is the result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from jetcheck import cli as jetcheck_cli
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials, Target
from jetcheck.specs import DEFAULT_VERSION

PAYLOAD = b"x" * 128
INFLIGHT = 1000
BATCH = 500


def cpu_us(cpu_s: float, ops: int) -> float:
    return cpu_s / max(ops, 1) * 1e6


async def raw_publish(target: Target, seconds: float) -> tuple[float, float]:
    nc = await target.connect()
    js = nc.jetstream(publish_async_max_pending=INFLIGHT)
    stream = "BENCH_RAW_PUB_" + secrets.token_hex(3)
    await js.add_stream(StreamConfig(name=stream, subjects=[stream.lower() + ".>"], storage=StorageType.FILE))
    subject = stream.lower() + ".x"
    acked = 0

    def count(future: asyncio.Future) -> None:
        nonlocal acked
        if not future.cancelled() and future.exception() is None:
            acked += 1

    start, cpu = time.monotonic(), time.process_time()
    deadline = start + seconds
    while time.monotonic() < deadline:
        for _ in range(100):
            (await js.publish_async(subject, PAYLOAD)).add_done_callback(count)
    await js.publish_async_completed()
    elapsed, cpu = time.monotonic() - start, time.process_time() - cpu
    await js.delete_stream(stream)
    await nc.close()
    return acked / elapsed, cpu_us(cpu, acked)


async def raw_pull(target: Target, prefill: int) -> tuple[float, float]:
    nc = await target.connect()
    js = nc.jetstream(publish_async_max_pending=INFLIGHT)
    stream = "BENCH_RAW_PULL_" + secrets.token_hex(3)
    await js.add_stream(StreamConfig(name=stream, subjects=[stream.lower() + ".>"], storage=StorageType.FILE))
    for _ in range(prefill):
        await js.publish_async(stream.lower() + ".x", PAYLOAD)
    await js.publish_async_completed()
    await js.add_consumer(
        stream, ConsumerConfig(durable_name="RAW", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=10_000)
    )
    sub = await js.pull_subscribe_bind("RAW", stream)
    consumed = 0
    start, cpu = time.monotonic(), time.process_time()
    while consumed < prefill:
        for msg in await sub.fetch(BATCH, timeout=2):
            await msg.ack()
            consumed += 1
    elapsed, cpu = time.monotonic() - start, time.process_time() - cpu
    await nc.flush()
    await js.delete_stream(stream)
    await nc.close()
    return consumed / elapsed, cpu_us(cpu, consumed)


def jetcheck_rate(url: str, monitor: str, scenario: str, op: str, extra: list[str]) -> tuple[float, float]:
    """msgs/s of `op` from the run's op log, and the load processes' CPU microseconds per op."""
    out = Path(tempfile.mkdtemp(prefix="jetcheck-bench-"))
    try:
        rc = jetcheck_cli.main(
            [
                "load",
                "--scenario",
                scenario,
                "--server",
                url,
                "--monitor",
                monitor,
                "--out",
                str(out),
                "--users",
                "1",
                *extra,
            ]
        )
        summary = json.loads((out / "summary.json").read_text())
        run = json.loads((out / "load.json").read_text())
        if rc != 0:
            print(f"  (jetcheck load exited {rc}: {summary['checks']})")
        entry = summary["ops"][op]
        return entry["rate_per_s"], cpu_us(sum(run["load_cpu_s"].values()), entry["ok"])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def nats_bench(nats: str, url: str, msgs: int, fetch: bool = False) -> float | None:
    """msgs/s of `nats bench js pub async` (128 B, R1 file stream, INFLIGHT per batch) into a new stream; with
    `fetch`, of `nats bench js fetch` (a durable pull consumer, batches of 500, explicit acks) over what it stored."""
    stream = "BENCH_NATSCLI_" + secrets.token_hex(3)
    subject = stream.lower() + ".x"
    common = ["-s", url, "--msgs", str(msgs), "--clients", "1", "--stream", stream, "--no-progress"]
    publish = [nats, "bench", "js", "pub", "async", subject, *common, "--size", "128", "--create"]
    publish += ["--storage", "file", "--batch", str(INFLIGHT)]
    try:
        proc = subprocess.run(publish, capture_output=True, text=True, timeout=300)
        if fetch and proc.returncode == 0:
            consume = [nats, "bench", "js", "fetch", *common, "--batch", "500", "--acks", "explicit"]
            proc = subprocess.run(consume, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run([nats, "-s", url, "stream", "rm", "-f", stream], capture_output=True, timeout=60)
    match = re.search(r"stats:\s+([\d,]+) msgs/sec", proc.stdout + proc.stderr)
    if not match:
        print("  nats bench output:", (proc.stdout + proc.stderr)[-500:])
        return None
    return float(match.group(1).replace(",", ""))


def line(what: str, raw: float, raw_cpu: float, ours: float, our_cpu: float) -> str:
    return (
        f"{what:15}raw nats-py {raw:>9,.0f} msg/s ({raw_cpu:5.1f} us CPU/msg)   jetcheck load {ours:>9,.0f} msg/s "
        f"({our_cpu:5.1f} us CPU/msg)   ratio {ours / raw:.2f} (CPU/msg ratio {raw_cpu / our_cpu:.2f})"
    )


def jetcheck_publish(target: Target, monitor: str, seconds: float) -> tuple[float, float]:
    """`jetcheck load --scenario publish-async --max` doing what raw_publish does."""
    return jetcheck_rate(
        target.url,
        monitor,
        "publish-async",
        "publish",
        ["--max", "--duration", f"{seconds:g}s", "--max-inflight", str(INFLIGHT)],
    )


def publish_pair(target: Target, monitor: str, seconds: float) -> tuple[float, float, float, float]:
    raw, raw_cpu = asyncio.run(raw_publish(target, seconds))
    return raw, raw_cpu, *jetcheck_publish(target, monitor, seconds)


def pull_pair(target: Target, monitor: str, seconds: float, prefill: int) -> tuple[float, float, float, float]:
    raw, raw_cpu = asyncio.run(raw_pull(target, prefill))
    ours, our_cpu = jetcheck_rate(
        target.url, monitor, "pull-consume", "consume", ["--prefill", str(prefill), "--duration", f"{seconds:g}s"]
    )
    return raw, raw_cpu, ours, our_cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--prefill", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="raw/jetcheck pairs per workload (median reported)")
    parser.add_argument("--nats", default=shutil.which("nats") or "", help="natscli binary for `nats bench`")
    parser.add_argument("--server-version", default=DEFAULT_VERSION)
    args = parser.parse_args()

    provider = provider_for("local", args.server_version, Credentials())
    target = provider.start()
    monitor = target.process.monitor_url
    try:
        print(f"nats-server {args.server_version} at {target.url}; 128 B payloads, R1 file streams", flush=True)
        results: dict[str, list[tuple[float, float, float, float]]] = {"publish_async": [], "pull fetch+ack": []}
        for round_no in range(1, args.rounds + 1):
            # the pairs alternate, so a slow spell of the machine hits both sides of a ratio
            results["publish_async"].append(publish_pair(target, monitor, args.duration))
            results["pull fetch+ack"].append(pull_pair(target, monitor, args.duration, args.prefill))
            for what, pairs in results.items():
                print(f"round {round_no}  " + line(what, *pairs[-1]), flush=True)
        print(f"median of {args.rounds} round(s), by ratio:")
        for what, pairs in results.items():
            middle = sorted(pairs, key=lambda p: p[2] / p[0])[(len(pairs) - 1) // 2]
            print("          " + line(what, *middle), flush=True)

        if args.nats:
            publish_raw = statistics.median(p[0] for p in results["publish_async"])
            msgs = max(50_000, int(publish_raw * args.duration))  # about as long as the others
            theirs = nats_bench(args.nats, target.url, msgs)
            ours, _cpu = jetcheck_publish(target, monitor, args.duration)
            shown = f"{theirs:>9,.0f}" if theirs else "  (failed)"
            print(
                f"js pub async   nats bench  {shown} msg/s   jetcheck load {ours:>9,.0f} msg/s   "
                f"(nats bench: Go client, {msgs} msgs, batch {INFLIGHT})"
            )
        else:
            print(
                "nats bench: no natscli binary (pass --nats PATH; build: go install "
                "github.com/nats-io/natscli/nats@latest)"
            )
    finally:
        provider.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
