package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: {@link CompletionWaiter} over the stand-in provider's CQ and a completion channel
 * whose fd is an eventfd that never signals (no device raises events here): the spin path reaps
 * queued completions without arming the CQ; the block path arms it (the stand-in counts
 * req_notify_cq), blocks on the channel until the timeout, and an interrupt ends a blocked wait.
 * The event that ends a block comes from a real device: the guest tier's CompletionWaiterGuestTest.
 */
@NeedsNativeToolchain
class CompletionWaiterHostTest {
    private StandInProvider p;
    private Arena arena;
    private Context ctx;
    private CompletionChannel channel;
    private CompletionQueue cq;

    @BeforeEach
    void open() {
        p = StandInProvider.open();
        arena = Arena.ofShared();
        ctx = ForeignHandles.context(p.context(), "standin0");
        int fd = LibC.eventFd("eventfd", LibC.EFD_CLOEXEC);
        MemorySegment fakeChannel = arena.allocate(16, 8);
        fakeChannel.set(ValueLayout.JAVA_INT, ObjectLayout.COMP_CHANNEL_FD, fd);
        channel = new CompletionChannel(ctx, fakeChannel, h -> LibC.close(fd));
        cq = new CompletionQueue(ctx, p.cq().reinterpret(ObjectLayout.CQ_SIZE), channel, h -> {});
    }

    @AfterEach
    void close() {
        for (NativeResource r : new NativeResource[] {cq, channel, ctx}) {
            if (r != null && r.isOpen()) {
                r.close();
            }
        }
        arena.close();
        p.close();
    }

    @Test
    void theSpinPathReapsWithoutArming() {
        for (int i = 0; i < 3; i++) {
            assertEquals(
                    0,
                    p.queueCompletion(
                            100 + i, CompletionStatus.SUCCESS, CompletionOpcode.RDMA_WRITE, 8, StandInProvider.QP_NUM));
        }
        CompletionWaiter spinner = new CompletionWaiter(cq, Long.MAX_VALUE);
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            assertEquals(3, spinner.await(wcs, 3, Duration.ofSeconds(30)));
            for (int i = 0; i < 3; i++) {
                assertEquals(100 + i, wcs.wrId(i));
            }
            assertEquals(0, spinner.blocks());
            assertEquals(0, p.calls(StandInProvider.Op.REQ_NOTIFY_CQ), "the spin path never arms the CQ");
            assertEquals(0, spinner.await(wcs, 1, Duration.ofMillis(50)), "nothing more: the timeout ends the spin");
        }
    }

    @Test
    void theBlockPathArmsThenBlocksUntilTheTimeout() {
        CompletionWaiter blocker = new CompletionWaiter(cq, 0);
        try (WorkCompletions wcs = new WorkCompletions(4)) {
            assertEquals(0, blocker.await(wcs, 1, Duration.ofMillis(300)));
            assertEquals(0, wcs.count());
            assertTrue(blocker.blocks() >= 1, "blocked " + blocker.blocks());
            assertEquals(0, blocker.events(), "no device, no event");
            assertTrue(p.calls(StandInProvider.Op.REQ_NOTIFY_CQ) >= 1, "armed before it blocked");
            assertEquals(0, p.lastSolicited(), "armed for every completion");
            // a completion already there when the wait starts: reaped at once, no block
            long blocks = blocker.blocks();
            assertEquals(
                    0,
                    p.queueCompletion(
                            7, CompletionStatus.SUCCESS, CompletionOpcode.RDMA_WRITE, 8, StandInProvider.QP_NUM));
            assertEquals(1, blocker.await(wcs, 1, Duration.ofSeconds(30)));
            assertEquals(7, wcs.wrId(0));
            assertEquals(blocks, blocker.blocks());
        }
    }

    @Test
    void anInterruptEndsABlockedWait() throws Exception {
        CompletionWaiter blocker = new CompletionWaiter(cq, 0);
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread waiter = Thread.ofPlatform().start(() -> {
            try (WorkCompletions wcs = new WorkCompletions(4)) {
                blocker.await(wcs, 1, Duration.ofSeconds(120));
            } catch (Throwable t) {
                thrown.set(t);
            }
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (channel.waiters() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertTrue(channel.waiters() > 0, "the waiter blocked on the channel");
        waiter.interrupt();
        waiter.join(TimeUnit.SECONDS.toMillis(60));
        assertFalse(waiter.isAlive(), "the interrupt ended the wait");
        VerbsException e = assertThrows(VerbsException.class, () -> {
            throw thrown.get();
        });
        assertEquals(Errno.EINTR, e.errno(), e.getMessage());
    }

    @Test
    void misuseIsRefused() {
        CompletionQueue noChannel = ForeignHandles.completionQueue(ctx, p.cq());
        try {
            assertThrows(InvalidRequestException.class, () -> new CompletionWaiter(noChannel, 0));
        } finally {
            noChannel.close();
        }
        assertThrows(InvalidRequestException.class, () -> new CompletionWaiter(cq, -1));
        CompletionWaiter w = new CompletionWaiter(cq, 0);
        try (WorkCompletions wcs = new WorkCompletions(2)) {
            VerbsException e = assertThrows(VerbsException.class, () -> w.await(wcs, 3, Duration.ofSeconds(1)));
            assertEquals(Errno.EINVAL, e.errno());
        }
    }
}
