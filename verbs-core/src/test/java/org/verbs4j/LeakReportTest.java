package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

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
        assertTrue(LeakReport.leaksReported() >= before + 3,
                "3 leaks expected, reported " + (LeakReport.leaksReported() - before));
    }
}
