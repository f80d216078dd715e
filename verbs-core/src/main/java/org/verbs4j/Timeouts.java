package org.verbs4j;

import java.time.Duration;

/**
 * Any {@link Duration} as a bound of a wait: negative is zero, and anything longer than about 73
 * years is that (so that {@code System.nanoTime() + nanos} cannot overflow), never an
 * {@link ArithmeticException}.
 */
final class Timeouts {
    /** The longest bound, in nanoseconds (about 73 years). */
    static final long MAX_NANOS = Long.MAX_VALUE / 4;

    private static final Duration MAX = Duration.ofNanos(MAX_NANOS);

    private Timeouts() {}

    /** {@code timeout} in nanoseconds, saturated to {@code 0..MAX_NANOS}. */
    static long nanos(Duration timeout) {
        if (timeout.isNegative()) {
            return 0;
        }
        return timeout.compareTo(MAX) > 0 ? MAX_NANOS : timeout.toNanos();
    }

    /** {@code timeout} in milliseconds for a socket timeout: {@code 1..Integer.MAX_VALUE} (0 would mean forever). */
    static int socketMillis(Duration timeout) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, nanos(timeout) / 1_000_000L));
    }
}
