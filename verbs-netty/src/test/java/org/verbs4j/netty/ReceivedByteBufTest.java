package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.util.IllegalReferenceCountException;
import io.netty.util.ResourceLeakDetector;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A frame handed up in place, on the host: the buffer is the receive buffer's own bytes (no
 * copy), its release returns the receive exactly once, whatever shares it (slices, duplicates),
 * and a second release is refused without returning it again.
 */
class ReceivedByteBufTest {
    private final List<Integer> returned = new ArrayList<>();
    private final ReceivedByteBuf.Returns returns = (stream, slot) -> returned.add(slot);

    /** Receive memory of 4 buffers of 64 bytes, slot {@code s} filled with the byte {@code s}. */
    private static ByteBuffer receiveMemory() {
        ByteBuffer m = ByteBuffer.allocateDirect(4 * 64);
        for (int i = 0; i < m.capacity(); i++) {
            m.put(i, (byte) (i / 64));
        }
        return m;
    }

    private ByteBuf frame(ByteBuffer memory, int slot, int length) {
        return ReceivedByteBuf.of(
                UnpooledByteBufAllocator.DEFAULT, memory.slice(slot * 64, length), returns, null, slot);
    }

    @Test
    void theBufferIsTheReceiveBuffersBytesAndItsReleaseReturnsItOnce() {
        ByteBuffer memory = receiveMemory();
        ByteBuf b = frame(memory, 2, 10);
        assertEquals(10, b.readableBytes());
        assertEquals(10, b.capacity());
        assertEquals(2, b.getByte(9), "slot 2's bytes");
        memory.put(2 * 64 + 3, (byte) 99);
        assertEquals(99, b.getByte(3), "a view of the receive buffer, not a copy");
        assertTrue(returned.isEmpty());
        assertTrue(b.release());
        assertEquals(List.of(2), returned, "the receive returned on release");
    }

    @Test
    void aSecondReleaseIsRefusedAndReturnsNothing() {
        ByteBuf b = frame(receiveMemory(), 1, 8);
        b.release();
        assertThrows(IllegalReferenceCountException.class, b::release);
        assertEquals(List.of(1), returned, "returned once");
    }

    @Test
    void aRetainedSliceKeepsTheReceiveUntilItIsReleasedToo() {
        ByteBuf b = frame(receiveMemory(), 3, 32);
        ByteBuf part = b.retainedSlice(4, 8);
        assertFalse(b.release());
        assertTrue(returned.isEmpty(), "the slice still holds it");
        assertEquals(3, part.getByte(0));
        assertTrue(part.release());
        assertEquals(List.of(3), returned);
    }

    @Test
    void aCapacityChangeMovesTheBytesAndTheReceiveStillReturnsOnRelease() {
        ByteBuffer memory = receiveMemory();
        ByteBuf b = frame(memory, 0, 16);
        b.capacity(4);
        memory.put(1, (byte) 42);
        assertEquals(0, b.getByte(1), "moved: no longer the receive buffer's bytes");
        b.release();
        assertEquals(List.of(0), returned);
    }

    @Test
    void zeroCopyReadsIsAChannelOptionOffByDefault() {
        RdmaSocketChannelConfig config = new RdmaSocketChannel().config();
        assertEquals(false, config.getOption(RdmaChannelOption.ZERO_COPY_READS));
        assertTrue(config.getOptions().containsKey(RdmaChannelOption.ZERO_COPY_READS));
        assertTrue(config.setOption(RdmaChannelOption.ZERO_COPY_READS, true));
        assertTrue(config.zeroCopyReads());
    }

    @Test
    void nettysLeakDetectorTracksIt() {
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        try {
            ByteBuf b = frame(receiveMemory(), 1, 8);
            ByteBuf root = b.unwrap();
            assertTrue(root instanceof ReceivedByteBuf, "wrapped for leak tracking: " + b.getClass());
            assertSame(root, b.unwrap());
            b.release();
            assertEquals(List.of(1), returned);
        } finally {
            ResourceLeakDetector.setLevel(level);
        }
    }
}
