package io.jetcheck.jnats;

import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.impl.NatsJetStreamMetaData;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** One continuous consumption (ordered, push, pull consume) or watch, and its bookkeeping. Guarded by itself. */
final class Sub {
    final Main d;
    final String id;
    final String session;
    final boolean ordered;

    boolean stopped; // stop was asked, or the client ended it: nothing more is streamed
    String consumer = ""; // the consumer of the last delivery or name seen
    boolean reset; // a reset event was streamed
    private Runnable stopper; // ends the client's consumption or watcher
    private boolean consuming; // a consumption (not a watch) runs: the chatty misbehaviour talks about these
    private ScheduledFuture<?> poll;

    Sub(Main d, String id, String session, boolean ordered) {
        this.d = d;
        this.id = id;
        this.session = session;
        this.ordered = ordered;
    }

    synchronized boolean running() {
        return consuming && !stopped;
    }

    synchronized boolean owns(JetStreamSubscription jsSub, String consumerName) {
        return consumerName.equals(consumer);
    }

    /**
     * The client's consumption started: `stopper` ends it; `name` is polled for the ordered consumer's current
     * consumer (jnats has no reset notification: a recreated consumer shows only as a new name) and `finished` for
     * the client ending it by itself.
     */
    void started(Runnable stopper, boolean consumption, Supplier<String> name, BooleanSupplier finished) {
        boolean already;
        synchronized (this) {
            this.stopper = stopper;
            this.consuming = consumption;
            already = stopped;
        }
        if (already) { // stopped while the client was still setting up
            stopper.run();
            return;
        }
        if (name != null || finished != null) {
            poll = d.timers.scheduleWithFixedDelay(() -> watch(name, finished), 50, 50, TimeUnit.MILLISECONDS);
        }
    }

    private void watch(Supplier<String> name, BooleanSupplier finished) {
        if (name != null) {
            String current = name.get();
            synchronized (this) {
                noteConsumer(current);
            }
        }
        if (finished != null && finished.getAsBoolean()) {
            boolean ended;
            synchronized (this) {
                ended = !stopped;
            }
            if (ended) {
                d.event(session, id, "terminal", "the client finished the consumption by itself (MessageConsumer.isFinished())");
                stop();
                d.forget(this);
            }
        }
    }

    /** Streams a `reset` event the first time a new consumer name shows up for an ordered sub. Holds the lock. */
    void noteConsumer(String name) {
        if (name == null || name.isEmpty() || name.equals(consumer)) {
            return;
        }
        String previous = consumer;
        consumer = name;
        if (previous.isEmpty() || !ordered || stopped) {
            return;
        }
        reset = true;
        d.writeEvent(session, id, "reset", "ordered consumer recreated: " + name + " replaced " + previous);
    }

    void deliver(Message msg) {
        Map<String, Object> record;
        try {
            record = delivery(msg);
        } catch (RuntimeException e) {
            d.event(session, id, "error", "delivery without JetStream metadata: " + Failure.describe(e));
            return;
        }
        synchronized (this) {
            if (stopped) {
                return;
            }
            noteConsumer((String) record.get("consumer"));
            if (reset && d.mode("drop-deliveries-after-reset")) {
                return;
            }
            Map<String, Object> streamed = new LinkedHashMap<>();
            streamed.put("type", "delivery");
            streamed.put("sub", id);
            streamed.putAll(record);
            d.out.write(streamed);
            if (d.mode("duplicate-delivery")) {
                d.out.write(streamed);
            }
        }
    }

    static Map<String, Object> delivery(Message msg) {
        NatsJetStreamMetaData meta = msg.metaData();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("stream_seq", meta.streamSequence());
        m.put("consumer_seq", meta.consumerSequence());
        m.put("subject", msg.getSubject());
        m.put("payload_b64", Base64.getEncoder().encodeToString(msg.getData() == null ? new byte[0] : msg.getData()));
        m.put("consumer", meta.getConsumer());
        m.put("at_ns", Main.monoNs());
        return m;
    }

    /** The client's heartbeatAlarm for this consumption. */
    void missedHeartbeat(String detail) {
        d.event(session, id, "missed-heartbeat", detail);
        if (d.mode("terminal-on-missed-heartbeat") && running()) {
            d.event(session, id, "terminal", "misbehave terminal-on-missed-heartbeat: consumption stopped");
            d.pool.execute(this::stop); // not on the client's own thread, which its stop may wait for
        }
    }

    /** Ends the consumption or watch; after it returns nothing more is streamed for this sub. */
    void stop() {
        Runnable s;
        synchronized (this) {
            stopped = true;
            s = stopper;
            stopper = null;
        }
        if (poll != null) {
            poll.cancel(false);
        }
        if (s != null) {
            try {
                s.run();
            } catch (RuntimeException e) {
                Log.log("sub " + id + ": stopping: " + Failure.describe(e));
            }
        }
    }
}
