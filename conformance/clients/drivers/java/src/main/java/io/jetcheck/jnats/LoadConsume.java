package io.jetcheck.jnats;

import io.nats.client.ConsumerContext;
import io.nats.client.FetchConsumeOptions;
import io.nats.client.FetchConsumer;
import io.nats.client.Message;
import io.nats.client.impl.NatsJetStreamMetaData;
import io.nats.client.support.JsonValue;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * load_consume (../PROTOCOL.md "Load"): fetches of up to `batch` messages from an existing durable pull consumer,
 * each message acked explicitly (ack(), not a double ack) as it arrives, until load_stop. jnats' shortest fetch
 * expiry is 1 s (BaseConsumeOptions.MIN_EXPIRES_MILLS).
 */
final class LoadConsume implements Load.Stoppable {
    static final long FETCH_EXPIRES_MS = 1000;
    static final int OP_MESSAGE = 0;
    static final int OP_FETCH = 1;
    final String sub;
    private final Main d;
    private final Session session;
    private final String stream;
    private final String durable;
    private final int batch;
    private final double batchMs;
    private final RowLog log;
    private final Numbered subjects = new Numbered(); // guarded by log
    private volatile long stopAt = Load.NEVER;
    private final CountDownLatch ended = new CountDownLatch(1);
    private ScheduledFuture<?> flusher;
    private long ops;
    private long fetches;
    private long failed;

    LoadConsume(Main d, Session session, JsonValue req) throws Failure {
        this.d = d;
        this.session = session;
        sub = Json.str(req, "sub");
        stream = Json.str(req, "stream");
        durable = Json.str(req, "durable");
        Long b = Json.lng(req, "batch");
        batch = b == null ? 0 : b.intValue();
        Double ms = Json.dbl(req, "batch_ms");
        batchMs = ms == null || ms <= 0 ? 50 : ms;
        if (sub.isEmpty() || stream.isEmpty() || durable.isEmpty() || batch < 1) {
            throw new Failure("invalid", "load_consume needs sub, stream, durable and batch >= 1");
        }
        log = new RowLog(d, sub, () -> Map.of("subjects", subjects.names()));
    }

    long start() throws Exception {
        ConsumerContext ctx = session.js.getConsumerContext(stream, durable);
        long started = Load.wallNs();
        long every = (long) (batchMs * 1_000_000);
        flusher = d.timers.scheduleAtFixedRate(log::flush, every, every, TimeUnit.NANOSECONDS);
        Thread t = new Thread(() -> run(ctx), "load-consume-" + sub);
        t.setDaemon(true);
        t.start();
        return started;
    }

    private long subjectNo(String subject) {
        synchronized (log) {
            return subjects.of(subject);
        }
    }

    private void run(ConsumerContext ctx) {
        try {
            FetchConsumeOptions fo = FetchConsumeOptions.builder().maxMessages(batch).expiresIn(FETCH_EXPIRES_MS).build();
            while (Load.wallNs() < stopAt) {
                long began = Load.wallNs();
                int got = 0;
                String failure = "";
                try (FetchConsumer fc = ctx.fetch(fo)) {
                    Message msg;
                    while ((msg = fc.nextMessage()) != null) {
                        long at = Load.wallNs();
                        got++;
                        message(msg, began, at);
                    }
                } catch (Exception e) {
                    failure = e.getClass().getSimpleName();
                }
                if (got == 0 && failure.isEmpty()) {
                    continue; // a fetch that expired empty is not an operation
                }
                synchronized (this) {
                    fetches++;
                    if (!failure.isEmpty()) {
                        failed++;
                    }
                }
                log.add(OP_FETCH, began, Load.wallNs(), 0, 0, -1, 0, got, log.errorNo(failure), 0);
            }
        } finally {
            ended.countDown();
        }
    }

    private void message(Message msg, long began, long at) {
        NatsJetStreamMetaData meta = msg.metaData();
        long e2e = -1;
        if (msg.getHeaders() != null) {
            String ts = msg.getHeaders().getFirst("Jc-Ts");
            if (ts != null) {
                try {
                    e2e = at - Long.parseLong(ts);
                } catch (NumberFormatException ignored) {
                    // not a stamp of ours
                }
            }
        }
        String failure = "";
        try {
            msg.ack();
        } catch (RuntimeException e) {
            failure = e.getClass().getSimpleName();
        }
        synchronized (this) {
            ops++;
            if (!failure.isEmpty()) {
                failed++;
            }
        }
        int size = msg.getData() == null ? 0 : msg.getData().length;
        log.add(OP_MESSAGE, began, at, meta.streamSequence(), meta.deliveredCount(), e2e, subjectNo(msg.getSubject()),
                size, log.errorNo(failure), 0);
    }

    @Override
    public Map<String, Object> finish(long at) throws Exception {
        if (at < stopAt) {
            stopAt = at;
        }
        if (!ended.await(FETCH_EXPIRES_MS + 10_000, TimeUnit.MILLISECONDS)) {
            Log.log("load sub " + sub + ": the fetch in progress did not end");
        }
        session.nc.flush(Duration.ofSeconds(10)); // the acks reach the server before the answer
        flusher.cancel(false);
        log.flush();
        synchronized (this) {
            return Map.of("ops", ops, "fetches", fetches, "failed", failed);
        }
    }
}
