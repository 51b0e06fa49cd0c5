package io.jetcheck.jnats;

import java.time.LocalTime;

/** stderr: the driver's log (never credentials). */
final class Log {
    private Log() {}

    static void log(String line) {
        System.err.println(LocalTime.now() + " jnats driver: " + line);
    }
}
