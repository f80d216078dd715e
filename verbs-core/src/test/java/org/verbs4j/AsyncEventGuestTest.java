package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier, on rxe0: asynchronous events and waits with timeouts on a real device.
 * <ul>
 *   <li>a CQ overrun (rxe frees send slots as it processes them, so signaled posts without
 *       polling overrun a small CQ) raises IBV_EVENT_CQ_ERR, and the CQ's next poll throws it;
 *   <li>concurrent waiters on the async queue and on a completion channel all return by their
 *       deadline, also when one of them gets a real completion event;
 *   <li>a close racing a wait ends the wait with EBADF;
 *   <li>open/close cycles, with and without the event thread, stay fast.
 * </ul>
 */
@RdmaTest
class AsyncEventGuestTest {
    private static final int WAITERS = 4;
    private static final long SLACK_MS = 1_500; // TCG guest, two emulated CPUs

    private record Outcome(long millis, Object result, Throwable thrown) {}

    private static List<Outcome> concurrently(int n, Callable<Object> wait, Runnable meanwhile, long boundMillis)
            throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(
                n, r -> Thread.ofPlatform().daemon().unstarted(r));
        try {
            CountDownLatch ready = new CountDownLatch(n);
            List<Future<Outcome>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(pool.submit(() -> {
                    ready.countDown();
                    ready.await();
                    long t0 = System.nanoTime();
                    try {
                        Object r = wait.call();
                        return new Outcome((System.nanoTime() - t0) / 1_000_000, r, null);
                    } catch (Throwable t) {
                        return new Outcome((System.nanoTime() - t0) / 1_000_000, null, t);
                    }
                }));
            }
            ready.await();
            meanwhile.run();
            List<Outcome> out = new ArrayList<>();
            for (Future<Outcome> f : fs) {
                try {
                    out.add(f.get(boundMillis, TimeUnit.MILLISECONDS));
                } catch (java.util.concurrent.TimeoutException e) {
                    fail("a waiter did not return within " + boundMillis + " ms");
                }
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    @org.junit.jupiter.api.Tag("unchecked")
    void aCqOverrunReachesTheNextPoll() {
        try (Context ctx = LoopbackPair.openTestDevice()) {
            ProtectionDomain pd = ctx.allocateProtectionDomain();
            CompletionQueue small = ctx.createCompletionQueue(16);
            CompletionQueue other = ctx.createCompletionQueue(256);
            QueuePair a =
                    pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, small).maxSendWr(16));
            QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, other));
            MemoryRegion src = pd.allocateMemoryRegion(4096);
            MemoryRegion dst = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            SendWorkRequests sends = new SendWorkRequests(1, 1);
            WorkCompletions wcs = new WorkCompletions(16);
            try {
                GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
                GuestSupport.connect(a, b, gid, EnumSet.of(Access.REMOTE_WRITE));
                int capacity = small.capacity();
                System.out.println("CQ of 16 requested, " + capacity + " granted; send queue " + a.maxSendWr());
                if (Verbs.CHECKED) {
                    // checked mode accounts for outstanding work: the post that could overrun is refused,
                    // nothing is lost, and there is no CQ_ERR (the unchecked guest JVM runs the overrun)
                    int accepted = 0;
                    QueueFullException refused = null;
                    for (int i = 0; i < 1_000 && refused == null; i++) {
                        try {
                            a.postSend(sends.clear()
                                    .write(i, dst.address(), dst.rkey())
                                    .sge(src, 0, 64)
                                    .signaled());
                            accepted++;
                        } catch (QueueFullException e) {
                            refused = e;
                        }
                    }
                    assertTrue(refused != null && accepted <= capacity, "accepted " + accepted + ", CQ " + capacity);
                    assertEquals(accepted, small.poll(wcs, accepted, java.time.Duration.ofSeconds(20)));
                    return;
                }
                // signaled single writes, never polled: more completions than the CQ holds
                int posted = 0, full = 0;
                int target = Math.max(1_000, capacity * 4);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                VerbsException refusedByEvent = null;
                while (posted < target && System.nanoTime() - deadline < 0) {
                    sends.clear()
                            .write(posted, dst.address(), dst.rkey())
                            .sge(src, 0, 64)
                            .signaled();
                    try {
                        a.postSend(sends);
                        posted++;
                    } catch (VerbsException e) {
                        if (e.getMessage().contains("IBV_EVENT_")) {
                            refusedByEvent = e; // the QP itself was failed by an event (rxe may error the QP too)
                            break;
                        }
                        if (e.errno() != Errno.ENOMEM) {
                            if (posted > small.capacity()) {
                                System.out.println("post #" + posted + " refused: " + e.getMessage());
                                break; // rxe may move the QP to error after the overrun
                            }
                            throw e;
                        }
                        full++; // the send queue is full for a moment: rxe frees slots as it processes them
                        Thread.onSpinWait();
                    }
                }
                System.out.println("posted " + posted + " signaled writes (" + full + " times the queue was full)"
                        + (refusedByEvent != null ? "; then the QP refused: " + refusedByEvent.getMessage() : ""));
                assertTrue(posted > capacity, "posted " + posted + " > capacity " + capacity);

                // the event thread routes IBV_EVENT_CQ_ERR to the CQ: its next poll throws (bounded wait)
                VerbsException overrun = null;
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (overrun == null && System.nanoTime() - until < 0) {
                    try {
                        if (small.poll(wcs) == 0) {
                            sleep(10); // completions reaped here would hide nothing: the CQ already overran
                        }
                    } catch (VerbsException e) {
                        overrun = e;
                    }
                }
                assertNotNull(overrun, "no IBV_EVENT_CQ_ERR reached the CQ within 20 s");
                System.out.println("poll after the overrun: " + overrun.getMessage());
                assertEquals("ibv_poll_cq", overrun.verb());
                assertTrue(overrun.getMessage().contains("IBV_EVENT_CQ_ERR"), overrun.getMessage());
                assertTrue(overrun.getMessage().contains("overran"), overrun.getMessage());
                assertTrue(overrun.getMessage().contains("size the CQ"), overrun.getMessage());

                // and it was queued for nextAsyncEvent
                List<AsyncEvent> seen = new ArrayList<>();
                Optional<AsyncEvent> ev;
                while ((ev = ctx.nextAsyncEvent(Duration.ofMillis(500))).isPresent()) {
                    seen.add(ev.get());
                }
                System.out.println("async events: " + seen);
                assertTrue(seen.stream().anyMatch(x -> x.type() == AsyncEvent.CQ_ERR), "CQ_ERR queued: " + seen);
            } finally {
                GuestSupport.closeAll(sends, wcs, a, b, src, dst, small, other, pd);
            }
        }
    }

    @Test
    void concurrentWaitersOnTheAsyncQueueReturnByTheirDeadline() throws Exception {
        try (Context ctx = LoopbackPair.openTestDevice()) {
            long timeout = 400;
            List<Outcome> out = concurrently(
                    WAITERS,
                    () -> ctx.nextAsyncEvent(Duration.ofMillis(timeout)),
                    () -> {},
                    timeout + SLACK_MS + 10_000);
            for (Outcome o : out) {
                System.out.println(
                        "nextAsyncEvent(" + timeout + " ms): " + o.millis + " ms, " + o.result + ", " + o.thrown);
                assertNull(o.thrown);
                assertTrue(o.millis >= timeout - 20 && o.millis <= timeout + SLACK_MS, o.millis + " ms");
            }
        }
    }

    @Test
    void concurrentChannelWaitersReturnByTheirDeadlineWhenOneGetsTheEvent() throws Exception {
        try (Context ctx = LoopbackPair.openTestDevice()) {
            ProtectionDomain pd = ctx.allocateProtectionDomain();
            CompletionChannel channel = ctx.createCompletionChannel();
            CompletionQueue cqE = ctx.createCompletionQueue(16, channel, 0);
            CompletionQueue cqS = ctx.createCompletionQueue(16);
            QueuePair s = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqS));
            QueuePair r = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqS, cqE));
            MemoryRegion mr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
            SendWorkRequests sends = new SendWorkRequests(1, 1);
            ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
            WorkCompletions wcs = new WorkCompletions(4);
            try {
                GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
                GuestSupport.connect(s, r, gid, Set.of());
                r.postRecv(recvs.add(1).sge(mr, 2048, 256));
                cqE.requestNotify(false);
                long timeout = 3_000;
                List<Outcome> out = concurrently(
                        WAITERS,
                        () -> channel.awaitEvent(Duration.ofMillis(timeout)),
                        () -> {
                            sleep(500);
                            s.postSend(sends.send(2).sge(mr, 0, 64).signaled());
                        },
                        timeout + SLACK_MS + 10_000);
                int got = 0;
                for (Outcome o : out) {
                    System.out.println(
                            "awaitEvent(" + timeout + " ms): " + o.millis + " ms, " + o.result + ", " + o.thrown);
                    assertNull(o.thrown, String.valueOf(o.thrown));
                    if (o.result != null) {
                        assertSame(cqE, o.result);
                        got++;
                    } else {
                        assertTrue(o.millis >= timeout - 20 && o.millis <= timeout + SLACK_MS, o.millis + " ms");
                    }
                }
                assertEquals(1, got, "exactly one waiter gets the one event");
                GuestSupport.awaitSuccess(cqE, wcs, 1);
                GuestSupport.awaitSuccess(cqS, wcs, 1);
            } finally {
                GuestSupport.closeAll(sends, recvs, wcs, s, r, mr, cqS, cqE, channel, pd);
            }
        }
    }

    @Test
    void closeRacingAWaitEndsItWithEbadf() throws Exception {
        Context ctx = LoopbackPair.openTestDevice();
        CompletionChannel channel = ctx.createCompletionChannel();
        long[] closeMillis = new long[2];
        List<Outcome> out = concurrently(
                WAITERS,
                () -> channel.awaitEvent(Duration.ofSeconds(60)),
                () -> {
                    sleep(300);
                    long t0 = System.nanoTime();
                    channel.close();
                    closeMillis[0] = (System.nanoTime() - t0) / 1_000_000;
                },
                20_000);
        for (Outcome o : out) {
            assertTrue(o.thrown instanceof VerbsException v && v.errno() == Errno.EBADF, String.valueOf(o.thrown));
        }
        out = concurrently(
                WAITERS,
                () -> ctx.nextAsyncEvent(Duration.ofSeconds(60)),
                () -> {
                    sleep(300);
                    long t0 = System.nanoTime();
                    ctx.close();
                    closeMillis[1] = (System.nanoTime() - t0) / 1_000_000;
                },
                20_000);
        for (Outcome o : out) {
            assertTrue(o.thrown instanceof VerbsException v && v.errno() == Errno.EBADF, String.valueOf(o.thrown));
        }
        System.out.println("close with " + WAITERS + " waiters: channel " + closeMillis[0] + " ms, context "
                + closeMillis[1] + " ms");
        assertFalse(ctx.isOpen());
        // generous: the first wake-up links the exception paths' method handles, slow under TCG
        assertTrue(closeMillis[0] < 15_000 && closeMillis[1] < 15_000, closeMillis[0] + " / " + closeMillis[1] + " ms");
    }

    @Test
    void openCloseCyclesStayFast() {
        int cycles = 200;
        long t0 = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            LoopbackPair.openTestDevice().close();
        }
        long plain = (System.nanoTime() - t0) / 1_000_000;
        t0 = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            Context ctx = LoopbackPair.openTestDevice();
            ctx.createCompletionQueue(1).close(); // starts the event thread; the context's close joins it
            assertTrue(ctx.asyncEvents.isRunning());
            ctx.close();
            assertFalse(ctx.asyncEvents.isRunning());
        }
        long withThread = (System.nanoTime() - t0) / 1_000_000;
        System.out.println(
                cycles + " open/close cycles: " + plain + " ms; with a CQ and the event thread: " + withThread + " ms");
    }
}
