package io.jetcheck.jnats;

import io.nats.client.KeyValue;
import io.nats.client.PublishOptions;
import io.nats.client.api.KeyValueConfiguration;
import io.nats.client.api.KeyValueStatus;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;

/**
 * The per-message TTL calls (ADR-43, ADR-48: io.nats.client.MessageTtl, KeyValueConfiguration limit markers) reached
 * by reflection, so one driver source builds against jnats releases from before them; a release without the call
 * answers `not_in_release` naming it.
 */
final class Adr48 {
    private Adr48() {}

    private static Class<?> messageTtlClass() throws Failure {
        try {
            return Class.forName("io.nats.client.MessageTtl");
        } catch (ClassNotFoundException e) {
            throw missing("io.nats.client.MessageTtl");
        }
    }

    static Failure missing(String what) {
        return new Failure("not_in_release", "not in jnats " + Main.clientVersion() + ": " + what);
    }

    private static Method method(Class<?> c, String name, Class<?>... args) throws Failure {
        try {
            return c.getMethod(name, args);
        } catch (NoSuchMethodException e) {
            throw missing(c.getSimpleName() + "." + name);
        }
    }

    private static Object call(Method m, Object target, Object... args) throws Exception {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }

    /** A TTL as the client's MessageTtl: whole seconds, else the Go duration string it sends as Nats-TTL. */
    static Object ttl(double s) throws Exception {
        Class<?> c = messageTtlClass();
        long whole = Math.round(s);
        if (Math.abs(s - whole) < 1e-9 && whole >= 1) {
            return call(method(c, "seconds", int.class), null, (int) whole);
        }
        return call(method(c, "custom", String.class), null, Math.round(s * 1000) + "ms");
    }

    static long create(KeyValue kv, String key, byte[] value, double ttlS) throws Exception {
        return (Long) call(method(KeyValue.class, "create", String.class, byte[].class, messageTtlClass()), kv, key,
                value, ttl(ttlS));
    }

    static void purge(KeyValue kv, String key, double ttlS) throws Exception {
        call(method(KeyValue.class, "purge", String.class, messageTtlClass()), kv, key, ttl(ttlS));
    }

    static void limitMarker(KeyValueConfiguration.Builder b, double s) throws Exception {
        call(method(KeyValueConfiguration.Builder.class, "limitMarker", Duration.class), b, Kv.seconds(s));
    }

    /** The bucket's limit marker TTL (null: none, or a release without it). */
    static Duration limitMarkerTtl(KeyValueStatus status) throws Exception {
        try {
            return (Duration) call(KeyValueStatus.class.getMethod("getLimitMarkerTtl"), status);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    static void messageTtl(PublishOptions.Builder b, double s) throws Exception {
        call(method(PublishOptions.Builder.class, "messageTtl", messageTtlClass()), b, ttl(s));
    }
}
