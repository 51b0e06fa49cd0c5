"""Prints, per client and scenario, how close `jetcheck load --client X` comes to `nats bench` on the same server.

    python benchmarks/client_bench.py [--duration 8] [--rounds 3]
        [--clients nats.go,nats-py,nats.js,async-nats,jnats] [--msgs N]
        [--scenarios publish,pull-consume]

Builds natscli NATSCLI_VERSION once (`go install github.com/nats-io/natscli/nats@VERSION` through the Go module
proxy, cached beside jetcheck's drivers), starts one embedded nats-server and, for each round and client, runs
`nats bench js pub async` (128 B, file storage, R1, 1000 publishes in flight) right before `jetcheck load --client X
--scenario publish --max --max-inflight 1000` (the same message size, storage and window, closed loop, as fast as
the client goes). pull-consume: `nats bench js fetch` (a durable pull consumer, batches of 500, explicit acks) over
--msgs messages it published first, right before `jetcheck load --client X --scenario pull-consume --prefill N`
(fetches of 500 with explicit acks; N = --msgs, so the stream outlasts the run). A ratio is jetcheck's steady-window
ok/s over the nats bench msgs/s just before it; the median over the rounds is printed per client and scenario with
its goal (publish: nats.go, async-nats and jnats >= 0.8, nats-py >= 0.5; nats.js and pull-consume have none).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from load_bench import jetcheck_rate, nats_bench

from jetcheck.conformance.clients.build import cache_root, find_go
from jetcheck.fixtures.providers import provider_for
from jetcheck.fixtures.target import Credentials
from jetcheck.specs import DEFAULT_VERSION
from jetcheck.versions import parse_version

NATSCLI = "github.com/nats-io/natscli/nats"
NATSCLI_VERSION = "v0.5.1"  # builds with the Go the drivers use (go.mod's go line asks for 1.25+)
GOALS = {
    ("nats.go", "publish"): 0.8,
    ("async-nats", "publish"): 0.8,
    ("jnats", "publish"): 0.8,
    ("nats-py", "publish"): 0.5,
}
OPS = {"publish": "publish", "pull-consume": "consume"}  # the op a scenario's ratio is of
INFLIGHT = 1000


def natscli(version: str = NATSCLI_VERSION) -> Path:
    """The natscli binary of `version`, built once into the cache (a temporary GOBIN renamed into place)."""
    final = cache_root().parent / "natscli" / version
    binary = final / "nats"
    if binary.exists():
        return binary
    go, env = find_go(parse_version("1.21"))
    final.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=final.parent))
    try:
        print(f"building natscli {version} with {go} (go install, once)...", flush=True)
        subprocess.run(
            [go, "install", f"{NATSCLI}@{version}"], env={**env, "GOBIN": str(build)}, check=True, timeout=1200
        )
        os.replace(build, final)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return binary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of each jetcheck load run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="nats.go,nats-py,nats.js")
    parser.add_argument("--msgs", type=int, default=300_000, help="messages of each nats bench run")
    parser.add_argument("--server-version", default=DEFAULT_VERSION)
    parser.add_argument("--scenarios", default="publish", help="comma-separated: publish, pull-consume")
    args = parser.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(OPS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join(OPS)}")
    nats = str(natscli())
    provider = provider_for("local", args.server_version, Credentials())
    target = provider.start()
    monitor = target.process.monitor_url
    ratios: dict[tuple[str, str], list[float]] = {(c, s): [] for s in scenarios for c in clients}
    try:
        print(
            f"nats-server {args.server_version} at {target.url}; natscli {NATSCLI_VERSION}; 128 B payloads, R1 file "
            f"streams, {INFLIGHT} in flight, {args.rounds} rounds",
            flush=True,
        )
        for round_no in range(1, args.rounds + 1):
            for client, scenario in ratios:
                consume = scenario == "pull-consume"
                bench = nats_bench(nats, target.url, args.msgs, fetch=consume)
                settings = ["--prefill", str(args.msgs)] if consume else ["--max", "--max-inflight", str(INFLIGHT)]
                ours, cpu_us = jetcheck_rate(
                    target.url,
                    monitor,
                    scenario,
                    OPS[scenario],
                    ["--client", client, *settings, "--duration", f"{args.duration:g}s"],
                )
                what = f"round {round_no} {client:8} {scenario:12}"
                if not bench:
                    print(f"{what} nats bench gave no figure", flush=True)
                    continue
                ratios[client, scenario].append(ours / bench)
                tool = "js fetch" if consume else "js pub"
                print(
                    f"{what} nats bench {tool:8} {bench:>9,.0f} msg/s   jetcheck load {ours:>9,.0f} msg/s "
                    f"({cpu_us:5.1f} us CPU/msg)   ratio {ours / bench:.2f}",
                    flush=True,
                )
    finally:
        provider.stop()
    print("median jetcheck / nats bench (js pub for publish, js fetch for pull-consume), same server, same run:")
    for (client, scenario), values in ratios.items():
        if not values:
            print(f"  {client:8} {scenario:12} no figure")
            continue
        goal = GOALS.get((client, scenario))
        verdict = f"goal >= {goal}: {'met' if statistics.median(values) >= goal else 'not met'}" if goal else "no goal"
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {client:8} {scenario:12} {statistics.median(values):.2f}  (rounds {shown}; {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
