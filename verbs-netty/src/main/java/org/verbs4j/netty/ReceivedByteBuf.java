package org.verbs4j.netty;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;
import java.nio.ByteBuffer;

/**
 * A received frame handed up in place ({@link RdmaChannelOption#ZERO_COPY_READS}): a buffer
 * over the bytes of the registered receive buffer the frame arrived in, its capacity the frame's
 * length. Releasing it (reference count zero, on any thread) tells {@link Returns} once, which
 * reposts that receive; a second release is Netty's {@code IllegalReferenceCountException} and
 * reposts nothing. A capacity change moves the bytes into ordinary memory; the receive is still
 * returned only on release.
 *
 * <p>The memory stays valid for as long as the buffer is reachable, even after its connection
 * closed and its region was deregistered: the receive memory of such a connection (or of the
 * loop's shared receive queue) belongs to an automatic arena, which the buffer keeps alive, so
 * that a late read never touches freed memory.
 */
final class ReceivedByteBuf extends UnpooledDirectByteBuf {
    /** Where a released buffer's receive goes back. */
    interface Returns {
        /** The buffer over receive buffer {@code slot} of {@code stream} was released (any thread). */
        void returned(RdmaStream stream, int slot);
    }

    private final Returns returns;
    private final RdmaStream stream;
    private final int slot;

    private ReceivedByteBuf(ByteBufAllocator alloc, ByteBuffer frame, Returns returns, RdmaStream stream, int slot) {
        super(alloc, frame, frame.remaining()); // readable: the whole frame
        this.returns = returns;
        this.stream = stream;
        this.slot = slot;
    }

    /**
     * The frame's bytes {@code frame} (a view of receive buffer {@code slot} of {@code stream}) as
     * a buffer of {@code alloc}, tracked by Netty's leak detector like the allocator's own.
     */
    static ByteBuf of(ByteBufAllocator alloc, ByteBuffer frame, Returns returns, RdmaStream stream, int slot) {
        return Leaks.track(new ReceivedByteBuf(alloc, frame, returns, stream, slot));
    }

    /** The receive buffer this frame arrived in. */
    int slot() {
        return slot;
    }

    @Override
    protected void deallocate() {
        super.deallocate(); // frees only what a capacity change allocated: the frame's memory is a view
        returns.returned(stream, slot);
    }

    /** Netty's leak detector wraps buffers for allocators only (never instantiated). */
    private abstract static class Leaks extends AbstractByteBufAllocator {
        static ByteBuf track(ByteBuf b) {
            return toLeakAwareBuffer(b);
        }
    }
}
