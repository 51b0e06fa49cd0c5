"""What one load user does, entirely inside asyncio: publish, consume or use KV, and log every operation.

A driver runs as one asyncio task from `start()` to `stop()`; Locust only reads its per-interval `OpStats`
(`take_stats`) and asks it to start and stop, so there is no gevent hand-off per message.

Open loop (rate > 0): operations are scheduled at fixed intended times (pacing.Schedule) and never wait for each
other; when `max_inflight` operations are outstanding an intended operation is not sent but logged as an
``Overflow`` error. Closed loop (rate 0): as fast as the client goes, bounded by `max_inflight`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass, field

from nats.js.errors import APIError, NoStreamResponseError

from . import clock
from .oplog import NO_E2E, OpLog
from .pacing import Schedule
from .scenarios import BATCH_SIZE, LoadSettings

STAMP_TS = "Jc-Ts"
STAMP_SEQ = "Jc-Seq"
FETCH_TIMEOUT_S = 0.5
DRAIN_TIMEOUT_S = 10.0
NEVER = 1 << 62  # a stop time no run reaches
PUB_ACK_SEQ = re.compile(rb'"seq":(\d+)')  # a JetStream publish ack: {"stream":"S","seq":N[,...]}
time_ns = clock.time_ns  # the process's clock (shifted in tests that stand in for a host whose clock is off)


class Overflow(Exception):
    """An open-loop operation was not sent because `max_inflight` operations were outstanding."""


class DriverOpFailed(Exception):
    """An operation a driven client reported as failed; the message is the client's error class."""


@dataclass
class OpStats:
    """Totals of one op kind since the last report: what Locust's request events are made of."""

    ok: int = 0
    latency_ns: int = 0  # sum over ok ops (from the intended time)
    nbytes: int = 0
    # per error (its class, and for a driven client's failure the class the driver named): the latest one, count
    errors: dict[str, tuple[BaseException, int]] = field(default_factory=dict)

    def fail(self, exc: BaseException, count: int = 1) -> None:
        name = f"{type(exc).__name__}:{exc}" if isinstance(exc, DriverOpFailed) else type(exc).__name__
        self.errors[name] = (exc, self.errors.get(name, (exc, 0))[1] + count)

    def failures(self) -> list[tuple[BaseException, int]]:
        """One (latest exception, count) per kind of error: what Locust's failure events are made of."""
        return list(self.errors.values())


def delivery_of(reply: str) -> tuple[int, int]:
    """(stream sequence, delivery count) from a JetStream ack subject; nats-py's `Msg.metadata` also parses the
    timestamp into a datetime, which costs more than the rest of a consumed message's bookkeeping."""
    tokens = reply.split(".")
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(tokens[5]), int(tokens[4])
    # $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>]
    return int(tokens[7]), int(tokens[6])


def error_code(exc: BaseException) -> int:
    return int(getattr(exc, "err_code", None) or getattr(exc, "code", None) or 0)


class Driver:
    """Base: connection, op log contexts, stats, the run task and the drain on stop."""

    op_names: tuple[str, ...] = ()

    def __init__(self, settings: LoadSettings, log: OpLog, user: int, connect) -> None:
        self.settings = settings
        self.log = log
        self.user = user
        self.pid = log.pid
        self._connect = connect  # async () -> nats Client
        self.nc = None
        self.js = None
        self.stats = {name: OpStats() for name in self.op_names}
        self.stopping = False
        self.stop_at_ns = NEVER  # operations due at or after it are not started
        self.failure: BaseException | None = None
        self._task: asyncio.Task | None = None
        self._inflight: set = set()
        self._stop_requested = asyncio.Event()

    async def start(self) -> None:
        self.rec = self.log.extend  # one row: (ctx, intended, start, end, error, code, seq, deliveries, e2e)
        self.nc = await self._connect()
        self.js = self.nc.jetstream()
        await self.prepare()
        self._task = asyncio.get_running_loop().create_task(self._guarded_run())

    async def prepare(self) -> None:
        pass

    async def run(self) -> None:
        raise NotImplementedError

    async def _guarded_run(self) -> None:
        try:
            await self.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported to Locust as the user's error; the log keeps what was done
            self.failure = exc

    async def drain(self) -> None:
        """Wait (bounded) for what the driver itself tracks as outstanding; the run loop has ended."""

    def stop_intending(self, at_ns: int) -> None:
        """Start no operation due at or after `at_ns`. Only sets a number the run loop reads, so a greenlet of the
        loop's thread may call it while the loop waits: operations that fall due before the loop hears of the stop
        (it may be busy or descheduled) are not sent late either."""
        self.stop_at_ns = min(self.stop_at_ns, at_ns)

    def take_stats(self) -> dict[str, OpStats]:
        taken = self.stats
        self.stats = {name: OpStats() for name in self.op_names}
        return taken

    async def stop(self) -> None:
        """Stop scheduling, wait for outstanding operations (each is logged), close the connection."""
        self.stopping = True
        self._stop_requested.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._task, FETCH_TIMEOUT_S * 4 + DRAIN_TIMEOUT_S)
        await self.drain()
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=DRAIN_TIMEOUT_S)
            for pending in list(self._inflight):
                pending.cancel()  # its done callback logs it as CancelledError
            await asyncio.sleep(0)
        if self.nc is not None and not self.nc.is_closed:
            try:
                await self.nc.flush(timeout=5)  # acks are fire-and-forget publishes: get them out
            finally:
                await self.nc.close()


class Publisher(Driver):
    """js publish (sync or pipelined async) at a fixed rate or as fast as possible."""

    op_names = ("publish",)

    async def prepare(self) -> None:
        s = self.settings
        self.subject = s.subject(self.pid, self.user)
        self.payload = b"x" * s.payload_size
        self.ctx = self.log.context(self.user, "publish", s.stream, self.subject, s.payload_size)
        self.async_mode = s.spec.publisher == "async"
        self.stamp = s.spec.stamp
        self.seq = 0
        # Async publishes are pipelined here, not through nats-py's publish_async: a plain publish with a reply
        # subject of our own per operation, and one subscription whose callback logs each ack. That spares every
        # operation a future, two done callbacks, a NUID token, a semaphore and a parsed PubAck, which cost more
        # CPU than the publish itself; what reaches the server is the same message with the same kind of reply.
        self.awaiting: dict[int, tuple[int, int]] = {}  # reply token -> (intended, start) of publishes in flight
        self.token = 0
        self.room = asyncio.Event()  # set while fewer than max_inflight are awaiting their ack
        self.room.set()
        self.emptied = asyncio.Event()
        if self.async_mode:
            self.reply_prefix = self.nc.new_inbox() + "."
            self.token_at = len(self.reply_prefix)
            await self.nc.subscribe(self.reply_prefix + "*", cb=self._on_ack)

    def _headers(self, now: int) -> dict[str, str] | None:
        """The headers of the publish sent at `now`: the stamp when the scenario stamps, else none."""
        if not self.stamp:
            return None
        self.seq += 1
        return {STAMP_TS: str(now), STAMP_SEQ: str(self.seq)}

    async def run(self) -> None:
        rate = self.settings.rate_per_publisher
        if rate > 0:
            await self._open_loop(Schedule(rate))
        elif self.async_mode:
            await self._closed_async()
        else:
            await self._closed_sync()

    async def _open_loop(self, schedule: Schedule) -> None:
        limit = self.settings.max_inflight
        inflight = self._inflight
        awaiting = self.awaiting  # async publishes awaiting their ack; sync ones are tasks in flight
        while not self.stopping:
            for index in schedule.take_due(time_ns()):
                intended = schedule.intended_ns(index)
                if intended >= self.stop_at_ns:
                    return  # the schedule ends where the stop was asked for
                if len(inflight) + len(awaiting) >= limit:
                    self._overflow(intended)
                elif self.async_mode:
                    await self._send_async(intended)
                else:
                    task = asyncio.ensure_future(self._send_sync(intended))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
            await schedule.sleep_until_next()

    async def _closed_async(self) -> None:
        limit, awaiting, room = self.settings.max_inflight, self.awaiting, self.room
        while not self.stopping and (now := time_ns()) < self.stop_at_ns:
            if len(awaiting) >= limit:
                room.clear()
                await room.wait()
                continue
            await self._send_async(now)

    async def _closed_sync(self) -> None:
        while not self.stopping and (now := time_ns()) < self.stop_at_ns:
            await self._send_sync(now)

    async def _send_async(self, intended: int) -> None:
        start = time_ns()
        self.token = token = self.token + 1
        self.awaiting[token] = (intended, start)
        try:
            await self.nc.publish(
                self.subject,
                self.payload,
                reply=self.reply_prefix + str(token),
                headers=self._headers(start),
            )
        except Exception as exc:
            self.awaiting.pop(token, None)
            self._failed(intended, start, exc)

    async def _on_ack(self, msg) -> None:
        """The server's answer to one async publish: its ack (stream sequence) or why it was refused."""
        end = time_ns()
        awaiting = self.awaiting
        sent = awaiting.pop(int(msg.subject[self.token_at :]), None)
        if sent is None:
            return  # answered after the drain gave up on it
        if len(awaiting) < self.settings.max_inflight:
            self.room.set()
            if not awaiting:
                self.emptied.set()
        intended, start = sent
        data = msg.data
        found = PUB_ACK_SEQ.search(data) if data and b'"error"' not in data else None
        if found is None:  # no responders (an empty 503 status message) or an API error
            error = json.loads(data).get("error") if data else None
            self._failed(intended, start, APIError.from_error(error) if error else NoStreamResponseError(), end)
            return
        self.rec((self.ctx, intended, start, end, 0, 0, int(found[1]), 0, NO_E2E))
        stats = self.stats["publish"]
        stats.ok += 1
        stats.latency_ns += end - intended

    async def drain(self) -> None:
        """Async publishes still awaiting their ack at the stop get up to DRAIN_TIMEOUT_S; any still unanswered
        stay unlogged (the record check then says so)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while getattr(self, "awaiting", None):
                    self.emptied.clear()
                    await self.emptied.wait()

    async def _send_sync(self, intended: int) -> None:
        start = time_ns()
        try:
            ack = await self._publish_sync(start)
        except asyncio.CancelledError:
            self._failed(intended, start, asyncio.CancelledError())
            raise
        except Exception as exc:
            self._failed(intended, start, exc)
            return
        end = time_ns()
        self.rec((self.ctx, intended, start, end, 0, 0, ack.seq, 0, NO_E2E))
        stats = self.stats["publish"]
        stats.ok += 1
        stats.latency_ns += end - intended

    async def _publish_sync(self, start: int):
        """One publish, waiting for its ack: what a sync operation is."""
        return await self.js.publish(self.subject, self.payload, headers=self._headers(start))

    def _failed(self, intended: int, start: int, exc: BaseException, end: int | None = None) -> None:
        self.log.add(self.ctx, intended, start, end or time_ns(), self.log.error(exc), error_code(exc))
        self.stats["publish"].fail(exc)

    def _overflow(self, intended: int) -> None:
        now = time_ns()
        self.log.add(self.ctx, intended, now, now, self.log.error("Overflow"))
        self.stats["publish"].fail(Overflow(f"more than {self.settings.max_inflight} operations in flight"))


class CounterPublisher(Publisher):
    """Counter increments (ADR-49): an empty message with Nats-Incr +1, waiting for the ack with the new total."""

    async def prepare(self) -> None:
        await super().prepare()
        self.payload = b""  # a counter message has no body
        self.ctx = self.log.context(self.user, "publish", self.settings.stream, self.subject, 0)
        self.async_mode = False

    def _headers(self, now: int) -> dict[str, str]:
        return {"Nats-Incr": "+1"}


class BatchPublisher(Publisher):
    """Atomic batches (ADR-50): BATCH_SIZE messages under one Nats-Batch-Id, the first and the commit as requests;
    one operation per batch, from its first message to the commit's ack (whose sequence it logs)."""

    async def prepare(self) -> None:
        await super().prepare()
        self.async_mode = False
        self.batches = 0

    async def _publish_sync(self, start: int):
        self.batches += 1
        batch = f"{self.pid}-{self.user}-{self.batches}"
        last = BATCH_SIZE
        for n in range(1, last + 1):
            headers = {"Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(n)}
            if n == last:
                headers["Nats-Batch-Commit"] = "1"
            if n in (1, last):  # the first is answered (empty, or why not), the commit with the PubAck
                reply = await self.nc.request(self.subject, self.payload, timeout=FETCH_TIMEOUT_S, headers=headers)
                if reply.data and b'"error"' in reply.data:
                    raise APIError.from_error(json.loads(reply.data)["error"])
            else:
                await self.nc.publish(self.subject, self.payload, headers=headers)
        return BatchAck(int(PUB_ACK_SEQ.search(reply.data)[1]))


class Consumer(Driver):
    """Shared logic of consumers: log one ``consume`` row per message, with end-to-end latency when stamped."""

    op_names = ("consume",)

    async def prepare(self) -> None:
        self._contexts: dict[tuple[str, int], int] = {}

    def _consumed(self, msg, fetch_start: int, end: int) -> None:
        data_len = len(msg.data)
        ctx = self._contexts.get((msg.subject, data_len))
        if ctx is None:
            ctx = self._contexts[(msg.subject, data_len)] = self.log.context(
                self.user, "consume", self.settings.stream, msg.subject, data_len
            )
        e2e = NO_E2E
        headers = msg.headers
        if headers:
            stamp = headers.get(STAMP_TS)
            if stamp:
                e2e = end - int(stamp)
        stream_seq, delivered = delivery_of(msg.reply)
        self.rec((ctx, fetch_start, fetch_start, end, 0, 0, stream_seq, delivered, e2e))
        stats = self.stats["consume"]
        stats.ok += 1
        stats.latency_ns += end - fetch_start if e2e == NO_E2E else e2e
        stats.nbytes += data_len


class PullConsumer(Consumer):
    """fetch + ack on the scenario's shared durable pull consumer."""

    op_names = ("consume", "fetch")

    async def prepare(self) -> None:
        await super().prepare()
        s = self.settings
        self.sub = await self.js.pull_subscribe_bind(s.durable, s.stream)
        self.fetch_ctx = self.log.context(self.user, "fetch", s.stream, "", 0)

    async def run(self) -> None:
        batch = self.settings.fetch_batch
        while not self.stopping and (start := time_ns()) < self.stop_at_ns:
            try:
                msgs = await self.sub.fetch(batch, timeout=FETCH_TIMEOUT_S)
            except TimeoutError:
                continue  # nothing to consume right now: not an error, and not logged
            except Exception as exc:
                self.log.add(self.fetch_ctx, start, start, time_ns(), self.log.error(exc), error_code(exc))
                self.stats["fetch"].fail(exc)
                continue
            end = time_ns()
            self.log.add(self.fetch_ctx, start, start, end)
            fetch_stats = self.stats["fetch"]
            fetch_stats.ok += 1
            fetch_stats.latency_ns += end - start
            for msg in msgs:
                self._consumed(msg, start, end)
                await msg.ack()


class OrderedConsumer(Consumer):
    """An ordered push consumer over the whole stream (each user reads every message)."""

    async def run(self) -> None:
        s = self.settings

        async def on_msg(msg) -> None:
            now = time_ns()
            self._consumed(msg, now, now)

        sub = await self.js.subscribe(s.subject_root + ".>", stream=s.stream, ordered_consumer=True, cb=on_msg)
        try:
            await self._stop_requested.wait()
        finally:
            await sub.unsubscribe()


class KvUser(Driver):
    """KV put then get of the same key, cycling over `keyspace` keys of this user."""

    op_names = ("kv_put", "kv_get")

    async def prepare(self) -> None:
        s = self.settings
        self.kv = await self.js.key_value(s.kv_bucket)
        self.payload = b"x" * s.payload_size
        self.keys = [f"u{self.pid}_{self.user}.k{i}" for i in range(s.keyspace)]
        subject_root = f"$KV.{s.kv_bucket}."
        self.ctx = {
            op: [self.log.context(self.user, op, s.stream, subject_root + key, s.payload_size) for key in self.keys]
            for op in self.op_names
        }
        self.last_put: int | None = None

    async def run(self) -> None:
        rate = self.settings.rate_per_publisher
        if rate > 0:
            schedule = Schedule(rate)
            limit = self.settings.max_inflight
            while not self.stopping:
                for index in schedule.take_due(time_ns()):
                    intended = schedule.intended_ns(index)
                    if intended >= self.stop_at_ns:
                        return
                    if len(self._inflight) >= limit:
                        now = time_ns()
                        self.log.add(
                            self.ctx["kv_put"][index % len(self.keys)], intended, now, now, self.log.error("Overflow")
                        )
                        self.stats["kv_put"].fail(Overflow("kv op overflow"))
                        continue
                    task = asyncio.ensure_future(self._one(index, intended))
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight.discard)
                await schedule.sleep_until_next()
        else:
            index = 0
            while not self.stopping and (now := time_ns()) < self.stop_at_ns:
                await self._one(index, now)
                index += 1

    async def _one(self, index: int, intended: int) -> None:
        """Even operations put key index/2; odd ones get the key whose put was acknowledged last."""
        key_no = (index // 2) % len(self.keys)
        op = "kv_put" if index % 2 == 0 or self.last_put is None else "kv_get"
        if op == "kv_get":
            key_no = self.last_put
        ctx = self.ctx[op][key_no]
        start = time_ns()
        try:
            if op == "kv_put":
                seq = await self.kv.put(self.keys[key_no], self.payload)
                self.last_put = key_no
            else:
                seq = (await self.kv.get(self.keys[key_no])).revision or 0
        except asyncio.CancelledError:
            self.log.add(ctx, intended, start, time_ns(), self.log.error("CancelledError"))
            raise
        except Exception as exc:
            self.log.add(ctx, intended, start, time_ns(), self.log.error(exc), error_code(exc))
            self.stats[op].fail(exc)
            return
        end = time_ns()
        self.log.add(ctx, intended, start, end, 0, 0, seq)
        stats = self.stats[op]
        stats.ok += 1
        stats.latency_ns += end - intended
        stats.nbytes += len(self.payload)


@dataclass(frozen=True)
class BatchAck:
    seq: int


PUBLISHERS = {"counter": CounterPublisher, "batch": BatchPublisher, "kv": KvUser}


def driver_class(settings: LoadSettings, role: str) -> type[Driver]:
    spec = settings.spec
    if role == "publisher":
        return PUBLISHERS.get(spec.publisher, Publisher)
    return PullConsumer if spec.consumer == "pull" else OrderedConsumer
