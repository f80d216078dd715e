package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the library locks only private objects. An application thread that holds the
 * monitors of verbs4j's public objects (the completion queue, the queue pair, the context, the
 * work request and completion arrays) blocks none of the library's calls on another thread.
 */
class PrivateLocksHostTest extends StandInHostTest {
    @Test
    void aThreadHoldingTheMonitorsOfPublicObjectsBlocksNoLibraryCall() throws Exception {
        // more receive slots than CQ entries: every receive post takes the CQ's room lock
        QueuePair qp = o.rcQueuePair(8, StandInProvider.CQE + 1);
        CompletionQueue cq = o.cq;
        Context ctx = o.ctx;
        assertTrue(cq.isOvercommitted());
        WorkCompletions wcs = new WorkCompletions(4);
        ReceiveWorkRequests rwrs = new ReceiveWorkRequests(1, 1);
        rwrs.add(1).sge(o.mr, 0, 64);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Thread holder = Thread.ofPlatform().start(() -> {
            synchronized (cq) {
                synchronized (qp) {
                    synchronized (ctx) {
                        synchronized (wcs) {
                            synchronized (rwrs) {
                                held.countDown();
                                try {
                                    release.await();
                                } catch (InterruptedException e) {
                                    Thread.currentThread().interrupt();
                                }
                            }
                        }
                    }
                }
            }
        });
        ExecutorService library = Executors.newSingleThreadExecutor();
        try {
            assertTrue(held.await(30, TimeUnit.SECONDS));
            Future<Integer> calls = library.submit(() -> {
                qp.postRecv(rwrs); // the over-committed CQ's room check
                cq.handle(); // the raw views' arena, made on first use
                qp.handle();
                ctx.handle();
                wcs.segment();
                rwrs.segment();
                int polled = cq.poll(wcs);
                wcs.close(); // closes the views of wcs
                rwrs.close();
                qp.close(); // takes the QP out of the CQ's table
                return polled;
            });
            // bounded: before the library used private locks these calls waited for the holder
            assertEquals(0, calls.get(60, TimeUnit.SECONDS));
            assertTrue(holder.isAlive(), "the holder still held every monitor meanwhile");
        } finally {
            release.countDown();
            holder.join();
            library.shutdownNow();
        }
    }
}
