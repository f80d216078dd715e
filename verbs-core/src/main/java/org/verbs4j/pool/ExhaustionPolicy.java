package org.verbs4j.pool;

import java.time.Duration;
import java.util.Objects;

/**
 * What {@link BufferPool#lease(int)} does when every buffer of the size class is leased:
 * {@link #FAIL_FAST} throws {@link PoolExhaustedException} at once; {@link #await(Duration)} waits
 * (parking, without locks) until another thread releases a buffer of the class or the timeout
 * passes, then throws. {@link BufferPool#tryLease(int)} ignores the policy and returns null.
 *
 * <p>Immutable; any thread may use it.
 */
public final class ExhaustionPolicy {
    /** Throw {@link PoolExhaustedException} immediately. */
    public static final ExhaustionPolicy FAIL_FAST = new ExhaustionPolicy(0L);

    private final long timeoutNanos;

    private ExhaustionPolicy(long timeoutNanos) {
        this.timeoutNanos = timeoutNanos;
    }

    /** Wait up to {@code timeout} for a release, then throw {@link PoolExhaustedException}. */
    public static ExhaustionPolicy await(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative()) {
            throw new org.verbs4j.InvalidRequestException(
                    "ExhaustionPolicy", "the timeout must not be negative: " + timeout);
        }
        long n = timeout.compareTo(Duration.ofNanos(Long.MAX_VALUE / 2)) > 0 ? Long.MAX_VALUE / 2 : timeout.toNanos();
        return n == 0 ? FAIL_FAST : new ExhaustionPolicy(n);
    }

    /** The longest a lease waits, in nanoseconds (0 for fail-fast). */
    public long timeoutNanos() {
        return timeoutNanos;
    }

    /** True for {@link #FAIL_FAST}. */
    public boolean failsFast() {
        return timeoutNanos == 0;
    }

    @Override
    public String toString() {
        return failsFast() ? "FAIL_FAST" : "await(" + Duration.ofNanos(timeoutNanos) + ")";
    }
}
