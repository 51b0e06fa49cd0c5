package io.jetcheck.jnats;

import io.nats.client.ConsumeOptions;
import io.nats.client.ConsumerContext;
import io.nats.client.Dispatcher;
import io.nats.client.FetchConsumeOptions;
import io.nats.client.FetchConsumer;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamStatusCheckedException;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.MessageConsumer;
import io.nats.client.MessageHandler;
import io.nats.client.OrderedConsumerContext;
import io.nats.client.PushSubscribeOptions;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.DeliverPolicy;
import io.nats.client.api.OrderedConsumerConfiguration;
import io.nats.client.support.JsonValue;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * ordered, push, consume and fetch (../PROTOCOL.md "Ops (v1)") over jnats' simplified consumers (StreamContext /
 * ConsumerContext) and, for push, JetStream.subscribe with PushSubscribeOptions (jnats' only push consumer API).
 *
 * jnats has no idle heartbeat option for pull consumption: BaseConsumeOptions derives it from the expiry (half of
 * it, at most 30 s). A request for a heartbeat h without an expiry is made as an expiry of 2h, the only way a jnats
 * application gets that heartbeat; the answer's effective_idle_heartbeat_s is what the client computed and sends.
 */
final class Consumers {
    private static final int CONSUMER_NOT_FOUND = 10014;
    private final Main d;

    Consumers(Main d) {
        this.d = d;
    }

    static Map<String, Object> heartbeat(long millis) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("effective_idle_heartbeat_s", millis > 0 ? millis / 1000.0 : null);
        return m;
    }

    static ConsumeOptions consumeOptions(Double heartbeatS, Double expiresS, Long maxMessages) {
        ConsumeOptions.Builder b = ConsumeOptions.builder();
        if (expiresS != null) {
            b.expiresIn(Math.round(expiresS * 1000));
        } else if (heartbeatS != null) {
            b.expiresIn(Math.round(heartbeatS * 2000));
        }
        if (maxMessages != null) {
            b.batchSize(maxMessages.intValue());
        }
        return b.build();
    }

    Object ordered(JsonValue req) throws Exception {
        Session s = d.session(req);
        OrderedConsumerConfiguration occ = new OrderedConsumerConfiguration();
        String subject = Json.str(req, "subject");
        if (!subject.isEmpty()) {
            occ.filterSubject(subject);
        }
        JsonValue start = Json.get(req, "start");
        if (start != null) {
            String policy = Json.str(start, "deliver_policy");
            occ.deliverPolicy(switch (policy) {
                case "all" -> DeliverPolicy.All;
                case "by_start_sequence" -> DeliverPolicy.ByStartSequence;
                case "by_start_time" -> DeliverPolicy.ByStartTime;
                case "last_per_subject" -> DeliverPolicy.LastPerSubject;
                default -> throw new Failure("invalid", "unknown deliver_policy \"" + policy + "\"");
            });
            Long seq = Json.lng(start, "seq");
            if (seq != null) {
                occ.startSequence(seq);
            }
            String time = Json.str(start, "time");
            if (!time.isEmpty()) {
                occ.startTime(ZonedDateTime.parse(time));
            }
        }
        if (Json.dbl(req, "inactive_threshold_s") != null) {
            throw new Failure("unsupported", "jnats' OrderedConsumerConfiguration has no inactive threshold (filter "
                    + "subjects, deliver policy, start sequence/time, replay policy, headers only, name prefix)");
        }
        ConsumeOptions co = consumeOptions(Json.dbl(req, "idle_heartbeat_s"), null, null);
        Sub sub = d.newSub(s.id, Json.str(req, "sub"), true);
        try {
            OrderedConsumerContext ctx = s.js.getStreamContext(Json.str(req, "stream")).createOrderedConsumer(occ);
            MessageConsumer mc = ctx.consume(co, sub::deliver);
            synchronized (sub) {
                sub.noteConsumer(mc.getConsumerName());
            }
            sub.started(mc::stop, true, mc::getConsumerName, mc::isFinished);
        } catch (Exception e) {
            d.forget(sub);
            throw e;
        }
        return heartbeat(co.getIdleHeartbeat());
    }

    Object push(JsonValue req) throws Exception {
        Session s = d.session(req);
        String stream = Json.str(req, "stream");
        String subject = Json.str(req, "subject");
        String durable = Json.str(req, "durable");
        String queue = Json.str(req, "queue");
        Double heartbeatS = Json.dbl(req, "idle_heartbeat_s");
        Double inactiveS = Json.dbl(req, "inactive_threshold_s");
        Sub sub = d.newSub(s.id, Json.str(req, "sub"), false);
        Dispatcher dispatcher = s.nc.createDispatcher();
        try {
            ConsumerInfo existing = null;
            if (!durable.isEmpty()) {
                try {
                    existing = s.jsm.getConsumerInfo(stream, durable);
                } catch (JetStreamApiException e) {
                    if (e.getApiErrorCode() != CONSUMER_NOT_FOUND) {
                        throw e;
                    }
                }
            }
            JetStreamSubscription jsSub;
            String filter = subject.isEmpty() ? null : subject;
            if (existing != null) {
                // bound as it is: a second member must not move its deliver subject. The queue is the one the
                // application names; the client checks it against the consumer's deliver_group.
                AckPolicy ackPolicy = existing.getConsumerConfiguration().getAckPolicy();
                String group = existing.getConsumerConfiguration().getDeliverGroup();
                String q = d.mode("bind-any-queue") ? group : (queue.isEmpty() ? null : queue);
                PushSubscribeOptions pso = PushSubscribeOptions.bind(stream, durable);
                MessageHandler handler = msg -> {
                    sub.deliver(msg);
                    if (ackPolicy != AckPolicy.None) {
                        msg.ack();
                    }
                };
                try {
                    jsSub = q == null ? s.js.subscribe(filter, dispatcher, handler, false, pso)
                            : s.js.subscribe(filter, q, dispatcher, handler, false, pso);
                } catch (IllegalArgumentException | IllegalStateException e) {
                    throw new Failure("invalid", Failure.describe(e)); // the client's own refusal
                }
            } else {
                ConsumerConfiguration.Builder cc = ConsumerConfiguration.builder().ackPolicy(AckPolicy.None);
                if (filter != null) {
                    cc.filterSubject(filter);
                }
                if (heartbeatS != null) {
                    cc.idleHeartbeat(Duration.ofNanos(Math.round(heartbeatS * 1e9)));
                }
                if (!durable.isEmpty()) {
                    cc.durable(durable);
                }
                if (!queue.isEmpty()) {
                    cc.deliverGroup(queue);
                }
                if (inactiveS != null) {
                    cc.inactiveThreshold(Duration.ofNanos(Math.round(inactiveS * 1e9)));
                }
                PushSubscribeOptions pso = PushSubscribeOptions.builder().stream(stream).configuration(cc.build()).build();
                jsSub = queue.isEmpty() ? s.js.subscribe(filter, dispatcher, sub::deliver, false, pso)
                        : s.js.subscribe(filter, queue, dispatcher, sub::deliver, false, pso);
            }
            ConsumerInfo info = jsSub.getConsumerInfo();
            synchronized (sub) {
                sub.noteConsumer(info.getName());
            }
            sub.started(() -> s.nc.closeDispatcher(dispatcher), true, null, null);
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("consumer", info.getName());
            Duration hb = info.getConsumerConfiguration().getIdleHeartbeat();
            // the client watches the consumer's own idle heartbeat (PushMessageManager: alarm after 3 intervals)
            result.put("effective_idle_heartbeat_s", hb == null || hb.isZero() ? null : hb.toNanos() / 1e9);
            return result;
        } catch (Exception e) {
            d.forget(sub);
            s.nc.closeDispatcher(dispatcher);
            throw e;
        }
    }

    Object consume(JsonValue req) throws Exception {
        Session s = d.session(req);
        ConsumeOptions co = consumeOptions(Json.dbl(req, "idle_heartbeat_s"), Json.dbl(req, "expires_s"),
                Json.lng(req, "max_messages"));
        String consumer = Json.str(req, "consumer");
        Sub sub = d.newSub(s.id, Json.str(req, "sub"), false);
        try {
            ConsumerContext ctx = s.js.getConsumerContext(Json.str(req, "stream"), consumer);
            synchronized (sub) {
                sub.consumer = consumer;
            }
            MessageConsumer mc = ctx.consume(co, msg -> {
                sub.deliver(msg);
                msg.ack();
            });
            sub.started(mc::stop, true, null, mc::isFinished);
        } catch (Exception e) {
            d.forget(sub);
            throw e;
        }
        return heartbeat(co.getIdleHeartbeat());
    }

    /** A fetch in progress: the client tells its missed heartbeat only to the connection's ErrorListener. */
    static final class FetchWatch {
        volatile String alarm;

        void alarm(String detail) {
            if (alarm == null) {
                alarm = detail;
            }
        }
    }

    Object fetch(JsonValue req) throws Exception {
        Session s = d.session(req);
        Long batch = Json.lng(req, "batch");
        Double expiresS = Json.dbl(req, "expires_s");
        if (batch == null || expiresS == null) {
            throw new Failure("invalid", "fetch needs batch and expires_s");
        }
        String consumer = Json.str(req, "consumer");
        ConsumerContext ctx = s.js.getConsumerContext(Json.str(req, "stream"), consumer);
        FetchConsumeOptions fo = FetchConsumeOptions.builder().maxMessages(batch.intValue())
                .expiresIn(Math.round(expiresS * 1000)).build();
        FetchWatch watch = new FetchWatch();
        s.fetches.put(consumer, watch);
        List<Map<String, Object>> deliveries = new ArrayList<>();
        int received = 0;
        Map<String, Object> ending = null;
        long began = System.nanoTime();
        try (FetchConsumer fc = ctx.fetch(fo)) {
            while (true) {
                Message msg = fc.nextMessage();
                if (msg == null) {
                    break;
                }
                received++;
                Map<String, Object> record = Sub.delivery(msg);
                deliveries.add(record);
                if (d.mode("duplicate-delivery")) {
                    deliveries.add(record);
                }
                msg.ack();
            }
        } catch (JetStreamStatusCheckedException e) {
            ending = Map.of("kind", "error", "detail", Failure.describe(e));
        } finally {
            s.fetches.remove(consumer, watch);
        }
        double took = (System.nanoTime() - began) / 1e9;
        if (watch.alarm != null) {
            if (!d.mode("swallow-missed-heartbeat")) {
                ending = Map.of("kind", "missed-heartbeat", "detail", watch.alarm);
            }
        } else if (ending == null && received < batch) {
            // the client ends an expired fetch with nextMessage() returning null, no error: that is its timeout
            ending = Map.of("kind", "timeout", "detail",
                    "FetchConsumer.nextMessage() returned null after " + received + " of " + batch + " messages");
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("deliveries", deliveries);
        result.put("error", ending);
        result.put("took_s", took);
        result.putAll(heartbeat(fo.getIdleHeartbeat()));
        return result;
    }
}
