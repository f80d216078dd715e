package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.ThreadAllocation.allocated;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.internal.LoopWaiter;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: an event loop's reaping of its completion channel ({@link LoopWaiter#nextEvent}),
 * which runs at every loop turn and finds the channel empty at least once each time, allocates no
 * heap memory, counted by the thread's allocated bytes over many reaps; the public {@link
 * CompletionChannel#awaitEvent} (a confined arena per call) is counted beside it. The channel's
 * fd is an eventfd that never signals (no device raises events here); events themselves are
 * reaped in the guest tier (the transport's echo tests).
 */
@NeedsNativeToolchain
class LoopReapAllocationHostTest {
    private static final int REAPS = 20_000;

    private StandInProvider p;
    private Arena arena;
    private Context ctx;
    private CompletionChannel channel;
    private LoopWaiter waiter;

    @BeforeEach
    void open() {
        p = StandInProvider.open();
        arena = Arena.ofShared();
        ctx = ForeignHandles.context(p.context(), "standin0");
        int fd = LibC.eventFd("eventfd", LibC.EFD_CLOEXEC | LibC.O_NONBLOCK);
        MemorySegment fakeChannel = arena.allocate(16, 8);
        fakeChannel.set(ValueLayout.JAVA_INT, ObjectLayout.COMP_CHANNEL_FD, fd);
        channel = new CompletionChannel(ctx, fakeChannel, h -> LibC.close(fd));
        waiter = new LoopWaiter("LoopReapAllocationHostTest");
    }

    @AfterEach
    void close() {
        waiter.close();
        for (NativeResource r : new NativeResource[] {channel, ctx}) {
            if (r != null && r.isOpen()) {
                r.close();
            }
        }
        arena.close();
        p.close();
    }

    @Test
    void aLoopsReapOfAnEmptyChannelAllocatesNothing() {
        for (int round = 0; round < 5; round++) { // warm: the figure counted is the compiled code's
            for (int i = 0; i < REAPS; i++) {
                assertNull(waiter.nextEvent(channel));
            }
        }
        long before = allocated();
        for (int i = 0; i < REAPS; i++) {
            if (waiter.nextEvent(channel) != null) {
                throw new AssertionError("an event on a channel that raises none");
            }
        }
        long bytes = allocated() - before;
        long publicBytes = allocated();
        for (int i = 0; i < 1_000; i++) {
            if (channel.awaitEvent(Duration.ZERO) != null) {
                throw new AssertionError("an event on a channel that raises none");
            }
        }
        publicBytes = allocated() - publicBytes;
        System.out.printf(
                "[loop-reap] heap bytes allocated: %d over %d loop reaps; %d over 1000 awaitEvent(ZERO)%n",
                bytes, REAPS, publicBytes);
        assertEquals(0, bytes, "heap bytes allocated by " + REAPS + " loop reaps");
        assertTrue(publicBytes > 0, "the counter sees the public call's arena (else this test proves nothing)");
    }

    @Test
    void aLoopsReapOfAClosedChannelIsRefused() {
        channel.close();
        ResourceClosedException e = assertThrows(ResourceClosedException.class, () -> waiter.nextEvent(channel));
        assertTrue(e.getMessage().contains("ibv_get_cq_event"), e.getMessage());
    }
}
