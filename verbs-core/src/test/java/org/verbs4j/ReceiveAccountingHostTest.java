package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: checked mode counts a receive as outstanding before the provider sees it, as it does
 * a send. The race is made deterministic: the context's {@code post_recv} op is a Java upcall
 * that, inside the post, queues the receive's completion and has a poller on another thread reap
 * it before the post returns, exactly what a fast adapter and a busy poller can do. The count the
 * poller leaves behind must never be negative (a negative count loosens the overrun check of a
 * shared completion queue).
 */
@NeedsNativeToolchain
class ReceiveAccountingHostTest {
    /** What the post_recv op does, set per test. */
    private static final AtomicReference<PostRecvHook> HOOK = new AtomicReference<>();

    interface PostRecvHook {
        int post(long qp, long wr, long badWr) throws Exception;
    }

    /** The upcall target installed as the context's post_recv op. */
    static int postRecv(long qp, long wr, long badWr) {
        try {
            return HOOK.get().post(qp, wr, badWr);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private StandInProvider p;
    private Arena arena;
    private StandInObjects o;

    @BeforeEach
    void open() throws Exception {
        p = StandInProvider.open();
        arena = Arena.ofShared();
        MemorySegment context = p.makeContext(true);
        MemorySegment stub = Linker.nativeLinker()
                .upcallStub(
                        MethodHandles.lookup()
                                .findStatic(
                                        ReceiveAccountingHostTest.class,
                                        "postRecv",
                                        java.lang.invoke.MethodType.methodType(
                                                int.class, long.class, long.class, long.class)),
                        FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG),
                        arena);
        context.set(ValueLayout.ADDRESS, ContextLayout.OPS_POST_RECV, stub);
        // an op that calls back into Java must be an ordinary downcall, whatever the provider
        o = new StandInObjects(p, arena, context, ForeignHandles.context(context, "standin-upcall0", false));
    }

    @AfterEach
    void close() {
        HOOK.set(null);
        o.close();
        arena.close();
        p.close();
    }

    private QueuePair qp() {
        return o.rcQueuePair(8, 8);
    }

    @Test
    void aReceiveReapedByAnotherThreadBeforeItsPostReturnsNeverCountsNegative() throws Exception {
        QueuePair qp = qp();
        long[] seenByPoller = {Long.MIN_VALUE};
        int[] reaped = {-1};
        AtomicReference<Throwable> pollerFailure = new AtomicReference<>();
        HOOK.set((qpAddr, wr, badWr) -> {
            long wrId = MemorySegment.ofAddress(wr).reinterpret(8).get(JAVA_LONG, 0);
            assertEquals(
                    0,
                    p.queueCompletion(
                            wrId, CompletionStatus.SUCCESS, CompletionOpcode.RECV, 64, StandInProvider.QP_NUM));
            Thread poller = Thread.ofPlatform().start(() -> {
                try (WorkCompletions wcs = new WorkCompletions(4)) {
                    reaped[0] = o.cq.poll(wcs, 1, Duration.ofSeconds(30));
                    seenByPoller[0] = qp.recvOutstanding();
                } catch (Throwable t) {
                    pollerFailure.set(t);
                }
            });
            poller.join();
            return 0;
        });
        try (ReceiveWorkRequests rwrs = new ReceiveWorkRequests(1, 1)) {
            rwrs.add(77).sge(o.mr, 0, 64);
            qp.postRecv(rwrs);
        } finally {
            qp.close();
        }
        assertNull(pollerFailure.get());
        assertEquals(1, reaped[0], "the poller reaped the receive inside post_recv");
        assertEquals(0, seenByPoller[0], "receives outstanding after the poller credited the completion");
        assertEquals(0, qp.recvOutstanding(), "after the post returned");
    }

    @Test
    void receivesTheProviderRefusedAreTakenBackFromTheCount() {
        QueuePair qp = qp();
        long[] seenInsidePost = {Long.MIN_VALUE};
        HOOK.set((qpAddr, wr, badWr) -> {
            seenInsidePost[0] = qp.recvOutstanding();
            // refuse the second request of the chain: *bad_wr = its address
            long second = MemorySegment.ofAddress(wr).reinterpret(32).get(JAVA_LONG, 8);
            MemorySegment.ofAddress(badWr).reinterpret(8).set(JAVA_LONG, 0, second);
            return Errno.ENOMEM;
        });
        try (ReceiveWorkRequests rwrs = new ReceiveWorkRequests(3, 1)) {
            rwrs.add(1).sge(o.mr, 0, 64).add(2).sge(o.mr, 64, 64).add(3).sge(o.mr, 128, 64);
            VerbsException e = assertThrows(VerbsException.class, () -> qp.postRecv(rwrs));
            assertEquals(Errno.ENOMEM, e.errno());
            assertTrue(e.getMessage().contains("work request #1 of 3"), e.getMessage());
        } finally {
            qp.close();
        }
        assertEquals(3, seenInsidePost[0], "the whole chain counts while the provider has it");
        assertEquals(1, qp.recvOutstanding(), "only the request before the refused one stays counted");
    }
}
