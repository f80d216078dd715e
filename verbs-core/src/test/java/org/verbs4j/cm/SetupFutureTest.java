package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The blocking caller's last wait for a settled setup's outcome (no connection needed). */
class SetupFutureTest {
    private static SetupFuture future() {
        return new SetupFuture(null, System.nanoTime(), false, "connecting", ConnectionState.CONNECTED);
    }

    @Test
    void aSettledSetupThatIsNotCompletedGivesTheTimeoutAfterTheBound() {
        SetupFuture f = future(); // as when a releaser settled it and is still closing the connection
        IllegalStateException late = new IllegalStateException("late");
        long start = System.nanoTime();
        RuntimeException x = assertTimeoutPreemptively(
                Duration.ofSeconds(10), () -> f.outcome(TimeUnit.MILLISECONDS.toNanos(50), () -> late));
        assertSame(late, x);
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(50));
    }

    @Test
    void aCompletedSetupGivesItsOwnOutcome() {
        SetupFuture ok = future();
        ok.complete(null);
        assertNull(ok.outcome(1, () -> new IllegalStateException("late")));

        SetupFuture failed = future();
        IllegalArgumentException cause = new IllegalArgumentException("failed");
        failed.completeExceptionally(cause);
        assertSame(cause, failed.outcome(1, () -> new IllegalStateException("late")));

        SetupFuture broken = future();
        broken.completeExceptionally(new AssertionError("error"));
        assertThrows(AssertionError.class, () -> broken.outcome(1, () -> new IllegalStateException("late")));
    }
}
