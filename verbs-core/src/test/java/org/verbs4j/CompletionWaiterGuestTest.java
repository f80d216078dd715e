package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier, rxe: {@link CompletionWaiter} on an RC loopback pair whose receiving side's CQ has a
 * completion channel. The spin path reaps a receive without blocking; the block path arms the CQ
 * and sleeps on the channel until the peer sends, which it does only once the waiter is seen
 * parked on the channel (the channel's parked count), so the block is proven by the event
 * count, not by timing. Timeouts and interrupts: CompletionWaiterHostTest.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class) // spin first: the block path leaves nothing armed behind it
class CompletionWaiterGuestTest {
    private Context ctx;
    private ProtectionDomain pd;
    private CompletionChannel channel;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private QueuePair a;
    private QueuePair b;
    private MemoryRegion aMr;
    private MemoryRegion bMr;

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
        GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        GuestSupport.connect(a, b, gid, EnumSet.noneOf(Access.class));
        aMr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
        bMr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(a, b, aMr, bMr, cqA, cqB, channel, pd, ctx);
    }

    /** A receives one message, B sends it (B's send completion reaped from cqB). */
    private void postReceive(long wrId) {
        try (ReceiveWorkRequests r = new ReceiveWorkRequests(1, 1)) {
            r.add(wrId).sge(aMr, 0, 256);
            a.postRecv(r);
        }
    }

    private void sendFromB(long wrId) {
        try (SendWorkRequests s = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(1)) {
            s.send(wrId).sge(bMr, 0, 64).signaled();
            b.postSend(s);
            GuestSupport.awaitSuccess(cqB, wcs, 1);
        }
    }

    @Test
    @Order(1)
    void theSpinPathReapsWithoutBlocking() {
        CompletionWaiter spinner = new CompletionWaiter(cqA, Long.MAX_VALUE);
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            postReceive(11);
            sendFromB(21);
            assertEquals(1, spinner.await(wcs, 1, Duration.ofSeconds(60)));
            assertEquals(11, wcs.wrId(0));
            assertEquals(CompletionOpcode.RECV, wcs.opcode(0));
            assertTrue(wcs.isSuccess(0));
            assertEquals(0, spinner.blocks(), "a spin budget without end never blocks");
            assertEquals(0, spinner.events());
        }
    }

    @Test
    @Order(2)
    void theBlockPathSleepsOnTheChannelUntilThePeerSends() throws Exception {
        // one block for the whole wait: the peer sends while the waiter is parked on the channel,
        // so the completion's event (the CQ was armed before the block) is what wakes it
        CompletionWaiter blocker = new CompletionWaiter(cqA, 0);
        AtomicReference<Throwable> peerFailure = new AtomicReference<>();
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            postReceive(12);
            Thread peer = Thread.ofPlatform().start(() -> {
                try {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                    while (channel.parked() == 0 && System.nanoTime() < deadline) {
                        Thread.sleep(1);
                    }
                    sendFromB(22);
                } catch (Throwable t) {
                    peerFailure.set(t);
                }
            });
            int n = blocker.await(wcs, 1, Duration.ofSeconds(90));
            peer.join();
            assertEquals(null, peerFailure.get());
            assertEquals(1, n);
            assertEquals(12, wcs.wrId(0));
            assertTrue(wcs.isSuccess(0));
            assertEquals(1, blocker.blocks(), "one block on the channel");
            assertEquals(1, blocker.events(), "woken by the completion's event");
            System.out.println("[CompletionWaiterGuestTest] block path: " + blocker.blocks() + " channel waits, "
                    + blocker.events() + " events");
        }
    }

    @Test
    @Order(3)
    void aVirtualThreadParkedOnTheChannelIsWokenByTheEvent() throws Exception {
        CompletionWaiter blocker = new CompletionWaiter(cqA, 0);
        AtomicReference<Object> outcome = new AtomicReference<>("did not return");
        AtomicReference<Boolean> virtual = new AtomicReference<>();
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            postReceive(13);
            Thread waiter = Thread.ofVirtual().start(() -> {
                virtual.set(Thread.currentThread().isVirtual());
                try {
                    outcome.set(blocker.await(wcs, 1, Duration.ofSeconds(Long.MAX_VALUE)));
                } catch (Throwable t) {
                    outcome.set(t);
                }
            });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (channel.parked() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertEquals(1, channel.parked(), "the virtual waiter parked on the channel");
            sendFromB(23);
            assertTrue(waiter.join(Duration.ofSeconds(60)), "the event woke the parked virtual thread");
            assertEquals(Boolean.TRUE, virtual.get());
            assertEquals(1, outcome.get());
            assertEquals(13, wcs.wrId(0));
            assertEquals(1, blocker.events(), "woken by the completion's event");
        }
    }
}
