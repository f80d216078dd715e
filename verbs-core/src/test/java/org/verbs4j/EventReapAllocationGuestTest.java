package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.ThreadAllocation.allocated;

import java.util.EnumSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.internal.LoopWaiter;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier, rxe: an event loop's reap of a <em>real</em> completion event ({@link
 * LoopWaiter#nextEvent}: {@code ibv_get_cq_event}, the CQ looked up by its address, the event
 * counted for its batched acknowledgement) and the poll of the completion it announced allocate
 * no heap memory, counted by the thread's allocated bytes around each reap of many events on an
 * RC loopback pair whose receiving CQ has a completion channel. The empty channel's reap is
 * LoopReapAllocationHostTest's; this one takes the branch that finds a CQ.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class EventReapAllocationGuestTest {
    private static final int WARM_EVENTS = 4_000, EVENTS = 1_000, EMPTY_REAPS = 10;

    private Context ctx;
    private ProtectionDomain pd;
    private CompletionChannel channel;
    private CompletionQueue cqA, cqB;
    private QueuePair a, b;
    private MemoryRegion aMr, bMr;
    private ReceiveWorkRequests recv;
    private SendWorkRequests send;
    private WorkCompletions wcs;
    private LoopWaiter waiter;

    @BeforeAll
    void open() {
        ctx = LoopbackPair.openTestDevice();
        pd = ctx.allocateProtectionDomain();
        channel = ctx.createCompletionChannel();
        cqA = ctx.createCompletionQueue(64, channel, 0);
        cqB = ctx.createCompletionQueue(64);
        a = pd.createQueuePair(
                QueuePairInit.of(QueuePairType.RC, cqA).maxSendWr(16).maxRecvWr(16));
        b = pd.createQueuePair(
                QueuePairInit.of(QueuePairType.RC, cqB).maxSendWr(16).maxRecvWr(16));
        GuestSupport.connect(a, b, ctx.firstRoceV2Ipv4Gid(1).orElseThrow(), EnumSet.noneOf(Access.class));
        aMr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
        bMr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
        recv = new ReceiveWorkRequests(1, 1);
        send = new SendWorkRequests(1, 1);
        wcs = new WorkCompletions(4);
        waiter = new LoopWaiter("EventReapAllocationGuestTest");
    }

    @AfterAll
    void close() {
        waiter.close();
        recv.close();
        send.close();
        wcs.close();
        GuestSupport.closeAll(a, b, aMr, bMr, cqA, cqB, channel, pd, ctx);
    }

    /**
     * Arms cqA, has B send one message into a receive posted on A (B's completion reaped), then
     * reaps the event it raised and polls A's completion; returns the heap bytes the reaps and
     * the poll allocated.
     */
    private long oneEvent(long i) {
        cqA.requestNotify(false);
        a.postRecv(recv.clear().add(i).sge(aMr, 0, 256));
        b.postSend(send.clear().send(i).sge(bMr, 0, 64).signaled());
        GuestSupport.awaitSuccess(cqB, wcs, 1);
        long bytes = 0;
        CompletionQueue got = null;
        for (int tries = 0; got == null; tries++) {
            long before = allocated();
            for (int k = 0; k < EMPTY_REAPS && got == null; k++) {
                got = waiter.nextEvent(channel);
            }
            bytes += allocated() - before;
            if (got == null) { // not raised yet: wait on the fd as the loop does (not counted)
                assertTrue(tries < 1_000, "no event for receive " + i);
                waiter.await("EventReapAllocationGuestTest", channel.fd(), 1_000);
            }
        }
        long before = allocated();
        int n = cqA.poll(wcs);
        long wrId = wcs.wrId(0);
        boolean ok = wcs.isSuccess(0);
        bytes += allocated() - before;
        assertSame(cqA, got, "the event names the CQ that got the completion");
        assertEquals(1, n);
        assertEquals(i, wrId);
        assertTrue(ok);
        return bytes;
    }

    @Test
    void reapingRealEventsAllocatesNothing() {
        for (int i = 0; i < WARM_EVENTS; i++) { // warm: the figure counted is the compiled code's
            oneEvent(i);
        }
        long bytes = 0;
        for (int i = 0; i < EVENTS; i++) {
            bytes += oneEvent(WARM_EVENTS + i);
        }
        assertNull(waiter.nextEvent(channel), "one event per completion, no more");
        System.out.printf("[event-reap] heap bytes allocated: %d over %d real events reaped%n", bytes, EVENTS);
        assertEquals(0, bytes, "heap bytes allocated by reaping " + EVENTS + " real completion events");
    }
}
