package io.jetcheck.jnats;

import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.JetStreamApiException;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.Message;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;
import io.nats.client.impl.NatsMessage;
import io.nats.client.support.JsonValue;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

/**
 * Load (../PROTOCOL.md "Load"): an open- or closed-loop publisher of JetStream.publishAsync, scheduled, sent and
 * acknowledged here; jetcheck only starts and stops a run and receives every operation's times in batches.
 */
final class Load {
    static final List<String> OPS = List.of("load_publish", "load_consume", "load_stop");
    static final long NEVER = Long.MAX_VALUE;
    static final long DRAIN_NS = 10_000_000_000L;
    static final String OVERFLOW = "Overflow";
    static final String UNACKED = "Unacknowledged";
    private final Main d;
    private final Map<String, Stoppable> runs = new ConcurrentHashMap<>();

    /** A publish or consume run: load_stop stops it, waits for its last rows and answers its counts. */
    interface Stoppable {
        Map<String, Object> finish(long at) throws Exception;
    }

    Load(Main d) {
        this.d = d;
    }

    /** The op log's clock: wall-clock ns, as Python's time.time_ns() on this machine. */
    static long wallNs() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    Object handle(String op, JsonValue req) throws Exception {
        switch (op) {
            case "load_publish":
                return publish(req);
            case "load_consume": {
                LoadConsume run = new LoadConsume(d, d.session(req), req);
                if (runs.putIfAbsent(run.sub, run) != null) {
                    throw new Failure("invalid", "load sub \"" + run.sub + "\" exists");
                }
                return Map.of("started_ns", run.start());
            }
            case "load_stop": {
                Stoppable run = runs.remove(Json.str(req, "sub"));
                if (run == null) {
                    throw new Failure("invalid", "no load sub \"" + Json.str(req, "sub") + "\"");
                }
                long at = wallNs();
                Long asked = Json.lng(req, "at_ns");
                if (asked != null && asked < at) {
                    at = asked;
                }
                return run.finish(at);
            }
            default:
                throw new Failure("unsupported", "op \"" + op + "\" is not implemented by the jnats driver "
                        + "(its load runs async publishes and pull consumers)");
        }
    }

    /** A run's rows (six int64s per publish) and error classes until the next flush. */
    final class Run implements Stoppable {
        final String sub;
        final String subject;
        final double rate;
        final int maxInflight;
        final boolean stamp;
        final byte[] payload;
        final Session session;
        final Connection nc;
        final JetStream js;
        final Semaphore window;
        // The publishes in flight: slot key % ring length, or `stragglers` when an older one still holds the slot (at
        // most max_inflight are in flight, the ring has room for four times that). A map alone costs a contended
        // counter update per publish and per ack.
        final AtomicReferenceArray<Pending> ring;
        final Map<Long, Pending> stragglers = new ConcurrentHashMap<>();
        volatile long stopAt = NEVER;
        final CountDownLatch scheduled = new CountDownLatch(1);
        private long seq;
        private long next; // key of the next pending publish
        final RowLog log;
        // guarded by this
        private long ops;
        private long acked;
        private long overflow;
        private long failed;
        private ScheduledFuture<?> flusher;

        Run(Session session, JsonValue req) throws Exception {
            this.session = session;
            // The run's own connection, as the session's but without jnats' default flush after every request
            // (forceFlushOnRequest, "the original b/w compatible way"): one socket write per publish otherwise.
            nc = Nats.connect(new Options.Builder(session.options).dontForceFlushOnRequest().build());
            js = nc.jetStream(session.jso);
            sub = Json.str(req, "sub");
            subject = Json.str(req, "subject");
            Double r = Json.dbl(req, "rate");
            rate = r == null ? 0 : r;
            Long mi = Json.lng(req, "max_inflight");
            maxInflight = mi == null ? 0 : mi.intValue();
            stamp = Json.bool(req, "stamp");
            Long size = Json.lng(req, "payload_size");
            payload = new byte[size == null ? 0 : size.intValue()];
            Arrays.fill(payload, (byte) 'x');
            window = new Semaphore(Math.max(1, maxInflight));
            ring = new AtomicReferenceArray<>(Integer.highestOneBit(Math.max(1, maxInflight) * 4 - 1) << 1);
            log = new RowLog(d, sub, null);
        }

        final class Pending {
            final long intended;
            final long sent;
            final AtomicBoolean logged = new AtomicBoolean();

            Pending(long intended, long sent) {
                this.intended = intended;
                this.sent = sent;
            }
        }

        void start(double batchMs) {
            long every = (long) ((batchMs > 0 ? batchMs : 50) * 1_000_000);
            flusher = d.timers.scheduleAtFixedRate(log::flush, every, every, TimeUnit.NANOSECONDS);
            long started = wallNs();
            Thread t = new Thread(() -> schedule(started), "load-" + sub);
            t.setDaemon(true);
            t.start();
            this.startedNs = started;
        }

        long startedNs;

        private void schedule(long started) {
            try {
                if (rate <= 0) {
                    // Parked with the window full, the scheduler wakes once `refill` publishes were acknowledged,
                    // not at every ack: a thread handoff per publish costs more CPU than the publish itself.
                    int refill = Math.max(1, Math.min(64, maxInflight / 16));
                    while (true) {
                        if (!window.tryAcquire()) {
                            window.acquireUninterruptibly(refill);
                            window.release(refill - 1);
                        }
                        long now = wallNs();
                        if (now >= stopAt) {
                            window.release();
                            return;
                        }
                        send(now);
                    }
                }
                double interval = 1e9 / rate;
                for (long index = 0; ; ) {
                    long now = wallNs();
                    while (true) {
                        long intended = started + (long) (index * interval);
                        if (intended > now) {
                            break;
                        }
                        if (intended >= stopAt) {
                            return;
                        }
                        if (window.tryAcquire()) {
                            send(intended);
                        } else { // max_inflight outstanding: this one is not sent, and says so
                            record(intended, now, now, 0, OVERFLOW, 0);
                        }
                        index++;
                    }
                    long nextAt = started + (long) (index * interval);
                    if (nextAt >= stopAt) {
                        return;
                    }
                    long wait = nextAt - wallNs();
                    if (wait > 0) {
                        LockSupport.parkNanos(wait);
                    }
                }
            } finally {
                scheduled.countDown();
            }
        }

        private void send(long intended) {
            long sent = wallNs();
            Headers headers = null;
            if (stamp) {
                seq++;
                headers = new Headers().put("Jc-Ts", Long.toString(sent)).put("Jc-Seq", Long.toString(seq));
            }
            Message msg = NatsMessage.builder().subject(subject).headers(headers).data(payload).build();
            Pending p = new Pending(intended, sent);
            long key = next++;
            if (!ring.compareAndSet(slot(key), null, p)) {
                stragglers.put(key, p);
            }
            CompletableFuture<PublishAck> future;
            try {
                future = js.publishAsync(msg);
            } catch (RuntimeException e) {
                done(key, p, null, e);
                return;
            }
            future.whenComplete((ack, err) -> done(key, p, ack, err));
        }

        private int slot(long key) {
            return (int) (key & (ring.length() - 1));
        }

        private void done(long key, Pending p, PublishAck ack, Throwable err) {
            if (!p.logged.compareAndSet(false, true)) {
                return; // given up as unacknowledged already
            }
            if (!ring.compareAndSet(slot(key), p, null)) {
                stragglers.remove(key);
            }
            long acked = wallNs();
            if (err == null && ack != null && !ack.hasError()) {
                record(p.intended, p.sent, acked, ack.getSeqno(), "", 0);
            } else {
                Throwable cause = err instanceof java.util.concurrent.CompletionException && err.getCause() != null
                        ? err.getCause() : err;
                String cls = cause == null ? "PublishAck" : cause.getClass().getSimpleName();
                record(p.intended, p.sent, acked, 0, cls, cause instanceof JetStreamApiException api ? api.getApiErrorCode() : 0);
            }
            // after its row: load_stop takes the whole window back as "every publish is logged"
            window.release();
        }

        synchronized void record(long intended, long sent, long acked, long streamSeq, String cls, long code) {
            ops++;
            switch (cls) {
                case "" -> this.acked++;
                case OVERFLOW -> overflow++;
                default -> failed++;
            }
            log.addPublish(intended, sent, acked, streamSeq, cls, code);
        }

        @Override
        public Map<String, Object> finish(long at) throws InterruptedException {
            if (at < stopAt) {
                stopAt = at;
            }
            scheduled.await();
            // The schedule has ended: the whole window back means every publish was acknowledged or failed.
            int permits = Math.max(1, maxInflight);
            if (window.tryAcquire(permits, DRAIN_NS, TimeUnit.NANOSECONDS)) {
                window.release(permits);
            }
            List<Pending> unacked = new ArrayList<>(stragglers.values());
            for (int i = 0; i < ring.length(); i++) {
                Pending p = ring.get(i);
                if (p != null) {
                    unacked.add(p);
                }
            }
            for (Pending p : unacked) {
                if (p.logged.compareAndSet(false, true)) {
                    record(p.intended, p.sent, wallNs(), 0, UNACKED, 0);
                }
            }
            flusher.cancel(false);
            log.flush();
            nc.close();
            synchronized (this) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("ops", ops);
                m.put("acked", acked);
                m.put("overflow", overflow);
                m.put("failed", failed);
                return m;
            }
        }
    }

    private Object publish(JsonValue req) throws Exception {
        Session s = d.session(req);
        Run run = new Run(s, req);
        Failure refused = null;
        if (run.sub.isEmpty() || run.subject.isEmpty() || run.maxInflight < 1 || run.rate < 0) {
            refused = new Failure("invalid", "load_publish needs sub, subject, max_inflight >= 1, rate >= 0, payload_size >= 0");
        } else if (runs.putIfAbsent(run.sub, run) != null) {
            refused = new Failure("invalid", "load sub \"" + run.sub + "\" exists");
        }
        if (refused != null) {
            run.nc.close();
            throw refused;
        }
        Double batchMs = Json.dbl(req, "batch_ms");
        run.start(batchMs == null ? 50 : batchMs);
        return Map.of("started_ns", run.startedNs);
    }
}
