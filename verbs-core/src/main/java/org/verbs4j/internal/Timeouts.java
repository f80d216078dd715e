package org.verbs4j.internal;

import java.time.Duration;
import org.verbs4j.InvalidRequestException;

/**
 * The one conversion of a timeout {@link Duration} for every timed call: any duration is
 * accepted. A negative one counts as zero (no wait, as in {@code java.util.concurrent}); one
 * longer than {@link #FOREVER_NANOS} (about 146 years) waits that long, which is as good as
 * forever, and leaves room for {@code System.nanoTime() + nanos} and its rounding without
 * overflow. Allocates nothing. Not API.
 */
public final class Timeouts {
    /** The longest wait, in nanoseconds: {@code Long.MAX_VALUE / 2}. */
    public static final long FOREVER_NANOS = Long.MAX_VALUE / 2;

    private static final long MAX_SECONDS = FOREVER_NANOS / 1_000_000_000L;

    private Timeouts() {}

    /**
     * {@code timeout} in nanoseconds, within {@code [0, FOREVER_NANOS]}.
     *
     * @throws InvalidRequestException naming {@code verb} when {@code timeout} is null
     */
    public static long nanos(String verb, Duration timeout) {
        if (timeout == null) {
            throw new InvalidRequestException(
                    verb,
                    "the timeout is null",
                    "pass Duration.ZERO for no wait, or a bound such as Duration.ofSeconds(5)");
        }
        long s = timeout.getSeconds();
        if (s < 0) {
            return 0;
        }
        if (s >= MAX_SECONDS) {
            return FOREVER_NANOS;
        }
        return s * 1_000_000_000L + timeout.getNano();
    }

    /** {@code timeout} in milliseconds, rounded up, within {@code [0, FOREVER_NANOS / 1e6]}. */
    public static long millis(String verb, Duration timeout) {
        return (nanos(verb, timeout) + 999_999L) / 1_000_000L;
    }

    /** {@code timeout} in milliseconds, rounded up, within {@code [0, Integer.MAX_VALUE]} (for socket and poll timeouts). */
    public static int intMillis(String verb, Duration timeout) {
        return (int) Math.min(Integer.MAX_VALUE, millis(verb, timeout));
    }

    /** The {@link System#nanoTime()} deadline {@code timeout} from now. */
    public static long deadline(String verb, Duration timeout) {
        return System.nanoTime() + nanos(verb, timeout);
    }

    /** The {@link System#nanoTime()} deadline {@code nanos} from now, {@code nanos} clamped to {@code [0, FOREVER_NANOS]}. */
    public static long deadline(long nanos) {
        return System.nanoTime() + Math.max(0, Math.min(FOREVER_NANOS, nanos));
    }
}
