package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.verbs4j.internal.CoreAccess;

/** Work-request chains and completion arrays dropped unclosed are freed and reported, never hidden. */
class LeakReportTest {

    private static void dropUnclosed() {
        new SendWorkRequests(4, 1);
        new ReceiveWorkRequests(4, 1);
        new WorkCompletions(4);
    }

    @Test
    void droppedChainsAndArraysAreReportedAndFreed() throws InterruptedException {
        long before = LeakReport.leaksReported();
        dropUnclosed();
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (LeakReport.leaksReported() < before + 3 && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(20);
        }
        assertTrue(
                LeakReport.leaksReported() >= before + 3,
                "3 leaks expected, reported " + (LeakReport.leaksReported() - before));
    }

    private static Runnable registerDropped(AtomicInteger released, CountDownLatch ran, boolean close) {
        Object owner = new Object();
        Runnable closed = CoreAccess.get().reportLeaks(owner, "test object", () -> {
            released.incrementAndGet();
            ran.countDown();
        });
        if (close) {
            closed.run();
        }
        return closed;
    }

    /** What the connection manager registers: the release action runs once for a dropped owner, never for a closed one. */
    @Test
    void aDroppedOwnersReleaseActionRunsOnceAndAClosedOnesNever() throws InterruptedException {
        long before = CoreAccess.get().leaksReported();
        AtomicInteger released = new AtomicInteger();
        CountDownLatch ran = new CountDownLatch(1);
        registerDropped(released, ran, true);
        registerDropped(released, ran, false);
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (ran.getCount() > 0 && System.nanoTime() < deadline) {
            System.gc();
            ran.await(20, TimeUnit.MILLISECONDS);
        }
        for (int i = 0; i < 10; i++) { // give the closed one every chance to be (wrongly) released too
            System.gc();
            Thread.sleep(20);
        }
        assertEquals(1, released.get(), "release actions run");
        assertTrue(CoreAccess.get().leaksReported() >= before + 1, "the dropped owner was reported");
    }

    /** No stack trace per object unless asked for: a dropped owner is still reported (above), naming its kind. */
    @Test
    void theCreationSiteIsRecordedOnlyWhenAsked() {
        Object owner = new Object();
        LeakReport r = new LeakReport(owner, "test object");
        try {
            assertEquals(
                    Boolean.getBoolean(NativeResource.LEAK_SITES_PROPERTY),
                    r.recordedSite(),
                    "a site is recorded exactly when -D" + NativeResource.LEAK_SITES_PROPERTY + "=true");
            if (System.getProperty(NativeResource.LEAK_SITES_PROPERTY) == null) {
                assertFalse(r.recordedSite(), "no stack trace by default");
            }
        } finally {
            r.closed();
            java.lang.ref.Reference.reachabilityFence(owner);
        }
    }
}
