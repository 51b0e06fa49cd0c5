package io.jetcheck.jnats;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.LinkedBlockingQueue;

/** stdout, owned by one writer thread: records from many threads never interleave within a line. */
final class Output {
    private static final String END = "\u0000end";
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final Thread writer;
    private volatile boolean closed;

    Output(OutputStream stdout) {
        BufferedOutputStream out = new BufferedOutputStream(stdout, 1 << 16);
        writer = new Thread(() -> {
            try {
                while (true) {
                    String line = lines.take();
                    if (line == END) {
                        out.flush();
                        return;
                    }
                    out.write(line.getBytes(StandardCharsets.UTF_8));
                    out.write('\n');
                    if (lines.isEmpty()) {
                        out.flush();
                    }
                }
            } catch (InterruptedException | IOException e) {
                Log.log("stdout writer ended: " + e);
            }
        }, "stdout-writer");
        writer.start();
    }

    void write(Object record) {
        write(record, 128);
    }

    void write(Object record, int expected) {
        if (!closed) {
            lines.add(Json.write(record, expected));
        }
    }

    /** Records written afterwards are dropped; returns once everything before was written. */
    void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            lines.add(END);
        }
        try {
            writer.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
