package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.InvalidRequestException;

/**
 * The pool's timed calls take any {@link Duration}: a negative wait counts as zero (an empty
 * class fails at once), one too long for nanoseconds saturates instead of throwing an
 * {@link ArithmeticException}. {@link ExhaustionPolicy#await} is a setting, not a wait: it
 * refuses a negative timeout and saturates a huge one.
 */
class PoolTimeoutsTest {
    private static final Duration HUGE = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);
    private static final Duration MOST_NEGATIVE = Duration.ofSeconds(Long.MIN_VALUE);
    private final FakeVerbs fake = new FakeVerbs();

    @AfterEach
    void closeFake() {
        fake.close();
    }

    @Test
    void leaseTakesAnyDuration() {
        try (BufferPool pool =
                fake.pool().name("p").sizeClass(256, 1).threadCacheSize(0).build()) {
            PooledBuffer b = pool.lease(1, HUGE);
            assertNotNull(b, "a free buffer: no wait");
            assertThrows(PoolExhaustedException.class, () -> pool.lease(1, MOST_NEGATIVE), "no wait when negative");
            b.release();
            long t = pool.leaseToken(1, HUGE);
            assertNotEquals(BufferPool.NO_TOKEN, t);
            assertThrows(PoolExhaustedException.class, () -> pool.leaseToken(1, Duration.ofNanos(-1)));
            pool.release(t);
        }
    }

    @Test
    void theExhaustionPolicySaturatesAndRefusesNegative() {
        assertEquals(Long.MAX_VALUE / 2, ExhaustionPolicy.await(HUGE).timeoutNanos());
        assertThrows(InvalidRequestException.class, () -> ExhaustionPolicy.await(MOST_NEGATIVE));
    }
}
