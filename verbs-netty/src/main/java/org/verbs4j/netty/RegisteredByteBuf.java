package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledDirectByteBuf;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.pool.PooledBuffer;

/**
 * A direct buffer of {@link RdmaByteBufAllocator}: one leased slot of its pool, registered
 * memory the transport posts sends from in place. The slot goes back to the pool once the buffer
 * was released (reference count zero) <em>and</em> every send posted from it completed, whichever
 * comes last: {@link #pin()} before each post, {@link #unpin()} at its completion.
 *
 * <p>A capacity change moves the bytes into ordinary memory (Netty's direct buffer does so); from
 * then on the buffer is copied like any other, and its slot still returns to the pool on release.
 */
final class RegisteredByteBuf extends UnpooledDirectByteBuf {
    private static final AtomicIntegerFieldUpdater<RegisteredByteBuf> STATE =
            AtomicIntegerFieldUpdater.newUpdater(RegisteredByteBuf.class, "state");

    private final RdmaByteBufAllocator owner;
    private final long token;
    private final MemoryRegion region;
    private final long regionOffset;
    private final int slotCapacity;
    private boolean moved;
    /** Sends posted and not completed, times two, plus one once the buffer was released. */
    private volatile int state;

    RegisteredByteBuf(RdmaByteBufAllocator owner, PooledBuffer slot, int capacity, int maxCapacity) {
        super(owner, slot.segment().asSlice(0, capacity).asByteBuffer(), maxCapacity);
        setIndex(0, 0); // the wrapping constructor takes the memory as already written
        this.owner = owner;
        this.token = slot.token();
        this.region = slot.region();
        this.regionOffset = slot.offset();
        this.slotCapacity = capacity;
    }

    /**
     * The registered buffer whose memory {@code b} is at the same indices (itself, or a leak-aware
     * wrapper or whole duplicate of it), if it still lies in its slot and its slot is in {@code pd}; else null.
     */
    static RegisteredByteBuf inPlace(ByteBuf b, ProtectionDomain pd) {
        ByteBuf root = b instanceof RegisteredByteBuf ? b : b.unwrap();
        if (root instanceof RegisteredByteBuf r
                && !r.moved
                && r.region.protectionDomain() == pd
                && b.capacity() == r.slotCapacity) {
            return r;
        }
        return null;
    }

    /** The slot's lease token in the allocator's pool. */
    long token() {
        return token;
    }

    /** The region the slot lies in. */
    MemoryRegion region() {
        return region;
    }

    /** Where index 0 of this buffer lies in {@link #region()}. */
    long regionOffset() {
        return regionOffset;
    }

    /** Holds the slot for one more posted send; false if the buffer was already released (nothing held). */
    boolean pin() {
        for (; ; ) {
            int s = state;
            if ((s & 1) != 0) {
                return false;
            }
            if (STATE.compareAndSet(this, s, s + 2)) {
                return true;
            }
        }
    }

    /** A send posted from the slot completed (or can no longer run): the last one of a released buffer returns it. */
    void unpin() {
        if (STATE.addAndGet(this, -2) == 1) {
            owner.release(token);
        }
    }

    @Override
    public ByteBuf capacity(int newCapacity) {
        if (newCapacity != capacity()) {
            moved = true; // before the copy: a racing post from this thread cannot happen (one owner)
        }
        return super.capacity(newCapacity);
    }

    @Override
    protected void deallocate() {
        super.deallocate();
        if (STATE.getAndAdd(this, 1) == 0) {
            owner.release(token);
        }
    }
}
