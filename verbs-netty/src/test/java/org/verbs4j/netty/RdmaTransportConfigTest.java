package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.channel.DefaultEventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The loop configuration's values and refusals, and one loop's receive totals before any connection. */
class RdmaTransportConfigTest {
    @Test
    void theDefaultsShareNothingAndCapNothing() {
        RdmaTransportConfig c = RdmaTransportConfig.defaults();
        assertFalse(c.shared());
        assertEquals(Long.MAX_VALUE, c.maxReceiveBytes());
        RdmaTransportConfig s =
                c.withSharedReceiveQueue().withMaxReceiveBytes(1 << 20).withBusyPoll(true);
        assertTrue(s.shared() && s.busyPoll());
        assertEquals(RdmaTransportConfig.DEFAULT_SHARED_CREDITS, s.sharedReceiveCredits());
        assertEquals(1 << 20, s.maxReceiveBytes());
        assertFalse(s.withSharedReceiveQueue(0, 4096).shared(), "0 credits: off");
        assertFalse(c.sharedSends(), "shared sends only on a shared receive queue");
        assertTrue(s.sharedSends());
        assertEquals(RdmaTransportConfig.DEFAULT_SHARED_SEND_BYTES, s.sharedSendBytes());
        assertFalse(s.withSharedSendBytes(0).sharedSends(), "0: each connection's own send buffers");
        assertEquals(1 << 20, s.withSharedSendBytes(1 << 20).withBusyPoll(false).sharedSendBytes());
    }

    @Test
    void valuesTheTransportCannotHonourAreRefused() {
        RdmaTransportConfig c = RdmaTransportConfig.defaults();
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> c.withSharedReceiveQueue(3, 16 << 10));
        assertTrue(e.getMessage().contains("sharedReceiveCredits 3"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> c.withSharedReceiveQueue(8, 63));
        e = assertThrows(IllegalArgumentException.class, () -> c.withMaxReceiveBytes(0));
        assertTrue(e.getMessage().contains("maxReceiveBytes 0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> c.withSharedSendBytes(-1));
        assertTrue(e.getMessage().contains("sharedSendBytes -1"), e.getMessage());
    }

    @Test
    void sharedValuesNoPeerAcceptsOrNoLoopHoldsAreRefused() throws Exception {
        RdmaTransportConfig c = RdmaTransportConfig.defaults();
        int most = RdmaTransportConfig.MAX_SHARED_CREDITS;
        // the largest values accepted make a handshake the peer accepts, and fit the loop's queue
        RdmaTransportConfig top = c.withSharedReceiveQueue(most, Handshake.MAX_BUFFER_SIZE);
        Handshake h = Handshake.decode(new Handshake(top.sharedReceiveCredits(), top.sharedBufferSize()).encode());
        assertEquals(most, h.receiveBuffers());
        assertTrue(most + RdmaStream.SPARE_RECEIVES <= SharedReceives.MAX_DEPTH);
        // one more credit, or one more byte, no peer accepts (or no loop holds): refused here
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> c.withSharedReceiveQueue(most + 1, 16 << 10));
        assertTrue(e.getMessage().contains("sharedReceiveCredits " + (most + 1)), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> c.withSharedReceiveQueue(Integer.MAX_VALUE, 16 << 10));
        e = assertThrows(
                IllegalArgumentException.class, () -> c.withSharedReceiveQueue(8, Handshake.MAX_BUFFER_SIZE + 1));
        assertTrue(e.getMessage().contains("sharedBufferSize " + (Handshake.MAX_BUFFER_SIZE + 1)), e.getMessage());
    }

    @Test
    void aLoopReportsItsReceiveTotalsAndAForeignLoopIsRefused() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(
                1, RdmaIoHandler.newFactory(RdmaTransportConfig.defaults().withMaxReceiveBytes(12345)));
        DefaultEventLoop other = new DefaultEventLoop();
        try {
            group.next().submit(() -> {}).syncUninterruptibly(); // the loop runs (and waits) before it is shut down
            RdmaLoopStats s = RdmaIoHandler.stats(group.next());
            assertEquals(new RdmaLoopStats(0, 0, 0, 12345, 0, 0, 0, 0), s);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RdmaIoHandler.stats(other));
            assertTrue(e.getMessage().contains("not a live event loop of RdmaIoHandler"), e.getMessage());
        } finally {
            other.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        }
        assertThrows(IllegalArgumentException.class, () -> RdmaIoHandler.stats(group.next()), "a loop shut down");
    }
}
