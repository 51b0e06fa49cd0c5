"""The load scenarios by name, their settings, and what they create on the server (and delete again).

Everything a run creates is named from its run prefix (streams ``<PREFIX>_LOAD_<SCENARIO>``, subjects
``<prefix>.load.<pid>.<user>``, the KV bucket ``<PREFIX>_LOAD_KV``); teardown deletes exactly those names. A run
creates them only after `fixtures.cleanup.claim_prefix` found nothing on the target under its prefix, and marks
its stream with its run id where the server keeps metadata.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any

from jetcheck.errors import ConfigError
from jetcheck.fixtures.cleanup import connected_version, run_marker
from jetcheck.option import register_choices

PUBLISHER = "publisher"
CONSUMER = "consumer"
BATCH_SIZE = 10  # messages per atomic batch (ADR-50 allows up to 1000)


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    publisher: str = ""  # "sync" | "async" | "kv" | "counter" | "batch" | "" (no publishing role)
    consumer: str = ""  # "pull" | "ordered" | "" (no consuming role)
    stamp: bool = False  # publishers put a send time and sequence in headers
    prefill: bool = False  # the stream is filled before consumers start
    paced: bool = True  # accepts --rate (open loop)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for r, kind in ((PUBLISHER, self.publisher), (CONSUMER, self.consumer)) if kind)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("publish-sync", "js publish, waiting for each ack", publisher="sync"),
        Scenario("publish-async", "js publish_async pipelined, bounded in-flight", publisher="async"),
        Scenario(
            "pull-consume",
            "pull consumer fetch + ack over a prefilled stream",
            consumer="pull",
            prefill=True,
            paced=False,
        ),
        Scenario(
            "ordered-consume", "ordered consumer over a prefilled stream", consumer="ordered", prefill=True, paced=False
        ),
        Scenario("kv", "KV put then get of the same key", publisher="kv"),
        Scenario(
            "end-to-end",
            "publishers stamp time + sequence headers, pull consumers measure end-to-end latency",
            publisher="async",
            consumer="pull",
            stamp=True,
        ),
        Scenario("mixed", "async publishers and pull consumers on one stream", publisher="async", consumer="pull"),
        Scenario("counter", "counter increments (ADR-49, 2.12), waiting for each total", publisher="counter"),
        Scenario(
            "batch-publish",
            f"atomic batches of {BATCH_SIZE} messages (ADR-50, 2.12), one operation per committed batch",
            publisher="batch",
            paced=False,  # closed loop: a stream takes 50 batches in flight (ADR-50), an open loop overruns it
        ),
    )
}
# what the stream of a publisher kind needs (nats-server 2.12 on)
STREAM_OPTIONS = {"counter": {"allow_msg_counter": True}, "batch": {"allow_atomic": True}}


# other names a scenario answers to (`--scenario publish`: what every client, driven ones too, runs)
ALIASES = {"publish": "publish-async"}
register_choices("scenario", lambda: [*SCENARIOS, *ALIASES])  # --scenario's choices, in the option table


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[ALIASES.get(name, name)]
    except KeyError:
        raise ConfigError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


@dataclass
class LoadSettings:
    """What every load process needs to know; travels as Locust custom options (also to remote workers)."""

    scenario: str
    server_url: str
    run_id: str
    prefix: str
    out_dir: str
    rate: float = 0.0  # total target ops/s over all publishing users; 0 = closed loop, as fast as possible
    users: int = 1  # total users (all processes)
    consumers: int = 1  # consuming users in scenarios that have both roles
    payload_size: int = 128
    max_inflight: int = 1000  # per user
    prefill: int = 50_000  # messages put in the stream before consume-only scenarios
    replicas: int = 1  # of the run's stream or bucket (a clustered target: up to its size)
    fetch_batch: int = 500
    keyspace: int = 1000  # KV keys per user
    report_interval: float = 0.5  # seconds between Locust request events (one per op kind per interval)
    monitor_url: str = ""
    cleanup: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> Scenario:
        return scenario(self.scenario)

    @property
    def mode(self) -> str:
        return "open" if self.rate > 0 else "closed"

    @property
    def publishers(self) -> int:
        spec = self.spec
        if not spec.publisher:
            return 0
        return max(1, self.users - self.consumers) if spec.consumer else self.users

    @property
    def rate_per_publisher(self) -> float:
        return self.rate / self.publishers if self.rate > 0 and self.publishers else 0.0

    @property
    def stream(self) -> str:
        if self.spec.publisher == "kv":
            return "KV_" + self.kv_bucket
        return f"{self.prefix}_LOAD_{self.scenario.upper().replace('-', '_')}"

    @property
    def kv_bucket(self) -> str:
        return f"{self.prefix}_LOAD_KV"

    @property
    def durable(self) -> str:
        return f"{self.prefix}_LOAD_PULL"

    @property
    def subject_root(self) -> str:
        return f"{self.prefix.lower()}.load"

    def subject(self, pid: int, user: int) -> str:
        return f"{self.subject_root}.{pid}.{user}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def setup(settings: LoadSettings, nc) -> None:
    """Create the scenario's stream (or bucket) and consumer, and prefill it; idempotent."""
    from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

    js = nc.jetstream()
    spec = settings.spec
    if spec.publisher == "kv":
        from nats.js.api import KeyValueConfig

        await js.create_key_value(
            KeyValueConfig(bucket=settings.kv_bucket, history=1, storage=StorageType.FILE, replicas=settings.replicas)
        )
        return
    await js.add_stream(
        StreamConfig(
            name=settings.stream,
            subjects=[settings.subject_root + ".>"],
            storage=StorageType.FILE,
            num_replicas=settings.replicas,
            metadata=run_marker(settings.run_id, connected_version(nc)) or None,
            **STREAM_OPTIONS.get(spec.publisher, {}),
        )
    )
    if spec.consumer == "pull":
        await js.add_consumer(
            settings.stream,
            ConsumerConfig(
                durable_name=settings.durable,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=60,
                max_ack_pending=max(10_000, settings.fetch_batch * settings.users * 4),
            ),
        )
    if spec.prefill and settings.prefill > 0:
        await prefill(js, settings)


async def prefill(js, settings: LoadSettings) -> None:
    """Fill the stream up to `settings.prefill` messages with pipelined publishes, then check the count."""
    have = (await js.stream_info(settings.stream)).state.messages
    payload = b"x" * settings.payload_size
    subject = settings.subject(0, 0)
    for _ in range(settings.prefill - have):
        await js.publish_async(subject, payload)
    await asyncio.wait_for(js.publish_async_completed(), 60)
    stored = (await js.stream_info(settings.stream)).state.messages
    if stored < settings.prefill:
        raise RuntimeError(f"prefill stored {stored} of {settings.prefill} messages")


async def server_counts(settings: LoadSettings, nc) -> dict[str, Any]:
    """What the server holds for this run: stream state and, for pull scenarios, the consumer's progress."""
    js = nc.jetstream()
    counts: dict[str, Any] = {}
    state = (await js.stream_info(settings.stream)).state
    counts["stream"] = {
        "name": settings.stream,
        "messages": state.messages,
        "first_seq": state.first_seq,
        "last_seq": state.last_seq,
        "bytes": state.bytes,
    }
    if settings.spec.consumer == "pull":
        info = await js.consumer_info(settings.stream, settings.durable)
        counts["consumer"] = {
            "name": settings.durable,
            "delivered": info.delivered.consumer_seq,
            "delivered_stream_seq": info.delivered.stream_seq,
            "ack_floor": info.ack_floor.consumer_seq,
            "num_ack_pending": info.num_ack_pending,
            "num_redelivered": info.num_redelivered,
            "num_pending": info.num_pending,
        }
    if settings.spec.prefill:
        counts["prefill"] = settings.prefill
    if settings.spec.publisher == "counter":
        counts["counter"] = await counter_totals(js, settings.stream)
    return counts


async def counter_totals(js, stream: str) -> dict[str, int]:
    """A counter stream's subjects and the sum of their totals: each subject's last message carries its counter's
    value as ``{"val": "<total>"}`` (ADR-49)."""
    import json

    subjects = (await js.stream_info(stream, subjects_filter=">")).state.subjects or {}
    total = 0
    for subject in subjects:
        total += int(json.loads((await js.get_last_msg(stream, subject)).data)["val"])
    return {"subjects": len(subjects), "total": total}


async def teardown(settings: LoadSettings, nc) -> list[str]:
    """Delete what this run created, and nothing else; returns the names deleted."""
    from nats.js.errors import NotFoundError

    js = nc.jetstream()
    deleted = []
    try:
        if settings.spec.publisher == "kv":
            await js.delete_key_value(settings.kv_bucket)
        else:
            await js.delete_stream(settings.stream)
        deleted.append(settings.stream)
    except NotFoundError:
        pass
    return deleted
