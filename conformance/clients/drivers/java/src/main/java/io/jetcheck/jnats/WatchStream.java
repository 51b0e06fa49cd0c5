package io.jetcheck.jnats;

import io.nats.client.support.JsonValue;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * A watch's updates streamed in the order the client's watcher yields them; its endOfData() becomes a record with
 * a null entry/info. The watch misbehaviours drop the end-of-data record or the first update. A subclass that
 * implements the client's watcher interface for its kind (KeyValueWatcher, ObjectStoreWatcher) is the watcher the
 * client calls: watch() and endOfData() are the interface's methods.
 */
abstract class WatchStream<T> {
    private final Main d;
    private final Sub sub;
    private final String field;
    private final Function<T, Object> encode;
    private boolean updateSeen;

    /**
     * The client's watch options (a KV or an object store's kind) for the protocol's include_history, updates_only
     * and ignore_deletes flags of `req`, in that order.
     */
    static <O> List<O> options(JsonValue req, O includeHistory, O updatesOnly, O ignoreDeletes) {
        List<O> options = new ArrayList<>();
        if (Json.bool(req, "include_history")) {
            options.add(includeHistory);
        }
        if (Json.bool(req, "updates_only")) {
            options.add(updatesOnly);
        }
        if (Json.bool(req, "ignore_deletes")) {
            options.add(ignoreDeletes);
        }
        return options;
    }

    WatchStream(Main d, Sub sub, String field, Function<T, Object> encode) {
        this.d = d;
        this.sub = sub;
        this.field = field;
        this.encode = encode;
    }

    public void endOfData() {
        watch(null);
    }

    public void watch(T update) {
        Object payload = update == null ? null : encode.apply(update);
        synchronized (sub) {
            if (sub.stopped) {
                return;
            }
            if (payload == null && d.mode("watch-no-end-of-data")) {
                return;
            }
            if (payload != null && !updateSeen && d.mode("watch-drop-first")) {
                updateSeen = true;
                return;
            }
            updateSeen = updateSeen || payload != null;
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("type", "watch");
            m.put("sub", sub.id);
            m.put(field, payload);
            m.put("at_ns", Main.monoNs());
            d.out.write(m);
        }
    }
}
