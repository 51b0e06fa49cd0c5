package io.jetcheck.jnats;

import io.nats.client.ConsumerContext;
import io.nats.client.FetchConsumeOptions;
import io.nats.client.FetchConsumer;
import io.nats.client.JetStreamStatusCheckedException;
import io.nats.client.Message;
import io.nats.client.PublishOptions;
import io.nats.client.api.ApiResponse;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.ConsumerPauseResponse;
import io.nats.client.api.PublishAck;
import io.nats.client.support.JsonValue;
import java.lang.reflect.Field;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Server features of 2.11/2.12 (../PROTOCOL.md "Server features"), consumer_add and publish_retrying: per-message
 * TTL (PublishOptions.messageTtl), JetStreamManagement.pauseConsumer/resumeConsumer, priority group fetches on one
 * ConsumerContext per session, stream and consumer (the client keeps the pin id there), and
 * JetStreamManagement.createConsumer/updateConsumer/addOrUpdateConsumer.
 */
final class Features {
    static final List<String> OPS = List.of("js_publish", "js_pause", "js_resume", "js_group_fetch");
    private final Main d;
    private final Map<String, ConsumerContext> handles = new ConcurrentHashMap<>();

    Features(Main d) {
        this.d = d;
    }

    Object handle(String op, JsonValue req) throws Exception {
        Session s = d.session(req);
        switch (op) {
            case "js_publish": {
                PublishOptions.Builder po = PublishOptions.builder();
                Double ttl = Json.dbl(req, "ttl_s");
                if (ttl != null && !d.mode("ttl-dropped")) {
                    Adr48.messageTtl(po, ttl);
                }
                PublishAck ack = s.js.publish(Json.str(req, "subject"), Json.b64(req, "data_b64"), po.build());
                return Map.of("seq", ack.getSeqno(), "stream", ack.getStream());
            }
            case "js_pause": {
                ZonedDateTime until = ZonedDateTime.parse(Json.str(req, "until"));
                ConsumerPauseResponse r = s.jsm.pauseConsumer(Json.str(req, "stream"), Json.str(req, "consumer"), until);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("paused", r.isPaused());
                if (r.getPauseUntil() != null) {
                    m.put("pause_until", Kv.time(r.getPauseUntil()));
                }
                return m;
            }
            case "js_resume": {
                if (d.mode("resume-ignored")) {
                    return Map.of("paused", false);
                }
                // resumeConsumer answers "true if the resume succeeded": a resumed consumer is not paused
                boolean resumed = s.jsm.resumeConsumer(Json.str(req, "stream"), Json.str(req, "consumer"));
                return Map.of("paused", !resumed);
            }
            case "js_group_fetch":
                return groupFetch(s, req);
            default:
                throw new Failure("unsupported", "op \"" + op + "\" is not implemented by the jnats driver");
        }
    }

    private Object groupFetch(Session s, JsonValue req) throws Exception {
        String group = Json.str(req, "group");
        Long batch = Json.lng(req, "batch");
        Double expires = Json.dbl(req, "expires_s");
        if (group.isEmpty() || batch == null || batch <= 0 || expires == null || expires <= 0) {
            throw new Failure("invalid", "js_group_fetch needs group, batch and expires_s");
        }
        String stream = Json.str(req, "stream");
        String consumer = Json.str(req, "consumer");
        String key = s.id + "\u0000" + stream + "\u0000" + consumer;
        ConsumerContext ctx = handles.get(key);
        if (ctx == null || d.mode("pin-forgotten")) {
            ctx = s.js.getConsumerContext(stream, consumer);
            handles.put(key, ctx);
        }
        FetchConsumeOptions.Builder fo = FetchConsumeOptions.builder().maxMessages(batch.intValue())
                .expiresIn(Math.round(expires * 1000)).group(group);
        Long minPending = Json.lng(req, "min_pending");
        if (minPending != null && !d.mode("min-pending-dropped")) {
            fo.minPending(minPending);
        }
        List<Map<String, Object>> deliveries = new ArrayList<>();
        String ending = "";
        FetchConsumer pull;
        try {
            pull = ctx.fetch(fo.build());
        } catch (java.io.IOException e) {
            if (String.valueOf(e.getMessage()).startsWith("Pinned not allowed")) {
                // jnats keeps a pin id only inside one consume()/iterate() (PullMessageManager.currentPinId) and
                // refuses fetch and next on a pinned_client consumer (NatsConsumerContext.checkNotPinned)
                throw new Failure("unsupported", "jnats has no fetch from a pinned_client priority group: "
                        + Failure.describe(e) + " (NatsConsumerContext.checkNotPinned)");
            }
            throw e;
        }
        try (FetchConsumer fc = pull) {
            while (true) {
                Message msg = fc.nextMessage();
                if (msg == null) {
                    break;
                }
                String pin = msg.getHeaders() == null ? null : msg.getHeaders().getFirst("Nats-Pin-Id");
                deliveries.add(Map.of("stream_seq", msg.metaData().streamSequence(), "pin_id", pin == null ? "" : pin));
                msg.ack();
            }
        } catch (JetStreamStatusCheckedException e) {
            ending = Failure.describe(e);
        }
        if (ending.isEmpty() && deliveries.size() < batch) {
            ending = "FetchConsumer.nextMessage() returned null after " + deliveries.size() + " of " + batch + " messages";
        }
        return Map.of("deliveries", deliveries, "error", ending);
    }

    Object consumerAdd(JsonValue req) throws Exception {
        Session s = d.session(req);
        String stream = Json.str(req, "stream");
        JsonValue config = Json.get(req, "config");
        if (stream.isEmpty() || config == null) {
            throw new Failure("invalid", "consumer_add needs \"stream\", \"action\" and \"config\"");
        }
        ConsumerConfiguration cc = ConsumerConfiguration.builder().json(config.toJson()).build();
        String action = Json.str(req, "action");
        if (d.mode("consumer-actions-rotated")) { // misbehave: each call made with another of the client's calls
            action = switch (action) {
                case "create" -> "update";
                case "update", "create_or_update" -> "create";
                default -> action;
            };
        }
        ConsumerInfo info = switch (action) {
            case "create" -> s.jsm.createConsumer(stream, cc);
            case "update" -> s.jsm.updateConsumer(stream, cc);
            case "create_or_update" -> s.jsm.addOrUpdateConsumer(stream, cc);
            default -> throw new Failure("invalid", "consumer_add: unknown action \"" + Json.str(req, "action") + "\"");
        };
        return Map.of("info", new Json.Raw(responseJson(info)));
    }

    /** The ConsumerInfo JSON the client parsed (ApiResponse keeps it; jnats has no ConsumerInfo.toJson()). */
    static String responseJson(ApiResponse<?> response) throws ReflectiveOperationException {
        Field jv = ApiResponse.class.getDeclaredField("jv");
        jv.setAccessible(true);
        return ((JsonValue) jv.get(response)).toJson();
    }

    Object publishRetrying(JsonValue req) throws Failure {
        throw new Failure("unsupported", "jnats has no publish retry on no responders (ADR-22): JetStream.publish "
                + "and PublishOptions (stream, expectations, message id, TTL, timeout) make one request");
    }

}
