"""One durability run on a cluster that is up: the stream and its durable consumer, the workload
(durability.workload) beside the fault schedule (durability.schedule), everything healed, the stream and the
consumer asked to answer, the consumer drained, and the stream read from every node into a History for the checker
(durability.checker).

On a user's cluster the stream the run creates is removed again at the end; jetcheck's own cluster is removed whole
by the command (durability.cli).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig

from jetcheck.fault_kinds import MEMBER_FAULTS
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.relay import RouteMesh
from jetcheck.fixtures.target import Target

from .checker import History
from .faults import ClusterFaults
from .history import FaultRecord, StoredMessage
from .leaders import sample_leaders
from .membership import Membership
from .packet_loss import PacketLoss, in_own_namespace
from .power_loss import PowerLossDisks
from .schedule import PlannedFault, run_schedule
from .workload import (
    WorkloadLog,
    WorkloadPlan,
    consume,
    create_consumer,
    delete_acked,
    publish_once,
    purge_acked,
    purged_subject,
    run_publishers,
)

STREAM = "JETCHECK_DURABILITY"  # prefixed: on a user's cluster it must not be anyone else's
SUBJECT = "jetcheck.durability.writes"
CONSUMER = "DURABLE"
DUPLICATE_WINDOW_S = 600.0  # longer than any run: every retry of a message id falls inside it
RECOVERY_TIMEOUT_S = 60.0  # the stream-available-after-heal rule's bound
CONSUMER_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 60.0
AGREE_TIMEOUT_S = 30.0  # for the replicas to catch up before they are read
API_TIMEOUT_S = 2.0
SET_UP_TIMEOUT_S = 60.0
REMOVE_TIMEOUT_S = 5.0  # removing the run's stream from a user's cluster, also on Ctrl-C
LEADER_WAIT_S = 10.0
POLL_S = 0.25
NO_REPLICA = {"messages": 0, "first_seq": 0, "last_seq": 0, "replica": 0}  # a node whose /jsz has no such stream
READ_CONCURRENCY = 200


@dataclass(frozen=True)
class Observed:
    """What the session saw, for the checker and run.json."""

    history: History
    faults: list[FaultRecord]
    recovery_s: float
    power_cuts: list[dict] = field(default_factory=list)  # per node of each power cut: what it dropped


async def _connect(nodes: list[NatsServerProcess], only: int | None = None) -> Client:
    """A client of every node that reconnects forever, or of node `only` alone that does not."""
    if only is not None:
        return await Target(nodes[only].url).connect()
    urls = [node.url for node in nodes]
    return await Target(urls[0]).connect(
        servers=urls, allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=POLL_S
    )


@dataclass(frozen=True)
class StreamPlan:
    """The stream a run writes to: `replicas` of them (every node when 0), and its durable consumer created before
    the workload, or only once the first fault has healed (`consumer_after_first_fault`: the stream's creation is
    then the last thing the meta group was asked to do before that fault)."""

    replicas: int = 0
    consumer_after_first_fault: bool = False


async def run_session(
    nodes: list[NatsServerProcess],
    plan: list[PlannedFault],
    workload: WorkloadPlan,
    seed: int,
    links: RouteMesh | None,
    users_cluster: bool = False,
    stream: StreamPlan = StreamPlan(),
    disks: PowerLossDisks | None = None,
) -> Observed:
    """The run on a cluster that is up; on a user's cluster, the stream it creates is removed again at the end
    (jetcheck's own cluster is removed whole). `disks`: the nodes' stores on the power-loss layer, for power cuts."""
    admin, publisher, consumer = [await _connect(nodes) for _ in range(3)]
    ours = False
    stop_sampling = asyncio.Event()
    sampling = asyncio.create_task(sample_leaders(nodes, stop_sampling))
    try:
        await _set_up(f"checking there is no stream {STREAM} yet", lambda: _refuse_existing(admin))
        ours = True  # whatever stream of that name is there from now on is this run's
        config = StreamConfig(
            name=STREAM,
            subjects=[SUBJECT, purged_subject(SUBJECT)],
            num_replicas=stream.replicas or len(nodes),
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
            allow_direct=True,
        )
        await _set_up(f"creating the R{config.num_replicas} stream", lambda: admin.jetstream().add_stream(config))
        if not stream.consumer_after_first_fault:
            await _set_up("creating the durable consumer", lambda: create_consumer(admin, STREAM, CONSUMER))
        log, stop_consuming = WorkloadLog(), asyncio.Event()
        consuming = asyncio.create_task(consume(consumer, STREAM, CONSUMER, log, stop_consuming))
        members = Membership(nodes, STREAM) if any(fault.kind in MEMBER_FAULTS for fault in plan) else None
        faults = ClusterFaults(nodes, links, PacketLoss() if in_own_namespace() else None, disks, members)

        async def leader() -> str | None:
            """The stream's leader now; a busy or electing cluster is asked again for a while before giving up."""
            deadline = time.monotonic() + LEADER_WAIT_S
            while (name := await _leader(admin)) is None and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
            return name

        first_healed = asyncio.Event()
        late_consumer = ""  # why the consumer created after the first fault could not be (once it was tried)

        async def create_unless_stream_gone() -> None:
            try:
                await create_consumer(admin, STREAM, CONSUMER)
            except nats.js.errors.NotFoundError as exc:  # the stream is gone: asking again will not bring it back
                raise TargetError(f"CONSUMER.CREATE {STREAM} {CONSUMER} answered {exc.code}/{exc.err_code} "
                                  f"{exc.description} after the first fault") from None  # fmt: skip

        async def consumer_after_first_fault() -> None:
            nonlocal late_consumer
            await first_healed.wait()
            try:
                await _set_up("creating the durable consumer", create_unless_stream_gone)
            except TargetError as exc:
                late_consumer = str(exc)

        try:
            _, _, _, done, _ = await asyncio.gather(
                run_publishers(publisher, SUBJECT, workload, log),
                delete_acked(admin, STREAM, workload, log),
                purge_acked(admin, STREAM, SUBJECT, workload, log),
                run_schedule(faults, plan, leader, time.monotonic(), seed, first_healed),
                consumer_after_first_fault() if stream.consumer_after_first_fault else asyncio.sleep(0),
            )
            await faults.heal_all()  # nothing is left down, whatever happened above
            recovery_s, stream_error = await _recover(admin, publisher, log)
            consumer_error = late_consumer or await _consumer_answers(admin)
            if not consumer_error:
                await _drain(admin)
        except BaseException:
            # interrupted (Ctrl-C and SIGTERM cancel this task) or failed: the consumer's fetch under way is not
            # waited out (durability.workload.FETCH_WAIT_S, on a busy machine longer than an interrupt's 5 s to stop)
            consuming.cancel()
            await asyncio.wait([consuming])
            raise
        stop_consuming.set()
        await consuming
        holders = await _replica_nodes(admin, nodes)
        states = await _agreeing_states(holders)
        reference = await _leader(admin) or holders[0].name
        reads, unreadable = {}, {}
        for index, node in enumerate(nodes):
            if node not in holders:
                continue
            if states.get(node.name) == NO_REPLICA:
                # a direct get sent to it would be answered by another node's replica, and read as its own
                unreadable[node.name] = "its /jsz shows no replica of the stream"
                continue
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
        stop_sampling.set()
        history = replace(history, leaders=await sampling, deletes=log.deletes, purges=log.purges)
        return Observed(history, done, recovery_s, faults.power_cuts)
    finally:
        stop_sampling.set()
        await asyncio.wait([sampling])
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


async def _stream_answers(nc: Client) -> str:
    """ "" when the stream answers its info after healing (or does not answer at all within the bound: the probe
    publish then says why); why not when the server says it has no such stream (404/10059)."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            await nc.jetstream(timeout=API_TIMEOUT_S).stream_info(STREAM)
            return ""
        except nats.js.errors.NotFoundError as exc:
            return f"STREAM.INFO {STREAM} answered {exc.code}/{exc.err_code} {exc.description} after healing"
        except (nats.errors.Error, TimeoutError):
            await asyncio.sleep(POLL_S)
    return ""


async def _replica_nodes(nc: Client, nodes: list[NatsServerProcess]) -> list[NatsServerProcess]:
    """The nodes that hold a replica of the stream (its leader and replicas), or every node when the stream does
    not say (no answer, or a stream on every node)."""
    try:
        info = await nc.jetstream(timeout=API_TIMEOUT_S).stream_info(STREAM)
    except (nats.errors.Error, TimeoutError):
        return nodes
    if not info.cluster:
        return nodes
    names = {info.cluster.leader, *(peer.name for peer in info.cluster.replicas or [])}
    return [node for node in nodes if node.name in names] or nodes


async def _recover(admin: Client, nc: Client, log: WorkloadLog) -> tuple[float, str]:
    """Seconds until the healed cluster acknowledged a probe write, and "" (or why it never did: the stream not
    found, or no acknowledgement in time)."""
    started, attempt = time.monotonic(), 0
    if missing := await _stream_answers(admin):
        return round(time.monotonic() - started, 3), missing
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
    return dict(NO_REPLICA)


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
