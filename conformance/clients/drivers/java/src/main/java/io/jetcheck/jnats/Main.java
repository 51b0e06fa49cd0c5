package io.jetcheck.jnats;

import io.nats.client.Nats;
import io.nats.client.support.JsonValue;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Phaser;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The jetcheck driver for jnats: protocol v3 (../PROTOCOL.md). One JSON object per line in on stdin (requests), out
 * on stdout (responses, deliveries, events, watch and load records). Every request runs on a pool thread, so a long
 * fetch never blocks a stop; one writer thread owns stdout.
 */
public final class Main {
    static final int PROTOCOL = 3;
    static final long START = System.nanoTime();
    static final long API_TIMEOUT_MS = 10_000;

    static long monoNs() {
        return System.nanoTime() - START;
    }

    static final Set<String> KNOWN_MODES = Set.of(
            "swallow-missed-heartbeat", "chatty-missed-heartbeat", "terminal-on-missed-heartbeat",
            "duplicate-delivery", "drop-deliveries-after-reset", "watch-no-end-of-data", "watch-drop-first",
            "bind-any-queue", "kv-ttl-ignored", "kv-markers-as-values", "kv-keys-unfiltered", "kv-buckets-misreport",
            "kv-watch-meta-ignored", "kv-prefix-ignored", "ttl-dropped", "resume-ignored", "pin-forgotten",
            "min-pending-dropped", "seal-ignored", "status-misreport", "consumer-actions-rotated", "publish-no-retry");

    final Output out = new Output(System.out);
    final Map<String, Session> sessions = new ConcurrentHashMap<>();
    final Map<String, Sub> subs = new ConcurrentHashMap<>();
    final Set<String> modes = ConcurrentHashMap.newKeySet();
    final ExecutorService pool = Executors.newCachedThreadPool(daemon("request"));
    final ScheduledExecutorService timers = Executors.newScheduledThreadPool(2, daemon("timer"));
    private final Phaser inFlight = new Phaser(1);
    private boolean chatty;

    final Consumers consumers = new Consumers(this);
    final Kv kv = new Kv(this);
    final ObjectStores objects = new ObjectStores(this);
    final Features features = new Features(this);
    final Load load = new Load(this);

    static java.util.concurrent.ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }

    boolean mode(String name) {
        return modes.contains(name);
    }

    List<String> ops() {
        List<String> ops = new ArrayList<>(List.of("hello", "connect", "close", "ping", "ordered", "push", "consume",
                "fetch", "stop", "misbehave", "shutdown", "consumer_add"));
        ops.addAll(Kv.OPS);
        ops.addAll(ObjectStores.OPS);
        ops.addAll(Features.OPS);
        ops.addAll(Load.OPS);
        return ops;
    }

    // --- output ------------------------------------------------------------------------------------------------------

    void respond(long id, Object result, Failure failure) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("ok", failure == null);
        if (failure != null) {
            m.put("error", failure.json());
        } else {
            m.put("result", result == null ? Map.of() : result);
        }
        out.write(m);
    }

    /** Streams what the client reported, unless a misbehaviour swallows it or its sub was stopped. */
    void event(String session, String subId, String kind, String detail) {
        if (kind.equals("missed-heartbeat") && mode("swallow-missed-heartbeat")) {
            return;
        }
        Sub sub = subId == null ? null : subs.get(subId);
        if (sub != null) {
            synchronized (sub) {
                if (sub.stopped && !kind.equals("terminal")) {
                    return;
                }
                writeEvent(session, subId, kind, detail);
            }
            return;
        }
        writeEvent(session, subId, kind, detail);
    }

    void writeEvent(String session, String subId, String kind, String detail) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "event");
        m.put("session", session);
        m.put("sub", subId);
        m.put("kind", kind);
        m.put("detail", detail);
        m.put("at_ns", monoNs());
        out.write(m);
    }

    // --- requests ----------------------------------------------------------------------------------------------------

    Session session(JsonValue req) throws Failure {
        String id = Json.str(req, "session");
        Session s = sessions.get(id);
        if (s == null) {
            throw new Failure("invalid", "no session \"" + id + "\"");
        }
        return s;
    }

    Object handle(String op, JsonValue req) throws Exception {
        switch (op) {
            case "hello":
                return hello();
            case "connect":
                return Session.connect(this, req);
            case "close":
                return closeSession(Json.str(req, "session"));
            case "ping":
                session(req).ping();
                return null;
            case "ordered":
                return consumers.ordered(req);
            case "push":
                return consumers.push(req);
            case "consume":
                return consumers.consume(req);
            case "fetch":
                return consumers.fetch(req);
            case "stop":
                return stop(Json.str(req, "sub"));
            case "misbehave":
                return misbehave(Json.strings(req, "modes"));
            case "consumer_add":
                return features.consumerAdd(req);
            case "publish_retrying":
                return features.publishRetrying(req);
            default:
        }
        if (op.startsWith("kv_")) {
            return kv.handle(op, req);
        }
        if (op.startsWith("obj_")) {
            return objects.handle(op, req);
        }
        if (op.startsWith("js_")) {
            return features.handle(op, req);
        }
        if (op.startsWith("load_")) {
            return load.handle(op, req);
        }
        throw new Failure("unsupported", "op \"" + op + "\" is not implemented by the jnats driver (protocol v" + PROTOCOL + ")");
    }

    /**
     * The jnats release built in: the Maven property the jar was built with (jnats.version, through resource
     * filtering). Nats.CLIENT_VERSION reads the jar's manifest in older releases, which shading replaces
     * ("development").
     */
    static String clientVersion() {
        try (java.io.InputStream in = Main.class.getResourceAsStream("/jnats-driver.properties")) {
            if (in != null) {
                java.util.Properties p = new java.util.Properties();
                p.load(in);
                String v = p.getProperty("version", "");
                if (!v.isEmpty() && !v.startsWith("$")) {
                    return v;
                }
            }
        } catch (java.io.IOException e) {
            Log.log("reading jnats-driver.properties: " + e);
        }
        return Nats.CLIENT_VERSION;
    }

    Map<String, Object> hello() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("protocol", PROTOCOL);
        m.put("client", "jnats");
        m.put("version", clientVersion());
        m.put("runtime", "java " + System.getProperty("java.version"));
        m.put("mono_ns", monoNs());
        m.put("ops", ops());
        m.put("libraries", Map.of("io.nats:jnats", clientVersion(), "Nats.CLIENT_VERSION", Nats.CLIENT_VERSION));
        return m;
    }

    Object closeSession(String id) throws Failure {
        Session s = sessions.remove(id);
        List<Sub> mine = new ArrayList<>();
        for (Sub sub : subs.values()) {
            if (sub.session.equals(id) && subs.remove(sub.id, sub)) {
                mine.add(sub);
            }
        }
        if (s == null) {
            throw new Failure("invalid", "no session \"" + id + "\"");
        }
        mine.forEach(Sub::stop);
        s.close();
        return null;
    }

    Object stop(String id) throws Failure {
        Sub sub = subs.remove(id);
        if (sub == null) {
            throw new Failure("invalid", "no sub \"" + id + "\"");
        }
        sub.stop();
        return null;
    }

    Sub newSub(String session, String id, boolean ordered) throws Failure {
        if (id.isEmpty()) {
            throw new Failure("invalid", "a sub id is needed");
        }
        Sub sub = new Sub(this, id, session, ordered);
        if (subs.putIfAbsent(id, sub) != null) {
            throw new Failure("invalid", "sub \"" + id + "\" exists");
        }
        return sub;
    }

    void forget(Sub sub) {
        subs.remove(sub.id, sub);
    }

    synchronized Object misbehave(List<String> wanted) throws Failure {
        for (String m : wanted) {
            if (!KNOWN_MODES.contains(m)) {
                throw new Failure("invalid", "unknown misbehave mode \"" + m + "\"");
            }
        }
        modes.addAll(wanted);
        if (mode("chatty-missed-heartbeat") && !chatty) {
            chatty = true;
            // a deliberate deviation: a missed heartbeat invented every 100 ms for every running consumption
            timers.scheduleAtFixedRate(() -> {
                for (Sub sub : subs.values()) {
                    if (sub.running()) {
                        writeEvent(sub.session, sub.id, "missed-heartbeat",
                                "misbehave chatty-missed-heartbeat: invented by the driver");
                    }
                }
            }, 100, 100, TimeUnit.MILLISECONDS);
        }
        Log.log("misbehaving from now on: " + wanted);
        return null;
    }

    // --- main loop ---------------------------------------------------------------------------------------------------

    void run() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            JsonValue req;
            try {
                req = Json.parse(line);
            } catch (Failure f) {
                Log.log("unreadable request line (" + line.length() + " bytes) ignored: " + f.getMessage());
                continue;
            }
            Long id = Json.lng(req, "id");
            if (id == null) {
                Log.log("a request without an id ignored");
                continue;
            }
            String op = Json.str(req, "op");
            if (op.equals("shutdown")) {
                inFlight.arriveAndAwaitAdvance();
                respond(id, null, null);
                finish();
            }
            inFlight.register();
            final JsonValue request = req;
            pool.execute(() -> {
                try {
                    respond(id, handle(op, request), null);
                } catch (Throwable t) {
                    Failure f = Failure.classify(t);
                    if (f.kind.equals("other")) {
                        Log.log(op + " failed: " + f.getMessage());
                    }
                    respond(id, null, f);
                } finally {
                    inFlight.arriveAndDeregister();
                }
            });
        }
        finish();
    }

    /** Stdin closed or shutdown: the requests in flight are answered, the sessions closed, stdout flushed. */
    private void finish() {
        inFlight.arriveAndAwaitAdvance();
        for (String id : new ArrayList<>(sessions.keySet())) {
            try {
                closeSession(id);
            } catch (Failure ignored) {
                // closed meanwhile
            }
        }
        out.close();
        System.exit(0);
    }

    public static void main(String[] args) throws Exception {
        new Main().run();
    }
}
