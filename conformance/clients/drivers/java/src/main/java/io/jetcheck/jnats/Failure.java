package io.jetcheck.jnats;

import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamStatusException;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

/** An error response: the protocol's kind, the client's own words, and a JetStream API error's codes. */
final class Failure extends Exception {
    final String kind;
    final Integer code;
    final Integer errCode;

    Failure(String kind, String message) {
        this(kind, message, null, null);
    }

    Failure(String kind, String message, Integer code, Integer errCode) {
        super(message);
        this.kind = kind;
        this.code = code;
        this.errCode = errCode;
    }

    Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", kind);
        m.put("message", getMessage());
        m.put("code", code);
        m.put("err_code", errCode);
        return m;
    }

    /** The client's exception class and message, e.g. "JetStreamApiException: consumer not found [10014]". */
    static String describe(Throwable t) {
        return t.getClass().getName() + ": " + t.getMessage();
    }

    /** A client exception under the protocol's kinds, keeping its message. */
    static Failure classify(Throwable t) {
        if (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
        if (t instanceof Failure f) {
            return f;
        }
        String message = describe(t);
        if (t instanceof JetStreamApiException api) {
            return new Failure("api", message, api.getErrorCode(), api.getApiErrorCode());
        }
        if (t instanceof JetStreamStatusException status && status.getStatus() != null) {
            return new Failure(status.getStatus().getCode() == 503 ? "connection" : "other", message,
                    status.getStatus().getCode(), null);
        }
        if (t instanceof TimeoutException || t instanceof CancellationException || t instanceof InterruptedException) {
            return new Failure("timeout", message);
        }
        if (t instanceof IllegalArgumentException || t instanceof IllegalStateException) {
            return new Failure("invalid", message);
        }
        if (t instanceof IOException) {
            String m = String.valueOf(t.getMessage()).toLowerCase();
            if (m.contains("timed out") || m.contains("timeout")) {
                return new Failure("timeout", message);
            }
            return new Failure("connection", message);
        }
        return new Failure("other", message);
    }
}
