package io.jetcheck.jnats;

import io.nats.client.JetStreamApiException;
import io.nats.client.KeyValue;
import io.nats.client.KeyValueManagement;
import io.nats.client.api.KeyValueConfiguration;
import io.nats.client.api.KeyValueEntry;
import io.nats.client.api.KeyValueOperation;
import io.nats.client.api.KeyValueStatus;
import io.nats.client.api.KeyValueWatchOption;
import io.nats.client.api.KeyValueWatcher;
import io.nats.client.api.MessageInfo;
import io.nats.client.impl.NatsKeyValueWatchSubscription;
import io.nats.client.support.JsonValue;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/** v2: KV (ADR-8, ADR-48) and v3: kv_watch over jnats' KeyValue and KeyValueManagement. */
final class Kv {
    static final List<String> OPS = List.of("kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get",
            "kv_delete", "kv_purge", "kv_keys", "kv_history", "kv_status", "kv_delete_bucket", "kv_bucket_names",
            "kv_watch");
    private static final int STREAM_NOT_FOUND = 10059;
    private final Main d;

    Kv(Main d) {
        this.d = d;
    }

    static Duration seconds(double s) {
        return Duration.ofNanos(Math.round(s * 1e9));
    }

    static String time(ZonedDateTime t) {
        return t == null ? null : DateTimeFormatter.ISO_INSTANT.format(t.toInstant());
    }

    static Map<String, Object> entry(KeyValueEntry e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("bucket", e.getBucket());
        m.put("key", e.getKey());
        byte[] value = e.getValue();
        m.put("value_b64", Base64.getEncoder().encodeToString(value == null ? new byte[0] : value));
        m.put("revision", e.getRevision());
        m.put("operation", operation(e.getOperation()));
        m.put("created", time(e.getCreated()));
        return m;
    }

    static String operation(KeyValueOperation op) {
        return switch (op) {
            case DELETE -> "DEL";
            case PURGE -> "PURGE";
            default -> "PUT";
        };
    }

    /** A watched or read entry as streamed: kv-markers-as-values reports every marker as a PUT. */
    Map<String, Object> shown(KeyValueEntry e) {
        Map<String, Object> m = entry(e);
        if (d.mode("kv-markers-as-values")) {
            m.put("operation", "PUT");
        }
        return m;
    }

    Object handle(String op, JsonValue req) throws Exception {
        if (op.equals("kv_watch")) {
            return watch(req);
        }
        Session s = d.session(req);
        if (op.equals("kv_bucket_names")) {
            List<String> names = new ArrayList<>();
            for (String name : s.nc.keyValueManagement(s.kvo).getBucketNames()) {
                names.add(d.mode("kv-buckets-misreport") && !name.startsWith("KV_") ? "KV_" + name : name);
            }
            return Map.of("names", names);
        }
        String bucket = Json.str(req, "bucket");
        if (bucket.isEmpty()) {
            throw new Failure("invalid", op + " needs \"bucket\"");
        }
        KeyValueManagement kvm = s.nc.keyValueManagement(s.kvo);
        if (op.equals("kv_create")) {
            KeyValueConfiguration.Builder b = KeyValueConfiguration.builder().name(bucket);
            Long history = Json.lng(req, "history");
            if (history != null) {
                b.maxHistoryPerKey(history.intValue());
            }
            Double ttl = Json.dbl(req, "ttl_s");
            if (ttl != null) {
                b.ttl(seconds(ttl));
            }
            Double markers = Json.dbl(req, "limit_marker_ttl_s");
            if (markers != null && !d.mode("kv-ttl-ignored")) {
                Adr48.limitMarker(b, markers);
            }
            kvm.create(b.build());
            return null;
        }
        if (op.equals("kv_delete_bucket")) {
            if (d.mode("kv-buckets-misreport")) {
                return null;
            }
            try {
                kvm.delete(bucket);
            } catch (JetStreamApiException e) {
                if (e.getApiErrorCode() == STREAM_NOT_FOUND) {
                    throw new Failure("not_found", Failure.describe(e));
                }
                throw e;
            }
            return null;
        }
        KeyValue kv = s.nc.keyValue(bucket, s.kvo);
        String key = Json.str(req, "key");
        Double keyTtl = d.mode("kv-ttl-ignored") ? null : Json.dbl(req, "key_ttl_s");
        switch (op) {
            case "kv_put":
                if (d.mode("kv-prefix-ignored")) {
                    return Map.of("revision", s.js.publish("$KV." + bucket + "." + key, Json.b64(req, "value_b64")).getSeqno());
                }
                return Map.of("revision", kv.put(key, Json.b64(req, "value_b64")));
            case "kv_create_key":
                return Map.of("revision", keyTtl == null ? kv.create(key, Json.b64(req, "value_b64"))
                        : Adr48.create(kv, key, Json.b64(req, "value_b64"), keyTtl));
            case "kv_update":
                Long last = Json.lng(req, "last");
                return Map.of("revision", kv.update(key, Json.b64(req, "value_b64"), last == null ? 0 : last));
            case "kv_get":
                KeyValueEntry e = kv.get(key);
                if (e == null) {
                    return markerAsValue(s, bucket, key);
                }
                return Map.of("entry", entry(e));
            case "kv_delete":
                kv.delete(key);
                return null;
            case "kv_purge":
                if (keyTtl == null) {
                    kv.purge(key);
                } else {
                    Adr48.purge(kv, key, keyTtl);
                }
                return null;
            case "kv_keys":
                List<String> filters = Json.strings(req, "filters");
                if (filters.isEmpty() || d.mode("kv-keys-unfiltered")) {
                    return Map.of("keys", kv.keys());
                }
                return Map.of("keys", kv.keys(filters));
            case "kv_history":
                List<Map<String, Object>> entries = new ArrayList<>();
                for (KeyValueEntry h : kv.history(key)) {
                    entries.add(entry(h));
                }
                return Map.of("entries", entries);
            case "kv_status":
                KeyValueStatus st = kv.getStatus();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("bucket", st.getBucketName());
                m.put("values", st.getEntryCount());
                m.put("history", st.getMaxHistoryPerKey());
                m.put("ttl_s", st.getTtl() == null ? 0.0 : st.getTtl().toNanos() / 1e9);
                Duration marker = Adr48.limitMarkerTtl(st);
                m.put("limit_marker_ttl_s", marker == null ? 0.0 : marker.toNanos() / 1e9);
                return m;
            default:
                throw new Failure("unsupported", "op \"" + op + "\" is not implemented by the jnats driver");
        }
    }

    /**
     * A get the client answered null for (KeyValue.get: "null if not found or if the most recent entry for the key
     * is a delete or purge"): not_found, or under kv-markers-as-values the key's latest message as a PUT entry.
     */
    private Object markerAsValue(Session s, String bucket, String key) throws Failure {
        Failure notFound = new Failure("not_found", "KeyValue.get(\"" + key + "\") returned null");
        if (!d.mode("kv-markers-as-values")) {
            throw notFound;
        }
        MessageInfo mi;
        try {
            mi = s.jsm.getLastMessage("KV_" + bucket, "$KV." + bucket + "." + key);
        } catch (Exception e) {
            throw notFound;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("bucket", bucket);
        m.put("key", key);
        m.put("value_b64", "");
        m.put("revision", mi.getSeq());
        m.put("operation", "PUT");
        m.put("created", time(mi.getTime()));
        return Map.of("entry", m);
    }

    Object watch(JsonValue req) throws Exception {
        String bucket = Json.str(req, "bucket");
        if (bucket.isEmpty()) {
            throw new Failure("invalid", "kv_watch needs \"bucket\"");
        }
        Session s = d.session(req);
        List<KeyValueWatchOption> options = WatchStream.options(req, KeyValueWatchOption.INCLUDE_HISTORY,
                KeyValueWatchOption.UPDATES_ONLY, KeyValueWatchOption.IGNORE_DELETE);
        if (Json.bool(req, "meta_only") && !d.mode("kv-watch-meta-ignored")) {
            options.add(KeyValueWatchOption.META_ONLY);
        }
        Sub sub = d.newSub(s.id, Json.str(req, "sub"), false);
        KeyValueWatcher watcher = new KvWatchStream(d, sub, this::shown);
        try {
            KeyValue kv = s.nc.keyValue(bucket, s.kvo);
            List<String> keys = Json.strings(req, "keys");
            KeyValueWatchOption[] opts = options.toArray(new KeyValueWatchOption[0]);
            NatsKeyValueWatchSubscription w = keys.isEmpty() ? kv.watchAll(watcher, opts) : kv.watch(keys, watcher, opts);
            sub.started(w::unsubscribe, false, null, null);
        } catch (Exception e) {
            d.forget(sub);
            throw e;
        }
        return null;
    }

    /** A KV watch's stream, which the client calls back as its KeyValueWatcher. */
    private static final class KvWatchStream extends WatchStream<KeyValueEntry> implements KeyValueWatcher {
        KvWatchStream(Main d, Sub sub, Function<KeyValueEntry, Object> encode) {
            super(d, sub, "entry", encode);
        }
    }
}
