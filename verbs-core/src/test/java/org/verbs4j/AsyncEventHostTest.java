package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: waits with a timeout hold with any number of concurrent waiters, a close racing a
 * wait ends it with EBADF and never frees what a waiter uses, async events reach the next poll or
 * post of the object they name, and open/close with the event thread stays fast. The context and
 * channel are the stand-in provider's fakes; their fds are an eventfd and a pipe this test owns
 * (blocking, as the kernel hands them out). Written once, they are readable once: every waiter's
 * poll wakes, one read drains them (a short read, which libibverbs' get-event calls reject before
 * touching the event: an 8-byte eventfd value for the 16-byte async event, 1 byte for the 8-byte
 * completion event), and the others find nothing: exactly the "another thread took it" case
 * that used to block them until the next event.
 */
@NeedsNativeToolchain
class AsyncEventHostTest {
    private static final int WAITERS = 4;
    private static final long SLACK_MS = 750;

    private StandInProvider p;
    private Arena arena;
    private int asyncFd = -1;
    private int channelFd = -1;
    private int channelWriteFd = -1;
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @BeforeEach
    void open() {
        p = StandInProvider.open();
        arena = Arena.ofShared();
        asyncFd = LibC.eventFd("test", 0);
        int[] pipe = pipe();
        channelFd = pipe[0];
        channelWriteFd = pipe[1];
        assertFalse(LibC.isNonBlocking(asyncFd), "a blocking fd, as the kernel's async fd");
    }

    @AfterEach
    void close() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            if (toClose.get(i) instanceof NativeResource r && !r.isOpen()) {
                continue;
            }
            toClose.get(i).close();
        }
        arena.close();
        p.close();
        LibC.close(asyncFd);
        LibC.close(channelFd);
        LibC.close(channelWriteFd);
    }

    private static final java.lang.invoke.MethodHandle PIPE = java.lang.foreign.Linker.nativeLinker()
            .downcallHandle(
                    java.lang.foreign.Linker.nativeLinker().defaultLookup().findOrThrow("pipe"),
                    java.lang.foreign.FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final java.lang.invoke.MethodHandle WRITE = java.lang.foreign.Linker.nativeLinker()
            .downcallHandle(
                    java.lang.foreign.Linker.nativeLinker().defaultLookup().findOrThrow("write"),
                    java.lang.foreign.FunctionDescriptor.of(
                            java.lang.foreign.ValueLayout.JAVA_LONG,
                            JAVA_INT,
                            ADDRESS,
                            java.lang.foreign.ValueLayout.JAVA_LONG));

    private static int[] pipe() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fds = a.allocate(8, 4);
            assertEquals(0, (int) PIPE.invokeExact(fds));
            return new int[] {fds.get(JAVA_INT, 0), fds.get(JAVA_INT, 4)};
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** One byte into the channel's pipe: readable once, and a short read for ibv_get_cq_event. */
    private void writeOneByte() {
        try (Arena a = Arena.ofConfined()) {
            assertEquals(1L, (long) WRITE.invokeExact(channelWriteFd, a.allocate(1), 1L));
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** A borrowed context on a fresh stand-in ibv_context whose async fd is {@code fd}. */
    private Context context(int fd) {
        MemorySegment raw = p.makeContext(true);
        raw.set(JAVA_INT, ContextLayout.ASYNC_FD, fd);
        Context ctx = ForeignHandles.context(raw, "standin0");
        toClose.add(ctx);
        return ctx;
    }

    /** A completion channel on a fake ibv_comp_channel {context, fd, refcnt} that releases nothing. */
    private CompletionChannel channel(Context ctx, int fd) {
        MemorySegment ch = arena.allocate(16, 8);
        ch.set(ADDRESS, 0, ctx.handle);
        ch.set(JAVA_INT, ObjectLayout.COMP_CHANNEL_FD, fd);
        CompletionChannel c = new CompletionChannel(ctx, ch, h -> {});
        toClose.add(c);
        return c;
    }

    /** What one waiter saw: how long it took and how it ended. */
    private record Outcome(long millis, Object result, Throwable thrown) {}

    /** Runs {@code n} copies of {@code wait} at once; {@code meanwhile} runs once they all started. */
    private static List<Outcome> concurrently(int n, Callable<Object> wait, Runnable meanwhile, long boundMillis)
            throws Exception {
        // daemon threads: a waiter stuck in a blocking get-event call must fail the test, not hang the JVM
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
                    fail("a waiter did not return within " + boundMillis + " ms (blocked in a get-event call?)");
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

    // ---- timeouts hold with concurrent waiters ----------------------------------------------

    @Test
    void concurrentAsyncEventWaitersAllReturnByTheirDeadline() throws Exception {
        Context ctx = context(asyncFd);
        long timeout = 400;
        List<Outcome> out = concurrently(
                WAITERS,
                () -> ctx.nextAsyncEvent(Duration.ofMillis(timeout)),
                () -> {
                    sleep(100);
                    LibC.signalEventFd("test", asyncFd); // readable once: the event thread's short read drains it
                },
                timeout + SLACK_MS + 5_000);
        for (Outcome o : out) {
            System.out.println("nextAsyncEvent(" + timeout + " ms) returned after " + o.millis + " ms: "
                    + (o.thrown != null ? o.thrown : o.result));
            assertNull(o.thrown, "no exception: " + o.thrown);
            assertEquals(Optional.empty(), o.result);
            assertTrue(o.millis >= timeout - 20 && o.millis <= timeout + SLACK_MS, o.millis + " ms");
        }
        assertTrue(ctx.asyncEvents.isRunning(), "the event thread runs");
        assertTrue(LibC.isNonBlocking(asyncFd), "the async fd was made non-blocking");
    }

    @Test
    void concurrentCompletionChannelWaitersAllReturnByTheirDeadline() throws Exception {
        Context ctx = context(-1);
        CompletionChannel ch = channel(ctx, channelFd);
        long timeout = 400;
        List<Outcome> out = concurrently(
                WAITERS,
                () -> ch.awaitEvent(Duration.ofMillis(timeout)),
                () -> {
                    sleep(100);
                    writeOneByte(); // every waiter's poll wakes; one read drains it
                },
                timeout + SLACK_MS + 5_000);
        int errors = 0;
        for (Outcome o : out) {
            System.out.println("awaitEvent(" + timeout + " ms) returned after " + o.millis + " ms: "
                    + (o.thrown != null ? o.thrown : o.result));
            if (o.thrown != null) {
                // the one that drained the eventfd made a short read, which ibv_get_cq_event reports as a failure
                assertTrue(
                        o.thrown instanceof VerbsException v && v.verb().equals("ibv_get_cq_event"),
                        o.thrown.toString());
                errors++;
                assertTrue(o.millis <= timeout + SLACK_MS, o.millis + " ms");
            } else {
                assertNull(o.result);
                assertTrue(o.millis >= timeout - 20 && o.millis <= timeout + SLACK_MS, o.millis + " ms");
            }
        }
        assertTrue(errors <= 1, "at most the one reader fails: " + errors);
        assertTrue(LibC.isNonBlocking(channelFd), "the channel fd was made non-blocking");
    }

    @Test
    void aZeroTimeoutReturnsAtOnce() {
        Context ctx = context(asyncFd);
        CompletionChannel ch = channel(ctx, channelFd);
        long t0 = System.nanoTime();
        assertEquals(Optional.empty(), ctx.nextAsyncEvent(Duration.ZERO));
        assertNull(ch.awaitEvent(Duration.ZERO));
        assertTrue((System.nanoTime() - t0) / 1_000_000 < 500);
    }

    // ---- close racing a wait ------------------------------------------------------------------

    @Test
    void closingAContextEndsItsAsyncEventWaitersWithEbadf() throws Exception {
        Context ctx = context(asyncFd);
        long[] closeMillis = new long[1];
        List<Outcome> out = concurrently(
                WAITERS,
                () -> ctx.nextAsyncEvent(Duration.ofSeconds(30)),
                () -> {
                    sleep(200);
                    long t0 = System.nanoTime();
                    ctx.close();
                    closeMillis[0] = (System.nanoTime() - t0) / 1_000_000;
                },
                5_000);
        System.out.println("Context.close() with " + WAITERS + " waiters took " + closeMillis[0] + " ms");
        assertTrue(closeMillis[0] < 2_000, closeMillis[0] + " ms");
        for (Outcome o : out) {
            assertTrue(o.thrown instanceof VerbsException, String.valueOf(o.thrown));
            VerbsException e = (VerbsException) o.thrown;
            assertEquals("ibv_get_async_event", e.verb());
            assertEquals(Errno.EBADF, e.errno());
            assertTrue(o.millis < 3_000, o.millis + " ms");
        }
        assertFalse(ctx.asyncEvents.isRunning(), "the event thread was joined");
        assertEquals(
                Errno.EBADF,
                assertThrows(VerbsException.class, () -> ctx.nextAsyncEvent(Duration.ofMillis(10)))
                        .errno());
    }

    @Test
    void closingAChannelEndsItsWaitersWithEbadfBeforeDestroyingIt() throws Exception {
        Context ctx = context(-1);
        MemorySegment raw = arena.allocate(16, 8);
        raw.set(ADDRESS, 0, ctx.handle);
        raw.set(JAVA_INT, ObjectLayout.COMP_CHANNEL_FD, channelFd);
        java.util.concurrent.atomic.AtomicReference<CompletionChannel> self =
                new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicInteger waitersAtDestroy = new java.util.concurrent.atomic.AtomicInteger(-1);
        CompletionChannel ch = new CompletionChannel(
                ctx, raw, h -> waitersAtDestroy.set(self.get().waiters()));
        self.set(ch);
        toClose.add(ch);
        long[] closeMillis = new long[1];
        List<Outcome> out = concurrently(
                WAITERS,
                () -> ch.awaitEvent(Duration.ofSeconds(30)),
                () -> {
                    while (ch.waiters() < WAITERS) {
                        Thread.onSpinWait();
                    }
                    sleep(200);
                    long t0 = System.nanoTime();
                    ch.close();
                    closeMillis[0] = (System.nanoTime() - t0) / 1_000_000;
                },
                5_000);
        System.out.println("CompletionChannel.close() with " + WAITERS + " waiters took " + closeMillis[0] + " ms");
        assertTrue(closeMillis[0] < 2_000, closeMillis[0] + " ms");
        assertEquals(0, waitersAtDestroy.get(), "threads inside awaitEvent when the channel was destroyed");
        for (Outcome o : out) {
            assertTrue(
                    o.thrown instanceof VerbsException v
                            && v.errno() == Errno.EBADF
                            && v.verb().equals("ibv_get_cq_event"),
                    String.valueOf(o.thrown));
            assertTrue(o.millis < 3_000, o.millis + " ms");
        }
    }

    // ---- routing ----------------------------------------------------------------------------

    /** The stand-in's RC queue pair in {@code state}, on a domain and a completion queue of {@code ctx} (all closed after the test). */
    private QueuePair rcQueuePair(Context ctx, QueuePairState state) {
        ProtectionDomain pd = ForeignHandles.protectionDomain(ctx, p.pd());
        toClose.add(pd);
        CompletionQueue cq = ForeignHandles.completionQueue(ctx, p.cq());
        toClose.add(cq);
        QueuePair qp = ForeignHandles.queuePair(
                pd, p.qp(), QueuePairInit.of(QueuePairType.RC, cq).maxSendSge(1).maxRecvSge(1), state);
        toClose.add(qp);
        return qp;
    }

    @Test
    void fatalEventsReachTheNextPollOrPostOfTheirObject() {
        Context ctx = context(-1);
        QueuePair qp = rcQueuePair(ctx, QueuePairState.RTS);
        ProtectionDomain pd = qp.protectionDomain();
        CompletionQueue cq = qp.sendCq;
        MemoryRegion mr =
                ForeignHandles.memoryRegion(pd, arena.allocate(4096, 64), 1, 2, EnumSet.of(Access.LOCAL_WRITE));
        toClose.add(mr);
        try (WorkCompletions wcs = new WorkCompletions(4);
                SendWorkRequests sends = new SendWorkRequests(4, 1);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(4, 1)) {
            assertEquals(0, cq.poll(wcs), "usable before any event");

            ctx.asyncEvents.deliver(new AsyncEvent(AsyncEvent.CQ_ERR, "CQ error", -1, -1), cq.address);
            long polls = p.calls(StandInProvider.Op.POLL_CQ);
            VerbsException e = HostMisuseTest.refused(
                    "ibv_poll_cq",
                    Errno.EIO,
                    () -> cq.poll(wcs),
                    "IBV_EVENT_CQ_ERR",
                    "overran",
                    "completions were lost",
                    "size the CQ",
                    "poll it more often");
            System.out.println(e.getMessage());
            HostMisuseTest.refused(
                    "ibv_poll_cq", Errno.EIO, () -> cq.poll(wcs, 1, Duration.ofMillis(10)), "IBV_EVENT_CQ_ERR");
            assertEquals(polls, p.calls(StandInProvider.Op.POLL_CQ), "refused before the provider");

            sends.send(1).sge(mr, 0, 8).signaled();
            qp.postSend(sends);
            assertEquals(1, p.calls(StandInProvider.Op.POST_SEND), "the CQ's failure is not the QP's");
            ctx.asyncEvents.deliver(
                    new AsyncEvent(
                            AsyncEvent.QP_FATAL, "local work queue catastrophic error", StandInProvider.QP_NUM, -1),
                    qp.address);
            e = HostMisuseTest.refused(
                    "ibv_post_send",
                    Errno.EIO,
                    () -> qp.postSend(sends),
                    "IBV_EVENT_QP_FATAL",
                    "QP " + StandInProvider.QP_NUM,
                    "error state",
                    "reset()");
            System.out.println(e.getMessage());
            recvs.add(2).sge(mr, 0, 8);
            HostMisuseTest.refused("ibv_post_recv", Errno.EIO, () -> qp.postRecv(recvs), "IBV_EVENT_QP_FATAL");
            assertEquals(1, p.calls(StandInProvider.Op.POST_SEND));
            assertEquals(0, p.calls(StandInProvider.Op.POST_RECV));

            // queued for nextAsyncEvent, in order
            assertEquals(
                    AsyncEvent.CQ_ERR,
                    ctx.nextAsyncEvent(Duration.ZERO).orElseThrow().type());
            AsyncEvent qe = ctx.nextAsyncEvent(Duration.ZERO).orElseThrow();
            assertEquals(AsyncEvent.QP_FATAL, qe.type());
            assertEquals("IBV_EVENT_QP_FATAL", qe.typeName());
            assertTrue(qe.isFatal());
            assertEquals(Optional.empty(), ctx.nextAsyncEvent(Duration.ZERO));

            // an unknown address and a non-fatal event route nowhere and change nothing
            ctx.asyncEvents.deliver(new AsyncEvent(AsyncEvent.CQ_ERR, "CQ error", -1, -1), 0x1234);
            ctx.asyncEvents.deliver(new AsyncEvent(AsyncEvent.PORT_ACTIVE, "port active", -1, 1), 1);
            assertEquals(
                    AsyncEvent.CQ_ERR,
                    ctx.nextAsyncEvent(Duration.ZERO).orElseThrow().type());
            assertEquals(
                    AsyncEvent.PORT_ACTIVE,
                    ctx.nextAsyncEvent(Duration.ZERO).orElseThrow().type());
            assertEquals(Optional.empty(), ctx.deviceFailure());
        }
    }

    @Test
    void lastWqeReachedMarksItsQueuePairOnly() {
        Context ctx = context(-1);
        QueuePair qp = rcQueuePair(ctx, QueuePairState.ERR);
        assertFalse(qp.lastWqeReached(), "not before the event");
        ctx.asyncEvents.deliver(
                new AsyncEvent(AsyncEvent.QP_LAST_WQE_REACHED, "last WQE reached", StandInProvider.QP_NUM, -1),
                qp.address + 64); // another queue pair's address
        assertFalse(qp.lastWqeReached(), "another queue pair's event");
        ctx.asyncEvents.deliver(
                new AsyncEvent(AsyncEvent.QP_LAST_WQE_REACHED, "last WQE reached", StandInProvider.QP_NUM, -1),
                qp.address);
        assertTrue(qp.lastWqeReached(), "marked by its event");
        assertEquals(
                AsyncEvent.QP_LAST_WQE_REACHED,
                ctx.nextAsyncEvent(Duration.ZERO).orElseThrow().type(),
                "still queued for nextAsyncEvent");
    }

    @Test
    void deviceFatalReachesEveryObjectAndTheContext() {
        Context ctx = context(-1);
        CompletionQueue cq = ForeignHandles.completionQueue(ctx, p.cq());
        toClose.add(cq);
        ctx.asyncEvents.deliver(new AsyncEvent(AsyncEvent.DEVICE_FATAL, "local catastrophic error", -1, -1), 0);
        assertEquals(AsyncEvent.DEVICE_FATAL, ctx.deviceFailure().orElseThrow().type());
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            HostMisuseTest.refused(
                    "ibv_poll_cq", Errno.EIO, () -> cq.poll(wcs), "IBV_EVENT_DEVICE_FATAL", "open the device again");
            CompletionQueue later = ForeignHandles.completionQueue(ctx, p.makeCq(p.context(), 16));
            toClose.add(later);
            HostMisuseTest.refused("ibv_poll_cq", Errno.EIO, () -> later.poll(wcs), "IBV_EVENT_DEVICE_FATAL");
        }
    }

    @Test
    void aClosedObjectIsUnregisteredAndAnotherAtItsAddressStartsClean() {
        Context ctx = context(-1);
        CompletionQueue cq = ForeignHandles.completionQueue(ctx, p.cq());
        cq.close();
        ctx.asyncEvents.deliver(new AsyncEvent(AsyncEvent.CQ_ERR, "CQ error", -1, -1), cq.address);
        CompletionQueue again = ForeignHandles.completionQueue(ctx, p.cq());
        toClose.add(again);
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            assertEquals(0, again.poll(wcs), "the event was for the closed one");
        }
        assertEquals(
                AsyncEvent.CQ_ERR,
                ctx.nextAsyncEvent(Duration.ZERO).orElseThrow().type(),
                "still queued");
    }

    // ---- open/close stays fast ------------------------------------------------------------------

    @Test
    void tenThousandOpenCloseCyclesWithTheEventThreadStayFast() {
        MemorySegment raw = p.makeContext(true);
        raw.set(JAVA_INT, ContextLayout.ASYNC_FD, asyncFd);
        int cycles = 10_000;
        long t0 = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            Context ctx = ForeignHandles.context(raw, "standin0");
            ctx.asyncEvents.ensureStarted();
            ctx.close();
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.println(
                cycles + " open/start-event-thread/close cycles: " + ms + " ms (" + (ms * 1000 / cycles) + " us each)");
        assertTrue(ms < 60_000, ms + " ms");
        long threads = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().startsWith("verbs4j-async-"))
                .count();
        assertEquals(0, threads, "every event thread was joined");
    }
}
