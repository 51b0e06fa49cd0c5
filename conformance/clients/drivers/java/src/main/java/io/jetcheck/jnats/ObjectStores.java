package io.jetcheck.jnats;

import io.nats.client.JetStreamApiException;
import io.nats.client.ObjectStore;
import io.nats.client.api.ObjectInfo;
import io.nats.client.api.ObjectMeta;
import io.nats.client.api.ObjectStoreConfiguration;
import io.nats.client.api.ObjectStoreStatus;
import io.nats.client.api.ObjectStoreWatchOption;
import io.nats.client.api.ObjectStoreWatcher;
import io.nats.client.impl.Headers;
import io.nats.client.impl.NatsObjectStoreWatchSubscription;
import io.nats.client.support.JsonValue;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * v2: object store and v3: obj_watch over jnats' ObjectStore and ObjectStoreManagement. Arguments arrive under
 * "obj"; infos leave as the client's ObjectInfo.toJson() (ADR-20's ObjectInfo JSON).
 */
final class ObjectStores {
    static final List<String> OPS = List.of("obj_create", "obj_put", "obj_get", "obj_info", "obj_list", "obj_delete",
            "obj_update_meta", "obj_add_link", "obj_seal", "obj_status", "obj_watch");
    private static final int STREAM_NOT_FOUND = 10059;
    private static final int STREAM_NAME_IN_USE = 10058;
    private final Main d;

    ObjectStores(Main d) {
        this.d = d;
    }

    /** The client's object store errors under the protocol's kinds (jnats: "[OS-90201] The object was not found."). */
    static Exception objectError(Exception e) {
        if (e instanceof JetStreamApiException api && api.getApiErrorCode() == STREAM_NOT_FOUND) {
            return new Failure("not_found", Failure.describe(e));
        }
        if (e instanceof IllegalArgumentException || e instanceof IllegalStateException) {
            String m = String.valueOf(e.getMessage());
            if (m.contains("90201") || m.contains("90202")) {
                return new Failure("not_found", Failure.describe(e));
            }
            if (m.contains("90203")) {
                return new Failure("exists", Failure.describe(e));
            }
            if (m.contains("90205") || m.contains("90206") || m.contains("90207")) {
                return new Failure("digest_mismatch", Failure.describe(e));
            }
        }
        return e;
    }

    static Json.Raw info(ObjectInfo info) {
        return new Json.Raw(info.toJson());
    }

    Object handle(String op, JsonValue req) throws Exception {
        if (op.equals("obj_watch")) { // watch maps the client's errors itself (objectError)
            return watch(req);
        }
        try {
            return run(op, req);
        } catch (Failure f) {
            throw f;
        } catch (Exception e) {
            throw objectError(e);
        }
    }

    private Object run(String op, JsonValue req) throws Exception {
        Session s = d.session(req);
        JsonValue args = Json.get(req, "obj");
        String bucket = Json.str(args, "bucket");
        if (bucket.isEmpty()) {
            throw new Failure("invalid", op + " needs \"obj\" with a \"bucket\"");
        }
        if (op.equals("obj_create")) {
            try {
                s.nc.objectStoreManagement(s.oso).create(ObjectStoreConfiguration.builder(bucket).build());
            } catch (JetStreamApiException e) {
                if (e.getApiErrorCode() != STREAM_NAME_IN_USE) { // "create (or open)": an existing one is opened
                    throw e;
                }
                s.nc.objectStore(bucket, s.oso).getStatus();
            }
            return null;
        }
        ObjectStore os = s.nc.objectStore(bucket, s.oso);
        String name = Json.str(args, "name");
        switch (op) {
            case "obj_put": {
                ObjectMeta.Builder meta = ObjectMeta.builder(name);
                Long chunk = Json.lng(args, "chunk_size");
                if (chunk != null) {
                    meta.chunkSize(chunk.intValue());
                }
                return Map.of("info", info(os.put(meta.build(), new ByteArrayInputStream(Json.b64(args, "data_b64")))));
            }
            case "obj_get": {
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                os.get(name, out);
                return Map.of("data_b64", Base64.getEncoder().encodeToString(out.toByteArray()));
            }
            case "obj_info": {
                ObjectInfo info = os.getInfo(name, Json.bool(args, "show_deleted"));
                if (info == null) {
                    throw new Failure("not_found", "ObjectStore.getInfo(\"" + name + "\") returned null");
                }
                return Map.of("info", info(info));
            }
            case "obj_list": {
                List<Object> infos = new ArrayList<>();
                for (ObjectInfo info : os.getList()) {
                    infos.add(info(info));
                }
                return Map.of("infos", infos);
            }
            case "obj_delete":
                return Map.of("info", info(os.delete(name)));
            case "obj_update_meta": {
                JsonValue m = Json.get(args, "meta");
                if (m == null) {
                    throw new Failure("invalid", "obj_update_meta needs \"meta\"");
                }
                ObjectMeta.Builder meta = ObjectMeta.builder(Json.str(m, "name")).description(Json.str(m, "description"));
                JsonValue headers = Json.get(m, "headers");
                if (headers != null && headers.map != null && !headers.map.isEmpty()) {
                    Headers h = new Headers();
                    headers.map.forEach((k, v) -> {
                        if (v.array != null) {
                            v.array.forEach(item -> h.add(k, item.string));
                        }
                    });
                    meta.headers(h);
                }
                os.updateMeta(name, meta.build());
                return null;
            }
            case "obj_add_link": {
                // the target's info read as the client reads it, a deleted one included
                String target = Json.str(args, "target");
                ObjectInfo to = os.getInfo(target, true);
                if (to == null) {
                    throw new Failure("not_found", "ObjectStore.getInfo(\"" + target + "\", true) returned null");
                }
                return Map.of("info", info(os.addLink(name, to)));
            }
            case "obj_seal":
                if (!d.mode("seal-ignored")) { // misbehave: answers as sealed without asking the client to seal
                    os.seal();
                }
                return null;
            case "obj_status":
                return Map.of("status", status(os.getStatus(), d.mode("status-misreport")));
            default:
                throw new Failure("unsupported", "op \"" + op + "\" is not implemented by the jnats driver");
        }
    }

    static Map<String, Object> status(ObjectStoreStatus st, boolean misreport) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("bucket", st.getBucketName());
        m.put("description", st.getDescription());
        m.put("ttl_s", st.getTtl() == null ? 0.0 : st.getTtl().toNanos() / 1e9);
        m.put("storage", st.getStorageType() == null ? null : st.getStorageType().toString().toLowerCase(Locale.ROOT));
        m.put("replicas", st.getReplicas());
        m.put("sealed", st.isSealed());
        m.put("size", misreport ? 0 : st.getSize());
        m.put("backing_store", misreport ? "" : st.getBackingStore());
        m.put("metadata", st.getConfiguration() == null ? null : st.getConfiguration().getMetadata());
        m.put("compressed", st.isCompressed());
        return m;
    }

    Object watch(JsonValue req) throws Exception {
        Session s = d.session(req);
        JsonValue args = Json.get(req, "obj");
        String bucket = Json.str(args, "bucket");
        if (bucket.isEmpty()) {
            throw new Failure("invalid", "obj_watch needs \"obj\" with a \"bucket\"");
        }
        if (Json.bool(args, "meta_only")) {
            throw new Failure("invalid", "obj_watch has no meta_only (the protocol's obj_watch options are "
                    + "include_history, updates_only and ignore_deletes)");
        }
        List<ObjectStoreWatchOption> options = WatchStream.options(args, ObjectStoreWatchOption.INCLUDE_HISTORY,
                ObjectStoreWatchOption.UPDATES_ONLY, ObjectStoreWatchOption.IGNORE_DELETE);
        Sub sub = d.newSub(s.id, Json.str(args, "sub"), false);
        ObjectStoreWatcher watcher = new ObjectWatchStream(d, sub, ObjectStores::info);
        try {
            ObjectStore os = s.nc.objectStore(bucket, s.oso);
            NatsObjectStoreWatchSubscription w = os.watch(watcher, options.toArray(new ObjectStoreWatchOption[0]));
            sub.started(w::unsubscribe, false, null, null);
        } catch (Exception e) {
            d.forget(sub);
            throw objectError(e);
        }
        return null;
    }

    /** An object store watch's stream, which the client calls back as its ObjectStoreWatcher. */
    private static final class ObjectWatchStream extends WatchStream<ObjectInfo> implements ObjectStoreWatcher {
        ObjectWatchStream(Main d, Sub sub, Function<ObjectInfo, Object> encode) {
            super(d, sub, "info", encode);
        }
    }
}
