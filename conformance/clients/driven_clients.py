"""The clients jetcheck drives through a driver process (drivers/PROTOCOL.md): what each documents, how each runs.

`--client nats.js` certifies @nats-io/jetstream at the version drivers/js/package-lock.json pins, `nats.js@3.1.0`
another release; `nats.go` / `nats.go@v1.48.0` likewise for github.com/nats-io/nats.go/jetstream, `async-nats` /
`async-nats@0.42.0` for the Rust crate async-nats, `jnats` / `jnats@2.21.1` for io.nats:jnats (drivers/java/pom.xml
pins it). `+<mode>` makes
the driver misreport in that way (a deliberate deviation for the suite's own proofs; results carry the suffix).
"""

from __future__ import annotations

import atexit
import re
import threading

from jetcheck.errors import ConfigError

from .base import ADR17_ORDERED_PULL_CONFIG, Documented
from .build import (
    go_driver,
    go_pinned_version,
    java_driver,
    java_pinned_version,
    js_driver,
    js_pinned_version,
    rust_driver,
    rust_pinned_version,
)
from .driver_adapter import DriverAdapter

NS = 1_000_000_000

# drivers/PROTOCOL.md, `misbehave`: every driver implements all of them
MISBEHAVE_MODES = (
    "swallow-missed-heartbeat",
    "chatty-missed-heartbeat",
    "terminal-on-missed-heartbeat",
    "duplicate-delivery",
    "drop-deliveries-after-reset",
    "watch-no-end-of-data",
    "watch-drop-first",
    "bind-any-queue",
    "kv-ttl-ignored",  # KV: limit markers, per-key and purge TTLs not passed to the client (ADR-48)
    "kv-markers-as-values",  # KV: delete, purge and limit markers handed over as values
    "kv-keys-unfiltered",  # KV: keys(filters) lists without its filters
    "kv-buckets-misreport",  # KV: delete bucket does nothing; bucket names as their streams' (KV_<b>)
    "kv-watch-meta-ignored",  # KV: a watch asked for meta_only is made without it (values are sent)
    "kv-prefix-ignored",  # KV: a put goes to $KV.<bucket>.<key> whatever the API prefix (ADR-19)
    "ttl-dropped",  # features: a TTL publish sends no TTL
    "resume-ignored",  # features: a resume asks nothing
    "pin-forgotten",  # features: every group pull on a fresh consumer handle, so no pin id
    "min-pending-dropped",  # features: a group pull without its min_pending
    "seal-ignored",
    "status-misreport",
    "consumer-actions-rotated",
    "publish-no-retry",
)

JS_DOCUMENTED = Documented(
    of_release=js_pinned_version(),  # read from that release's docs and source; older releases are held to them
    # ordered consumers consume() with its defaults: expires 30 s, idle_heartbeat half of it
    ordered_idle_heartbeat_s=15.0,
    missed_heartbeats="a ConsumerEvents.HeartbeatsMissed status (data: the count missed) from consume()'s status() "
    "iterator once 2 heartbeats are missed",
    heartbeat_behaviour="consumption goes on; the application may stop() and recreate it (the client's README)",
    min_idle_heartbeat_s=0.5,
    below_min_heartbeat="raised",  # consume() clamps idle_heartbeat to 500-30000 ms without a word
    ordered_kind="pull",
    # jetstream lib/jsmstream_api.js ordered() creates it so; consumer.js getConsumerOpts() recreates it from the
    # first one's config with name, start, ack policy, inactive threshold (5 min) and replicas set again.
    ordered_config={**ADR17_ORDERED_PULL_CONFIG, "inactive_threshold": 300 * NS},
    consumes="pull",  # consume() on a pull consumer (push consumers: getPushConsumer(), bound to existing ones)
    # @nats-io/obj lib/types.d.ts: watch(opts?: Partial<{ignoreDeletes?: boolean; includeHistory?: boolean}>)
    object_watch_updates_only=False,
    sources={
        "ordered_idle_heartbeat_s": "@nats-io/jetstream lib/consumer.ts: consume() defaults expires to 30 s and "
        "idle_heartbeat to half of it",
        "missed_heartbeats": "@nats-io/jetstream lib/types.ts ConsumerEvents.HeartbeatsMissed ('data is the number "
        "of missed heartbeats'), README 'Processing messages' (status())",
        "heartbeat_behaviour": "@nats-io/jetstream README: heartbeats missed are notified; consume() goes on",
        "min_idle_heartbeat_s": "@nats-io/jetstream lib/consumer.ts: idle_heartbeat clamped to 500-30000 ms",
        "below_min_heartbeat": "@nats-io/jetstream lib/consumer.ts: a smaller idle_heartbeat is raised to 500 ms",
        "missed_heartbeats_after": "@nats-io/jetstream lib/consumer.ts: HeartbeatsMissed after 2 intervals",
        "ordered_kind": "@nats-io/jetstream lib/jsmstream_api.js ordered(): ordered consumers are pull consumers",
        "ordered_config": "@nats-io/jetstream lib/consumer.js getConsumerOpts(): ack none, max_deliver 1, "
        "mem_storage, num_replicas 1, inactive_threshold 5 min, no durable",
        "consumes": "@nats-io/jetstream README: consume() on a pull consumer",
        "object_watch_updates_only": "@nats-io/obj lib/types.ts ObjectStore.watch(opts: ignoreDeletes, "
        "includeHistory): no updates-only",
    },
)

GO_DOCUMENTED = Documented(
    of_release=go_pinned_version().removeprefix("v"),
    # jetstream/pull.go: an ordered consumer's default heartbeat is 5 s (its default expiry is 30 s)
    ordered_idle_heartbeat_s=5.0,
    missed_heartbeats="jetstream.ErrNoHeartbeat, passed to the ConsumeErrHandler of Consume() or returned by "
    "MessagesContext.Next(), once at least 2 heartbeats are missed",
    heartbeat_behaviour="Consume() re-issues its pull request and goes on; Fetch() returns ErrNoHeartbeat",
    min_idle_heartbeat_s=0.5,
    below_min_heartbeat="refused",  # PullHeartbeat: an error below 500 ms (FetchHeartbeat has no minimum)
    ordered_kind="pull",
    # jetstream/ordered.go getConsumerConfig(): no MaxDeliver, so the server's -1; InactiveThreshold 5 min unless
    # given. ADR-17's max_deliver 1 is for ordered push subscriptions, which nats.go's jetstream package has none of.
    ordered_config={**ADR17_ORDERED_PULL_CONFIG, "max_deliver": -1, "inactive_threshold": 300 * NS},
    consumes="pull",  # Consume()/Messages() on a pull consumer
    sources={
        "ordered_idle_heartbeat_s": "jetstream/pull.go: unordered and ordered Consume() default to a 5 s heartbeat "
        "(30 s expiry)",
        "missed_heartbeats": "jetstream/jetstream.go ErrNoHeartbeat ('no heartbeat received'); pull.go "
        "ConsumeErrHandler, MessagesContext.Next()",
        "heartbeat_behaviour": "jetstream/pull.go: Consume() resets its pull request on ErrNoHeartbeat; Fetch() "
        "returns it",
        "min_idle_heartbeat_s": "jetstream/pull.go PullHeartbeat: 'idle heartbeat has to be greater than 500ms'",
        "below_min_heartbeat": "jetstream/pull.go PullHeartbeat: an error below 500 ms",
        "missed_heartbeats_after": "jetstream/pull.go: ErrNoHeartbeat after 2 idle heartbeat intervals",
        "ordered_kind": "jetstream/ordered.go orderedConsumer: a pull consumer (CreateOrUpdateConsumer)",
        "ordered_config": "jetstream/ordered.go getConsumerConfig: AckNonePolicy, InactiveThreshold 5 min, Replicas "
        "1, MemoryStorage, no Durable, no MaxDeliver",
        "consumes": "jetstream/pull.go Consume()/Messages() on a pull consumer",
        "object_watch_updates_only": "jetstream/object.go ObjectStore.Watch(ctx, ...WatchOpt): UpdatesOnly() is one "
        "of its options",
    },
)

# async-nats 0.51.0, read from its source (src/ paths below are the crate's).
RUST_DOCUMENTED = Documented(
    of_release=rust_pinned_version(),
    # pull.rs ordered_batch_config(): DEFAULT_IDLE_HEARTBEAT 15 s, at most half the 30 s DEFAULT_EXPIRES
    ordered_idle_heartbeat_s=15.0,
    # Consumer::stream() and push Consumer::messages() yield an Err of kind MissingHeartbeat after 2 intervals
    # (consumer/mod.rs poll_missed_heartbeat sleeps idle_heartbeat * 2); the ordered pull consumer keeps them to
    # itself: on the second in a row it recreates its consumer (pull.rs Ordered::poll_next).
    missed_heartbeats="an Err of kind MessagesErrorKind::MissingHeartbeat from the consumer's message stream "
    "(pull Consumer::stream(), push Consumer::messages()) once 2 heartbeat intervals pass without one",
    heartbeat_behaviour="the pull stream issues a new pull request and goes on; the ordered consumer recreates its "
    "consumer after two in a row without telling the application; a fetch (Batch) ignores heartbeats",
    # StreamBuilder::heartbeat and BatchBuilder::heartbeat take any Duration: no bound of the client's own
    min_idle_heartbeat_s=0.0,
    below_min_heartbeat="",
    ordered_kind="pull",
    # pull.rs From<OrderedConfig> for Config / IntoConsumerConfig: ack none, max_deliver 1, inactive_threshold 30 s,
    # num_replicas 1, memory storage, no durable name
    ordered_config={**ADR17_ORDERED_PULL_CONFIG, "inactive_threshold": 30 * NS},
    consumes="pull",
    # object_store/mod.rs: watch() (DeliverPolicy::New, only later changes) and watch_with_history()
    object_watch_updates_only=True,
    sources={
        "ordered_idle_heartbeat_s": "async-nats src/jetstream/consumer/pull.rs ordered_batch_config(): "
        "DEFAULT_IDLE_HEARTBEAT (15 s) clamped to half of DEFAULT_EXPIRES (30 s)",
        "missed_heartbeats": "async-nats src/jetstream/consumer/pull.rs MessagesErrorKind::MissingHeartbeat "
        "('missed idle heartbeat'); consumer/push.rs Messages::poll_next; consumer/mod.rs poll_missed_heartbeat",
        "heartbeat_behaviour": "async-nats src/jetstream/consumer/pull.rs Ordered::poll_next (recreate on the second "
        "missed heartbeat), Batch::poll_next (IDLE_HEARTBEAT skipped)",
        "min_idle_heartbeat_s": "async-nats src/jetstream/consumer/pull.rs StreamBuilder::heartbeat(Duration), "
        "BatchBuilder::heartbeat(Duration): no lower bound (the server validates heartbeat against expires)",
        "below_min_heartbeat": "async-nats src/jetstream/consumer/pull.rs: no minimum, so nothing is raised or refused",
        "missed_heartbeats_after": "async-nats src/jetstream/consumer/mod.rs poll_missed_heartbeat: "
        "idle_heartbeat.saturating_mul(2)",
        "ordered_kind": "async-nats src/jetstream/consumer/pull.rs OrderedConfig: a pull consumer (Stream::messages)",
        "ordered_config": "async-nats src/jetstream/consumer/pull.rs IntoConsumerConfig for OrderedConfig: "
        "AckPolicy::None, max_deliver 1, inactive_threshold 30 s, num_replicas 1, memory_storage, no durable_name",
        "consumes": "async-nats src/jetstream/consumer/pull.rs Consumer::stream()/messages() on a pull consumer",
        "object_watch_updates_only": "async-nats src/jetstream/object_store/mod.rs ObjectStore::watch(): "
        "DeliverPolicy::New",
    },
)

# Read from the io.nats:jnats 2.26.2 sources jar (Maven Central, io/nats/jnats/2.26.2/jnats-2.26.2-sources.jar).
# jnats has no idle heartbeat option for pull consumption: BaseConsumeOptions derives it from the expiry, and the
# driver asks for a heartbeat h as an expiry of 2h (drivers/java Consumers.java).
JAVA_DOCUMENTED = Documented(
    # ConsumeOptions defaults: expiresIn 30 s, idleHeartbeat = min(30 s, expiresIn * 50 %)
    ordered_idle_heartbeat_s=15.0,
    missed_heartbeats="ErrorListener.heartbeatAlarm(conn, sub, lastStreamSequence, lastConsumerSequence) on the "
    "connection's error listener, once 3 idle heartbeat intervals passed without a message",
    heartbeat_behaviour="the pull consumption re-subscribes with a new pull and goes on (the ordered consumer "
    "recreates its consumer); a fetch ends",
    min_idle_heartbeat_s=0.5,
    below_min_heartbeat="refused",  # an expiry under 1 s (so a heartbeat under 500 ms) is an IllegalArgumentException
    missed_heartbeats_after=3,
    ordered_kind="pull",
    # SubscribeOptions (ordered): ack none, max_deliver 1, mem_storage, num_replicas 1, a generated name, no durable;
    # NatsMessageConsumer.doSub passes no inactive threshold (the server's default for an ephemeral applies).
    ordered_config=ADR17_ORDERED_PULL_CONFIG,
    consumes="pull",  # ConsumerContext.consume() on a pull consumer
    of_release=java_pinned_version(),
    sources={
        "ordered_idle_heartbeat_s": "io/nats/client/BaseConsumeOptions.java: DEFAULT_EXPIRES_IN_MILLIS 30000, "
        "idleHeartbeat = min(MAX_HEARTBEAT_MILLIS 30000, expiresIn * MAX_IDLE_HEARTBEAT_PERCENT 50 / 100)",
        "missed_heartbeats": "io/nats/client/ErrorListener.java heartbeatAlarm(); impl/MessageManager.java "
        "handleHeartbeatError()",
        "heartbeat_behaviour": "impl/PullMessageManager.java handleHeartbeatError() -> pullTerminatedByError(); "
        "impl/NatsMessageConsumer.java pullTerminatedByError() re-subscribes (doSub)",
        "min_idle_heartbeat_s": "io/nats/client/BaseConsumeOptions.java: MIN_EXPIRES_MILLS 1000, heartbeat half the "
        "expiry",
        "below_min_heartbeat": "io/nats/client/BaseConsumeOptions.java Builder.expiresIn: 'Expires must be greater "
        "than or equal to 1000' (IllegalArgumentException)",
        "missed_heartbeats_after": "io/nats/client/impl/MessageManager.java: THRESHOLD = 3, alarm period = idle "
        "heartbeat * THRESHOLD",
        "ordered_kind": "io/nats/client/impl/NatsConsumerContext.java: an ordered consumer subscribes with "
        "OrderedPullSubscribeOptionsBuilder (pull)",
        "ordered_config": "io/nats/client/SubscribeOptions.java (ordered): ackPolicy None, maxDeliver 1, "
        "memStorage true, numReplicas 1; durable not allowed",
        "consumes": "io/nats/client/BaseConsumerContext.java consume(): pull consumption",
        "object_watch_updates_only": "io/nats/client/api/ObjectStoreWatchOption.java: UPDATES_ONLY",
    },
)

DRIVEN = {
    "nats.js": (JS_DOCUMENTED, js_driver, js_pinned_version),
    "nats.go": (GO_DOCUMENTED, go_driver, go_pinned_version),
    "async-nats": (RUST_DOCUMENTED, rust_driver, rust_pinned_version),
    "jnats": (JAVA_DOCUMENTED, java_driver, java_pinned_version),
}
_VERSION = re.compile(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?")

_shared: dict[str, DriverAdapter] = {}
_shared_lock = threading.Lock()


def driven_adapter(client: str, version: str, modes: list[str]) -> DriverAdapter:
    """The run's one adapter (and so one driver process) for `client@version+mode+...`."""
    if version and not _VERSION.fullmatch(version):
        raise ConfigError(f"{client} version {version!r} is not of the form X.Y.Z")
    for mode in modes:
        if mode not in MISBEHAVE_MODES:
            raise ConfigError(f"unknown {client} driver mode {mode!r}; known: {', '.join(MISBEHAVE_MODES)}")
    documented, launch, pinned = DRIVEN[client]
    key = "+".join([f"{client}@{version}", *modes])
    with _shared_lock:
        if key not in _shared:
            adapter = DriverAdapter(
                client, documented, lambda: (launch(version), None), expected_version=version or pinned()
            )
            if modes:
                adapter.misbehave(modes)
            _shared[key] = adapter
        return _shared[key]


def prepare(client: str, version: str) -> None:
    """Build the driver for `client@version` now (certify's preflight): ConfigError says what is missing."""
    DRIVEN[client][1](version)


def shutdown_drivers() -> None:
    """Shut every driver this process started down (the run's end; also at exit)."""
    with _shared_lock:
        adapters = list(_shared.values())
        _shared.clear()
    for adapter in adapters:
        adapter.shutdown()


atexit.register(shutdown_drivers)
