"""`jetcheck durability`: does every acknowledged write survive crashes, pauses and partitions of a cluster's nodes?

One run: start a local cluster (3 or 5 nodes, the stream replicated on all of them), run the recorded workload
(jetcheck.load.durability) while a seeded fault schedule kills, pauses and partitions nodes
(jetcheck.fixtures.cluster_faults), heal everything, check that the stream and its durable consumer answer, drain
the consumer, read the stream from every node, and judge the history (jetcheck.conformance.durability) rule by
rule into ordinary results (results.jsonl, run.json) that `jetcheck report` and jetcheck.verdict read. The history
stays in the out folder.

The cluster's processes and folders are removed when the run ends, however it ends (failure, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig

from jetcheck import __version__
from jetcheck.conformance.catalog import rules_checked_by
from jetcheck.conformance.durability import History, check_history, summary
from jetcheck.errors import ConfigError
from jetcheck.fault_kinds import LOSS_FAULTS, NETWORK_FAULTS, PROCESS_FAULTS
from jetcheck.fixtures import children
from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.cluster_faults import (
    ClusterFaults,
    describe,
    plan_faults,
    run_schedule,
)
from jetcheck.fixtures.described_cluster import DescribedClusterProvider
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.packet_loss import (
    NAMESPACE_ENV,
    PacketLoss,
    in_own_namespace,
    own_namespace,
    what_is_missing,
)
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.providers import ClusterProvider
from jetcheck.fixtures.relay import RouteMesh
from jetcheck.fixtures.target import Target
from jetcheck.load.durability import WorkloadLog, WorkloadPlan, consume, create_consumer, publish_once, run_publishers
from jetcheck.options import add_command
from jetcheck.records import (
    HISTORY_DIR,
    RESULTS_FILE,
    RUN_FILE,
    CheckResult,
    DeliveryRecord,
    FaultRecord,
    PublishRecord,
    StoredMessage,
    utc_now,
    write_history,
    write_results,
)
from jetcheck.verdict import judge

STREAM = "JETCHECK_DURABILITY"  # prefixed: on a user's cluster it must not be anyone else's
SUBJECT = "jetcheck.durability.writes"
CONSUMER = "DURABLE"
DUPLICATE_WINDOW_S = 600.0  # longer than any run: every retry of a message id falls inside it
SYNC_ALWAYS = "jetstream {\n  sync_interval: always\n}\n"
RECOVERY_TIMEOUT_S = 60.0  # the stream-available-after-heal rule's bound
CONSUMER_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 60.0
AGREE_TIMEOUT_S = 30.0  # for the replicas to catch up before they are read
API_TIMEOUT_S = 2.0
SET_UP_TIMEOUT_S = 60.0
REMOVE_TIMEOUT_S = 5.0  # removing the run's stream from a user's cluster, also on Ctrl-C
LEADER_WAIT_S = 10.0
POLL_S = 0.25
READ_CONCURRENCY = 200


def register(subparsers: argparse._SubParsersAction) -> None:
    add_command(
        subparsers,
        "durability",
        run=durability_command,
        validate=validate,
        help="certify that acknowledged writes survive crashes, pauses and partitions of a cluster's nodes",
        description="Run paced publishers (with and without message ids) and a durable consumer against a local "
        "cluster while a seeded schedule kills (-9) and pauses (SIGSTOP) nodes (and, when asked, damages their "
        "stores, or cuts, stalls, slows or drops packets of their route links); heal, read the stream from every "
        "node and judge each durability.* rule. Writes results.jsonl, run.json and history/ into --out. Exit 0 when "
        "every rule held, 1 when one did not.",
    )


@dataclass(frozen=True)
class Observed:
    """What the session saw, for the checker and run.json."""

    history: History
    faults: list[FaultRecord]
    recovery_s: float


def validate(args: argparse.Namespace) -> None:
    """A described cluster is the user's: refused without --allow-faults (before its file is read or anything is
    reached), and only faults its commands can do."""
    if args.server.kind != "cluster-file":
        return
    if not args.allow_faults:
        raise ConfigError(
            f"--server {args.server} is your cluster: jetcheck durability kills and restarts its nodes only with "
            "--allow-faults"
        )
    if needs_local := sorted(set(args.faults) - set(PROCESS_FAULTS)):
        raise ConfigError(f"--faults {','.join(needs_local)} need a cluster jetcheck starts (--server cluster)")


def _provider(args: argparse.Namespace, partitionable: bool) -> ClusterProvider | DescribedClusterProvider:
    if args.server.kind == "cluster-file":
        provider = DescribedClusterProvider(Path(args.server.path))
        if any(kind.startswith("pause") for kind in args.faults) and not provider.can_pause:
            raise ConfigError(f"{provider.path}: the pause-* faults need pause and resume commands for every node")
        return provider
    binary = wheel_binary(args.server_version, Path(args.server_cache) if args.server_cache else None)
    config = SYNC_ALWAYS if args.sync_interval == "always" else ""
    return ClusterProvider(binary, size=args.nodes, config=config, partitionable=partitionable)


def durability_command(args: argparse.Namespace) -> int:
    validate(args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    if set(args.faults) & set(LOSS_FAULTS) and not in_own_namespace():
        if missing := what_is_missing():
            raise ConfigError(f"--faults {','.join(sorted(set(args.faults) & set(LOSS_FAULTS)))}: {missing}")
        return _in_own_namespace(args, seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS_FILE, RUN_FILE):
        (out / stale).unlink(missing_ok=True)
    # routes through relays only when the schedule may cut them: every other run's cluster is routed as before
    provider = _provider(args, partitionable=any(kind in NETWORK_FAULTS for kind in args.faults))
    size = len(provider.nodes)
    sync_interval = args.sync_interval if isinstance(provider, ClusterProvider) else "as configured"
    plan = plan_faults(seed, args.faults, args.duration, size, args.hold)
    workload = WorkloadPlan(duration_s=args.duration)
    where = f"nats-server {args.server_version}" if isinstance(provider, ClusterProvider) else str(provider.path)
    print(f"jetcheck durability: seed {seed}, {size} nodes, {where}")
    print(f"schedule: {describe(plan)}", flush=True)
    started_at, started = utc_now(), time.monotonic()
    try:
        provider.start()
        print(
            f"cluster up: {', '.join(node.url for node in provider.nodes)}; writing for {args.duration:g} s", flush=True
        )
        users_cluster = isinstance(provider, DescribedClusterProvider)
        observed = asyncio.run(_session(provider.nodes, plan, workload, seed, provider.links, users_cluster))
    finally:
        provider.stop()  # a local cluster: every node, and its folder; a described one: what was faulted, healed
    findings = check_history(observed.history)
    history_dir = out / HISTORY_DIR
    write_history(history_dir, observed.history.publishes, PublishRecord)
    write_history(history_dir, observed.history.deliveries, DeliveryRecord)
    write_history(history_dir, [m for ms in observed.history.reads.values() for m in ms], StoredMessage)
    write_history(history_dir, observed.faults, FaultRecord)
    schedule = f"seed {seed}, {size} nodes, sync_interval {sync_interval}, schedule {describe(plan)}"
    client = {"name": "nats-py", "version": metadata.version("nats-py")}
    results = []
    of_run = {"server_version": provider.version, "client": client, "check": "jetcheck durability"}
    of_run["run_id"] = f"durability-{seed}"
    duration_s = round(time.monotonic() - started, 3)
    for rule_id, rule in sorted(rules_checked_by("durability").items()):
        finding = findings[rule_id]
        status = "pass" if finding.holds else "fail"
        message = f"{summary(finding)}; {schedule}"
        figures = {**finding.figures, "seed": seed}
        results.append(
            CheckResult(
                **rule.result_fields(),
                **of_run,
                status=status,
                duration_s=duration_s,
                message=message,
                observed=figures,
            )
        )
    write_results(out / RESULTS_FILE, results)
    run_info = {
        "kind": "durability",
        "server": {"version": provider.version, "nodes": size, "sync_interval": sync_interval},
        "client": client,
        "options": {
            "seed": seed,
            "faults": args.faults,
            "duration_s": args.duration,
            "nodes": size,
            "hold_s": args.hold,
        },
        "counts": {
            "publishes": len(observed.history.publishes),
            "deliveries": len(observed.history.deliveries),
            "faults": len(observed.faults),
        },
        "schedule": [vars(fault) for fault in plan],
        "recovery_s": observed.recovery_s,
        # how the final read was judged, so that `jetcheck report` re-reads history/ as the checker did
        "final_read": {
            "reference": observed.history.reference,
            "unreadable": observed.history.unreadable,
            "node_states": observed.history.node_states,
        },
        "jetcheck_version": __version__,
        "started_at": started_at,
        "finished_at": utc_now(),
        "collected": len(results),
    }
    (out / RUN_FILE).write_text(json.dumps(run_info, indent=2, default=list), encoding="utf-8")
    verdict = judge(results, run_info)
    for result in results:
        print(f"{result.status.upper():4} {result.id}: {result.message.split('; seed ')[0]}")
    print(f"\nresults: {out / RESULTS_FILE}  ({schedule})")
    print("\n".join(verdict.lines()))
    return verdict.exit_code()


async def _connect(nodes: list[NatsServerProcess], only: int | None = None) -> Client:
    """A client of every node that reconnects forever, or of node `only` alone that does not."""
    if only is not None:
        return await Target(nodes[only].url).connect()
    urls = [node.url for node in nodes]
    return await Target(urls[0]).connect(
        servers=urls, allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=POLL_S
    )


def _in_own_namespace(args: argparse.Namespace, seed: int) -> int:
    """Run this same command, with its seed drawn, inside a network namespace made for it, where packets can be
    dropped without touching the machine's own firewall; the namespace and all in it are gone at the end."""
    low, high = args.hold
    argv = ["durability", "--server", args.server, "--server-version", args.server_version,
            "--duration", f"{args.duration:g}s", "--seed", str(seed), "--nodes", str(args.nodes),
            "--faults", ",".join(args.faults), "--hold", f"{low:g}-{high:g}", "--sync-interval", args.sync_interval,
            "--out", str(Path(args.out).resolve())]  # fmt: skip
    if args.server_cache:
        argv += ["--server-cache", str(Path(args.server_cache).resolve())]
    name = f"jetcheck-{secrets.token_hex(4)}"
    print(f"jetcheck durability: packet loss asked for: the run goes into network namespace {name}", flush=True)
    with own_namespace(name) as enter:
        env = {**os.environ, NAMESPACE_ENV: name}
        try:
            return children.run([*enter, sys.executable, "-m", "jetcheck.cli", *argv], env=env)
        except KeyboardInterrupt:  # SIGTERM too: the run inside was passed the signal, cleaned up and said so
            return 130


async def _session(
    nodes: list[NatsServerProcess],
    plan,
    workload: WorkloadPlan,
    seed: int,
    links: RouteMesh | None,
    users_cluster: bool = False,
) -> Observed:
    """The run on a cluster that is up; on a user's cluster, the stream it creates is removed again at the end
    (jetcheck's own cluster is removed whole)."""
    admin, publisher, consumer = [await _connect(nodes) for _ in range(3)]
    ours = False
    try:
        await _set_up(f"checking there is no stream {STREAM} yet", lambda: _refuse_existing(admin))
        ours = True  # whatever stream of that name is there from now on is this run's
        config = StreamConfig(
            name=STREAM,
            subjects=[SUBJECT],
            num_replicas=len(nodes),
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
            allow_direct=True,
        )
        await _set_up(f"creating the R{len(nodes)} stream", lambda: admin.jetstream().add_stream(config))
        await _set_up("creating the durable consumer", lambda: create_consumer(admin, STREAM, CONSUMER))
        log, stop_consuming = WorkloadLog(), asyncio.Event()
        consuming = asyncio.create_task(consume(consumer, STREAM, CONSUMER, log, stop_consuming))
        faults = ClusterFaults(nodes, links, PacketLoss() if in_own_namespace() else None)

        async def leader() -> str | None:
            """The stream's leader now; a busy or electing cluster is asked again for a while before giving up."""
            deadline = time.monotonic() + LEADER_WAIT_S
            while (name := await _leader(admin)) is None and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
            return name

        try:
            _, done = await asyncio.gather(
                run_publishers(publisher, SUBJECT, workload, log),
                run_schedule(faults, plan, leader, time.monotonic(), seed),
            )
            await faults.heal_all()  # nothing is left down, whatever happened above
            recovery_s, stream_error = await _recover(publisher, log)
            consumer_error = await _consumer_answers(admin)
            if not consumer_error:
                await _drain(admin)
        except BaseException:
            # interrupted (Ctrl-C and SIGTERM cancel this task) or failed: the consumer's fetch under way is not
            # waited out (load.durability.FETCH_WAIT_S, on a busy machine longer than an interrupt's 5 s to stop)
            consuming.cancel()
            await asyncio.wait([consuming])
            raise
        stop_consuming.set()
        await consuming
        states = await _agreeing_states(nodes)
        reference = await _leader(admin) or nodes[0].name
        reads, unreadable = {}, {}
        for index, node in enumerate(nodes):
            try:
                reads[node.name] = await _read_node(nodes, index, max(s["last_seq"] for s in states.values()))
            except (nats.errors.Error, OSError) as exc:  # OSError: TimeoutError too
                unreadable[node.name] = f"{type(exc).__name__}: {exc}"
        history = History(
            log.publishes,
            log.deliveries,
            reads,
            reference if reference in reads else next(iter(reads), ""),
            unreadable,
            states,
            stream_error,
            consumer_error,
        )
        return Observed(history, done, recovery_s)
    finally:
        if ours and users_cluster:
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                await admin.jetstream(timeout=REMOVE_TIMEOUT_S).delete_stream(STREAM)
        for nc in (admin, publisher, consumer):
            await nc.close()


async def _set_up(what: str, step: Callable[[], Awaitable[Any]]) -> None:
    """Run `step` until it succeeds: a cluster that has just said it is healthy may still be electing the leader
    that answers a JetStream request, or not yet know every peer (400/10005 no suitable peers for placement).
    TargetError naming `what` and the last answer once the bound passes."""
    deadline = time.monotonic() + SET_UP_TIMEOUT_S
    while True:
        try:
            await step()
            return
        except (nats.errors.Error, TimeoutError) as exc:
            if time.monotonic() >= deadline:
                raise TargetError(f"{what}: no success within {SET_UP_TIMEOUT_S:g} s (last: {exc})") from None
        await asyncio.sleep(POLL_S)


async def _refuse_existing(nc: Client) -> None:
    """Return when the cluster has no stream of the run's name; TargetError when it has one (someone else's)."""
    try:
        await nc.jetstream(timeout=API_TIMEOUT_S).stream_info(STREAM)
    except nats.js.errors.NotFoundError:
        return
    raise TargetError(f"the cluster already has a stream {STREAM}: jetcheck durability neither uses nor removes it")


async def _leader(nc: Client) -> str | None:
    try:
        info = await nc.jetstream(timeout=API_TIMEOUT_S).stream_info(STREAM)
    except (nats.errors.Error, TimeoutError):
        return None
    return info.cluster.leader if info.cluster else None


async def _recover(nc: Client, log: WorkloadLog) -> tuple[float, str]:
    """Seconds until the healed cluster acknowledged a probe write, and "" (or why it never did)."""
    started, attempt = time.monotonic(), 0
    while True:
        attempt += 1
        record = await publish_once(nc, SUBJECT, f"probe-{attempt}", "", -1, 1, API_TIMEOUT_S)
        log.publishes.append(record)
        if record.outcome == "ok":
            return round(time.monotonic() - started, 3), ""
        if time.monotonic() - started >= RECOVERY_TIMEOUT_S:
            return round(time.monotonic() - started, 3), (
                f"no publish acknowledged {RECOVERY_TIMEOUT_S:g} s after every node was healthy again "
                f"({attempt} tries; last: {record.error})"
            )
        await asyncio.sleep(POLL_S)


async def _consumer_answers(nc: Client) -> str:
    """ "" when the durable consumer answers its info; else why not (404/10014 once the server has forgotten it)."""
    deadline, last = time.monotonic() + CONSUMER_TIMEOUT_S, ""
    while time.monotonic() < deadline:
        try:
            await nc.jetstream(timeout=API_TIMEOUT_S).consumer_info(STREAM, CONSUMER)
            return ""
        except nats.js.errors.NotFoundError as exc:
            return f"CONSUMER.INFO {STREAM} {CONSUMER} answered {exc.code}/{exc.err_code} {exc.description}"
        except (nats.errors.Error, TimeoutError) as exc:
            last = f"{type(exc).__name__} {exc}"
        await asyncio.sleep(POLL_S)
    return f"CONSUMER.INFO {STREAM} {CONSUMER} did not answer within {CONSUMER_TIMEOUT_S:g} s ({last})"


async def _drain(nc: Client) -> None:
    """Until the consumer has nothing pending or unacknowledged (or the bound passes: the checker then finds what
    was never delivered)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            info = await nc.jetstream(timeout=API_TIMEOUT_S).consumer_info(STREAM, CONSUMER)
            if info.num_pending == 0 and info.num_ack_pending == 0:
                return
        except (nats.errors.Error, TimeoutError):
            pass
        await asyncio.sleep(POLL_S)


def _replica_state(node: NatsServerProcess) -> dict[str, int]:
    """What node's replica of the stream holds, from its own monitoring endpoint."""
    jsz = node.monitor("jsz?accounts=true&streams=true")
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") == STREAM:
                state = stream.get("state", {})
                return {key: int(state.get(key, 0)) for key in ("messages", "first_seq", "last_seq")}
    return {"messages": 0, "first_seq": 0, "last_seq": 0}


async def _agreeing_states(nodes: list[NatsServerProcess]) -> dict[str, dict[str, int]]:
    """Each replica's state, once they all agree or the bound passes (followers catch up after a heal)."""
    deadline = time.monotonic() + AGREE_TIMEOUT_S
    while True:
        states = {}
        for node in nodes:
            try:
                states[node.name] = await asyncio.to_thread(_replica_state, node)
            except OSError:
                states[node.name] = {"messages": -1, "first_seq": -1, "last_seq": -1}
        if len({tuple(s.values()) for s in states.values()}) == 1 or time.monotonic() >= deadline:
            return states
        await asyncio.sleep(POLL_S)


async def _read_node(nodes: list[NatsServerProcess], index: int, last_seq: int) -> list[StoredMessage]:
    """Sequences 1..last_seq as node `index` serves them by direct get over a connection to it alone (a server
    hands a request to its own queue subscriber, the local replica, before a routed one)."""
    nc = await _connect(nodes, only=index)
    name = nodes[index].name
    jsm = nc.jetstream(timeout=API_TIMEOUT_S * 5)
    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def get(seq: int) -> StoredMessage | None:
        async with gate:
            try:
                message = await jsm.get_msg(STREAM, seq, direct=True)
            except nats.js.errors.NotFoundError:
                return None
        payload = (message.data or b"").decode(errors="replace")
        return StoredMessage(name, seq, payload, (message.headers or {}).get("Nats-Msg-Id", ""))

    try:
        found = await asyncio.gather(*(get(seq) for seq in range(1, last_seq + 1)))
    finally:
        await nc.close()
    return [message for message in found if message is not None]
