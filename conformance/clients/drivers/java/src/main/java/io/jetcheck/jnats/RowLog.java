package io.jetcheck.jnats;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A load run's rows (a fixed number of int64s per operation) and error classes until the next flush, streamed as
 * `load` records (../PROTOCOL.md "Load"). Guarded by itself.
 */
final class RowLog {
    private final Main d;
    private final String sub;
    private final Supplier<Map<String, Object>> extra; // more fields of every record (called with the lock held)
    private long[] rows = new long[8192];
    private int used;
    private final Numbered errors = new Numbered();

    RowLog(Main d, String sub, Supplier<Map<String, Object>> extra) {
        this.d = d;
        this.sub = sub;
        this.extra = extra;
    }

    /** The 1-based index of `cls` among the run's error classes (0 for ""); call with the lock held. */
    synchronized long errorNo(String cls) {
        if (cls.isEmpty()) {
            return 0;
        }
        return errors.of(cls);
    }

    synchronized void add(long... row) {
        if (used + row.length > rows.length) {
            rows = Arrays.copyOf(rows, Math.max(rows.length * 2, used + row.length));
        }
        System.arraycopy(row, 0, rows, used, row.length);
        used += row.length;
    }

    /** One publish row (six int64s, `cls` the error class or ""), without the varargs array of the hot path. */
    synchronized void addPublish(long intended, long sent, long acked, long streamSeq, String cls, long code) {
        if (used + 6 > rows.length) {
            rows = Arrays.copyOf(rows, rows.length * 2);
        }
        rows[used++] = intended;
        rows[used++] = sent;
        rows[used++] = acked;
        rows[used++] = streamSeq;
        rows[used++] = errorNo(cls);
        rows[used++] = code;
    }

    /** Streams the rows logged since the last flush as one record. */
    void flush() {
        long[] taken;
        int n;
        Map<String, Object> record = new LinkedHashMap<>();
        synchronized (this) {
            if (used == 0) {
                return;
            }
            taken = rows;
            n = used;
            rows = new long[Math.max(8192, n)];
            used = 0;
            record.put("type", "load");
            record.put("sub", sub);
            record.put("errors", errors.names());
            if (extra != null) {
                record.putAll(extra.get());
            }
        }
        ByteBuffer buf = ByteBuffer.allocate(8 * n).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            buf.putLong(taken[i]);
        }
        String rowsB64 = Base64.getEncoder().encodeToString(buf.array());
        record.put("rows_b64", rowsB64);
        d.out.write(record, rowsB64.length() + 256);
    }
}
