package io.jetcheck.jnats;

import io.nats.client.support.JsonParser;
import io.nats.client.support.JsonSerializable;
import io.nats.client.support.JsonValue;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/** Requests are read with jnats' own JSON parser (no second JSON library in the jar); records are written here. */
final class Json {
    private Json() {}

    static JsonValue parse(String line) throws Failure {
        try {
            JsonValue v = JsonParser.parse(line);
            if (v.map == null) {
                throw new Failure("invalid", "a request is a JSON object");
            }
            return v;
        } catch (Exception e) {
            throw new Failure("invalid", "unreadable request: " + e.getMessage());
        }
    }

    /** An already encoded JSON text, written as it is (a client's own JSON, e.g. ObjectInfo.toJson()). */
    record Raw(String json) {}

    static String write(Object value) {
        return write(value, 128);
    }

    /** `value` as JSON, its buffer sized for about `expected` characters (a load record's rows are long). */
    static String write(Object value, int expected) {
        StringBuilder sb = new StringBuilder(expected);
        write(sb, value);
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    private static void write(StringBuilder sb, Object value) {
        if (value == null) {
            sb.append("null");
        } else if (value instanceof String s) {
            string(sb, s);
        } else if (value instanceof Double d) {
            sb.append(d.isNaN() || d.isInfinite() ? "null" : d.toString());
        } else if (value instanceof Number || value instanceof Boolean) {
            sb.append(value);
        } else if (value instanceof Map<?, ?> map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                string(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (value instanceof Collection<?> list) {
            sb.append('[');
            boolean first = true;
            for (Object o : list) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else if (value instanceof Raw raw) {
            sb.append(raw.json());
        } else if (value instanceof JsonSerializable js) {
            sb.append(js.toJson());
        } else if (value instanceof byte[] bytes) {
            string(sb, Base64.getEncoder().encodeToString(bytes));
        } else {
            string(sb, value.toString());
        }
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        if (plain(s)) { // most strings, and the load records' long base64 rows, need no escaping
            sb.append(s).append('"');
            return;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }

    private static boolean plain(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c == '"' || c == '\\') {
                return false;
            }
        }
        return true;
    }

    // --- reading a request's fields (absent and null read alike) ---------------------------------------------------

    static JsonValue get(JsonValue obj, String key) {
        if (obj == null || obj.map == null) {
            return null;
        }
        JsonValue v = obj.map.get(key);
        return v == null || v.type == JsonValue.Type.NULL ? null : v;
    }

    static String str(JsonValue obj, String key) {
        JsonValue v = get(obj, key);
        return v == null || v.string == null ? "" : v.string;
    }

    static Double dbl(JsonValue obj, String key) {
        JsonValue v = get(obj, key);
        return v == null || v.number == null ? null : v.number.doubleValue();
    }

    static Long lng(JsonValue obj, String key) {
        JsonValue v = get(obj, key);
        return v == null || v.number == null ? null : v.number.longValue();
    }

    static boolean bool(JsonValue obj, String key) {
        JsonValue v = get(obj, key);
        return v != null && Boolean.TRUE.equals(v.bool);
    }

    static List<String> strings(JsonValue obj, String key) {
        JsonValue v = get(obj, key);
        List<String> out = new ArrayList<>();
        if (v != null && v.array != null) {
            for (JsonValue item : v.array) {
                if (item.string != null) {
                    out.add(item.string);
                }
            }
        }
        return out;
    }

    static byte[] b64(JsonValue obj, String key) throws Failure {
        try {
            return Base64.getDecoder().decode(str(obj, key));
        } catch (IllegalArgumentException e) {
            throw new Failure("invalid", key + ": " + e.getMessage());
        }
    }
}
