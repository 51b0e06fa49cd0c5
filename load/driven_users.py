"""Load through a client driver (conformance/clients/drivers, PROTOCOL.md "Load"): nats.go or nats.js publishes
and pull-consumes.

The driver runs the whole publish schedule itself (open loop at the user's rate share, or closed loop), with async
publishes and at most `max_inflight` outstanding, or the fetch + ack loop of a pull consumer, and streams every
operation's times back in batches; this side only starts and stops it and turns each batch into op-log rows (one
numpy pass, no per-operation Python) and the per-interval totals Locust reports. One driver process serves every
user of a Locust process.
"""

from __future__ import annotations

import base64
from array import array

import numpy as np

from jetcheck.conformance.clients.driven_clients import driven_adapter, prepare
from jetcheck.conformance.clients.driver_adapter import DriverAdapter
from jetcheck.errors import ConfigError
from jetcheck.fixtures.target import Credentials
from jetcheck.specs import ClientSpec

from .oplog import NO_E2E, SLOTS, OpLog
from .scenarios import BATCH_SIZE, LoadSettings, scenario
from .users import NEVER, Driver, DriverOpFailed, Overflow

# drivers/PROTOCOL.md "Load": a row of the driver's records is these int64s, little-endian
ROW_FIELDS = ("intended_ns", "sent_ns", "acked_ns", "stream_seq", "error", "err_code")
CONSUME_FIELDS = (
    "op",
    "started_ns",
    "ended_ns",
    "stream_seq",
    "delivered",
    "e2e_ns",
    "subject",
    "size",
    "error",
    "err_code",
)
CONSUMED, FETCHED = 0, 1  # a consume row's op
KV_FIELDS = ("op", "key", "intended_ns", "sent_ns", "done_ns", "revision", "error", "err_code")
KV_OPS = ("kv_put", "kv_get")  # a kv row's op is the index here
BATCH_MS = 50  # one record per 50 ms: a few hundred kB at most, so the pipe never paces the load
STOP_TIMEOUT_S = 60.0  # the driver's own drain deadline (10 s) plus a busy machine's slack
OVERFLOW = "Overflow"


def split_client(client: str) -> tuple[str, str]:
    """`nats.go@v1.55.0` -> ("nats.go", "v1.55.0"); no version: the driver's pinned one."""
    spec = ClientSpec(client)
    return spec.name, spec.release


def is_driven(client: str) -> bool:
    return ClientSpec(client).driven


DRIVEN_SCENARIOS = ("publish-async", "pull-consume", "mixed", "end-to-end", "kv", "counter", "batch-publish")


def check_driven_scenario(client: str, scenario_name: str) -> None:
    """A driver publishes (async, with an ack window), pull-consumes (fetch + explicit ack), puts/gets KV keys,
    increments counters and publishes atomic batches; the scenarios made of those run through it, the others (sync
    publish, ordered consumer) through nats-py only."""
    spec = scenario(scenario_name)
    if ClientSpec(client).variants:
        raise ConfigError(f"--client {client}: a driver's misbehave modes are for certify's proofs, not for load")
    if spec.publisher not in ("async", "kv", *REQUEST_OPS, "") or spec.consumer not in ("pull", ""):
        raise ConfigError(
            f"--client {client} runs {', '.join(DRIVEN_SCENARIOS)}; {spec.name} runs through nats-py only"
        )


def prepare_driver(client: str) -> None:
    """Build the driver of `client` now (ConfigError names what is missing)."""
    prepare(*split_client(client))


def driver_for(client: str) -> DriverAdapter:
    """This process's driver of `client` (built on first use), started now: call it outside the asyncio loop."""
    name, version = split_client(client)
    adapter = driven_adapter(name, version, [])
    adapter.process()
    return adapter


def client_description(client: str) -> dict[str, str] | None:
    """What load.json says of a driven client: its name, exact version (as its driver said, where one ran in this
    process; else the pinned or asked one) and runtime; None for nats-py (load.json's default)."""
    if not is_driven(client):
        return None
    adapter = driven_adapter(*split_client(client), [])
    return {"name": adapter.client, "version": adapter.version, "runtime": adapter.runtime}


def error_classes(log: OpLog, names: list[str]) -> np.ndarray:
    """The op log's error index of each of a record's error classes, by the driver's number (0: no error)."""
    return np.array([0, *(log.error(name) for name in names)], dtype=np.int64)


class DrivenUser(Driver):
    """One user inside the driver: a session (connection) of its own and one load run, started by `load_op`."""

    load_op = ""

    def __init__(self, settings: LoadSettings, log: OpLog, user: int, adapter: DriverAdapter, credentials) -> None:
        super().__init__(settings, log, user, connect=None)
        self.adapter = adapter
        self.credentials: Credentials = credentials
        self.session = None
        self.sub = f"load-{self.pid}-{user}"
        self.stopped = False

    def load_arguments(self) -> dict:
        raise NotImplementedError

    async def start(self) -> None:
        arguments = self.load_arguments()  # contexts first: rows may arrive before the answer
        self.session = await self.adapter.connect(self.settings.server_url, self.credentials)
        self.process = self.session.process
        self.process.route("sub", self.sub, self.take_rows)
        await self.process.request(self.load_op, session=self.session.id, sub=self.sub, batch_ms=BATCH_MS, **arguments)

    def take_rows(self, record: dict) -> None:
        raise NotImplementedError

    @staticmethod
    def columns(record: dict, fields: tuple[str, ...]) -> np.ndarray:
        """A record's rows as one int64 column per field (drivers/PROTOCOL.md "Load")."""
        return np.frombuffer(base64.b64decode(record["rows_b64"]), dtype="<i8").reshape(-1, len(fields)).T

    def log_rows(self, record: dict, ctx, intended, start, end, errors, codes, seq, delivered=0, e2e=NO_E2E) -> None:
        """Op-log rows (oplog.SLOTS) from the driver's columns, in one numpy pass; `errors` are the record's
        1-based error classes."""
        slots = (ctx, intended, start, end, error_classes(self.log, record.get("errors") or [])[errors], codes, seq)
        out = np.empty((len(intended), SLOTS), dtype=np.int64)
        for slot, column in enumerate((*slots, delivered, e2e)):
            out[:, slot] = column
        self.log.add_many(array("q", out.tobytes()))

    def count_failures(self, op: str, errors: np.ndarray, names: list[str]) -> None:
        stats = self.stats[op]
        for number, name in enumerate(names, start=1):
            if count := int((errors == number).sum()):
                stats.fail(Overflow(name) if name == OVERFLOW else DriverOpFailed(name), count)

    async def stop(self) -> None:
        """Stop the driver's run at the stop time, wait for its last rows (they precede its answer), close."""
        if self.stopped or self.session is None:
            return
        self.stopped = True
        try:
            await self.process.request(
                "load_stop",
                STOP_TIMEOUT_S,
                sub=self.sub,
                at_ns=None if self.stop_at_ns == NEVER else self.stop_at_ns,
            )
        finally:
            self.process.unroute("sub", self.sub)
            await self.session.close()


class DrivenPublisher(DrivenUser):
    """A publisher inside the driver: async publishes with an ack window, on the user's schedule."""

    op_names = ("publish",)
    load_op = "load_publish"

    def load_arguments(self) -> dict:
        s = self.settings
        subject = s.subject(self.pid, self.user)
        self.ctx = self.log.context(self.user, "publish", s.stream, subject, s.payload_size)
        return {
            "subject": subject,
            "payload_size": s.payload_size,
            "rate": s.rate_per_publisher,
            "max_inflight": s.max_inflight,
            "stamp": s.spec.stamp,
        }

    def take_rows(self, record: dict) -> None:
        """One batch of the driver's rows into the op log and this interval's totals."""
        intended, sent, acked, seq, errors, codes = self.columns(record, ROW_FIELDS)
        names = record.get("errors") or []
        self.log_rows(record, self.ctx, intended, sent, acked, errors, codes, seq)
        stats = self.stats["publish"]
        ok = errors == 0
        stats.ok += int(ok.sum())
        stats.latency_ns += int((acked[ok] - intended[ok]).sum())
        self.count_failures("publish", errors, names)


class DrivenCounter(DrivenPublisher):
    """Counter increments inside the driver, as CounterPublisher: an empty publish with Nats-Incr +1 on the user's
    subject, each waiting for its ack (the new total); rows as load_publish's."""

    load_op = "load_counter"

    def load_arguments(self) -> dict:
        s = self.settings
        subject = s.subject(self.pid, self.user)
        self.ctx = self.log.context(self.user, "publish", s.stream, subject, 0)  # an increment has no body
        return {"subject": subject, "payload_size": 0, "rate": s.rate_per_publisher, "max_inflight": s.max_inflight}


class DrivenBatch(DrivenPublisher):
    """Atomic batches inside the driver, as BatchPublisher: BATCH_SIZE messages under one batch id, one row per
    batch from its first message to the commit's ack (whose stream sequence it logs)."""

    load_op = "load_batch"

    def load_arguments(self) -> dict:
        arguments = super().load_arguments()
        del arguments["stamp"]
        return {**arguments, "batch_size": BATCH_SIZE}


REQUEST_OPS = {"counter": DrivenCounter, "batch": DrivenBatch}  # publisher kinds whose every operation waits


class DrivenConsumer(DrivenUser):
    """A pull consumer inside the driver: fetch + explicit ack on the scenario's durable, as PullConsumer logs it (a
    ``consume`` row per message, intended and started when its fetch began, a ``fetch`` row per fetch)."""

    op_names = ("consume", "fetch")
    load_op = "load_consume"

    def load_arguments(self) -> dict:
        s = self.settings
        self.fetch_ctx = self.log.context(self.user, "fetch", s.stream, "", 0)
        self.contexts: dict[tuple[str, int], int] = {}
        return {"stream": s.stream, "durable": s.durable, "batch": s.fetch_batch}

    def consume_context(self, subject: str, size: int) -> int:
        key = (subject, size)
        ctx = self.contexts.get(key)
        if ctx is None:
            ctx = self.contexts[key] = self.log.context(self.user, "consume", self.settings.stream, subject, size)
        return ctx

    def take_rows(self, record: dict) -> None:
        """One batch of the driver's rows into the op log and this interval's totals."""
        names = record.get("errors") or []
        subjects = record.get("subjects") or []
        op, started, ended, seq, delivered, e2e, subject, size, errors, codes = self.columns(record, CONSUME_FIELDS)
        consumed = op == CONSUMED
        ctx = np.full(len(op), self.fetch_ctx, dtype=np.int64)
        if consumed.any():  # one context per (subject, size), as PullConsumer's
            pairs, where = np.unique(np.stack([subject[consumed], size[consumed]], axis=1), axis=0, return_inverse=True)
            contexts = [self.consume_context(subjects[number - 1], int(length)) for number, length in pairs]
            ctx[consumed] = np.array(contexts, dtype=np.int64)[where.reshape(-1)]
        self.log_rows(
            record, ctx, started, started, ended, errors, codes, seq, delivered, np.where(consumed, e2e, NO_E2E)
        )
        ok = errors == 0
        for name, mask in (("consume", consumed), ("fetch", ~consumed)):
            stats = self.stats[name]
            done = ok & mask
            stats.ok += int(done.sum())
            latency = ended[done] - started[done]
            if name == "consume":  # as PullConsumer: end-to-end where the publisher stamped the message
                latency = np.where(e2e[done] == NO_E2E, latency, e2e[done])
                stats.nbytes += int(size[done].sum())
            stats.latency_ns += int(latency.sum())
            self.count_failures(name, np.where(mask, errors, 0), names)


class DrivenKv(DrivenUser):
    """KV put then get of the same key inside the driver, as KvUser: the same keys, op order and rows."""

    op_names = KV_OPS
    load_op = "load_kv"

    def load_arguments(self) -> dict:
        s = self.settings
        keys = [f"u{self.pid}_{self.user}.k{i}" for i in range(s.keyspace)]
        self.ctx = np.array(
            [
                [self.log.context(self.user, op, s.stream, f"$KV.{s.kv_bucket}.{key}", s.payload_size) for key in keys]
                for op in KV_OPS
            ],
            dtype=np.int64,
        )
        return {
            "bucket": s.kv_bucket,
            "keys": keys,
            "payload_size": s.payload_size,
            "rate": s.rate_per_publisher,
            "max_inflight": s.max_inflight,
        }

    def take_rows(self, record: dict) -> None:
        """One batch of the driver's rows into the op log and this interval's totals."""
        names = record.get("errors") or []
        op, key, intended, sent, done, revision, errors, codes = self.columns(record, KV_FIELDS)
        self.log_rows(record, self.ctx[op, key], intended, sent, done, errors, codes, revision)
        ok = errors == 0
        for number, name in enumerate(KV_OPS):
            mine = op == number
            done_ok = ok & mine
            stats = self.stats[name]
            stats.ok += int(done_ok.sum())
            stats.latency_ns += int((done[done_ok] - intended[done_ok]).sum())
            stats.nbytes += int(done_ok.sum()) * self.settings.payload_size
            self.count_failures(name, np.where(mine, errors, 0), names)


def driven_class(settings: LoadSettings, role: str) -> type[DrivenUser]:
    """The driven user of a role in the scenario (as users.driver_class for nats-py)."""
    if role == "publisher":
        kind = settings.spec.publisher
        return DrivenKv if kind == "kv" else REQUEST_OPS.get(kind, DrivenPublisher)
    return DrivenConsumer
