package org.verbs4j.pool;

import java.lang.foreign.MemorySegment;
import org.verbs4j.MemoryRegion;

/**
 * One buffer of a {@link BufferPool}: a fixed slice of a region registered at start-up, with
 * everything a work request needs (address, length, lkey, rkey, the peer-facing remote address,
 * and the owning {@link MemoryRegion} with the offset inside it, for
 * {@link org.verbs4j.SendWorkRequests#sge}). See {@link PoolWorkRequests} for one-call SGEs.
 *
 * <p>A flyweight: the pool creates one per slot at start-up and hands the same object out on
 * every lease of that slot, so leasing allocates nothing. All its accessors are immutable facts of
 * the slot; whether it is leased now is {@link #isLeased()}. Hence the rule every pool of reused
 * objects has: <b>after {@link #release()} the reference is dead</b> — do not keep it, post it or
 * release it again (a second release is caught only while the slot is not leased again).
 *
 * <p>Thread-safe to read; the thread that holds the lease decides when to release it (it may
 * hand the buffer to another thread, e.g. a completion poller, which then releases it).
 */
public final class PooledBuffer implements AutoCloseable {
    final BufferPool pool;
    final BufferPool.SizeClass sizeClass;
    final int slot;
    final int local;
    private final MemorySegment segment;
    private final MemoryRegion region;
    private final long offset;
    private final long address;
    private final long remoteAddress;
    private final int capacity;
    private final int lkey;
    private final int rkey;

    PooledBuffer(BufferPool pool, BufferPool.SizeClass sizeClass, int slot, int local, MemoryRegion region,
                 long offset) {
        this.pool = pool;
        this.sizeClass = sizeClass;
        this.slot = slot;
        this.local = local;
        this.region = region;
        this.offset = offset;
        this.capacity = sizeClass.size;
        this.segment = region.segment().asSlice(offset, capacity);
        this.address = region.address() + offset;
        this.remoteAddress = region.iova() + offset;
        this.lkey = region.lkey();
        this.rkey = region.rkey();
    }

    /** The buffer's memory (a fixed slice of the registered region; do not touch it for device memory). */
    public MemorySegment segment() {
        return segment;
    }

    /** The virtual address of the first byte (an SGE's {@code addr}). */
    public long address() {
        return address;
    }

    /** The buffer's size in bytes: its size class, at least what the lease asked for. */
    public int capacity() {
        return capacity;
    }

    /** The local key (an SGE's {@code lkey}). */
    public int lkey() {
        return lkey;
    }

    /** The remote key a peer names this buffer by in RDMA READ/WRITE and atomics. */
    public int rkey() {
        return rkey;
    }

    /** The address a peer uses for this buffer's first byte (the region's iova plus {@link #offset()}). */
    public long remoteAddress() {
        return remoteAddress;
    }

    /** The registered region the buffer lies in (shared with the other buffers of the region). */
    public MemoryRegion region() {
        return region;
    }

    /** The offset of the buffer's first byte inside {@link #region()}. */
    public long offset() {
        return offset;
    }

    /**
     * The buffer's id in its pool, in {@code [0, pool.capacity())}: stable for the pool's life and
     * cheap to carry in a work request's wr_id.
     */
    public int id() {
        return slot;
    }

    /** The pool it belongs to. */
    public BufferPool pool() {
        return pool;
    }

    /** Whether the buffer is leased now (by anyone: the flyweight is shared by successive leases). */
    public boolean isLeased() {
        return pool.isLeased(slot);
    }

    /** Returns the buffer to its pool: {@code pool().release(this)}. */
    public void release() {
        pool.release(this);
    }

    /** {@link #release()}, for try-with-resources. */
    @Override
    public void close() {
        pool.release(this);
    }

    @Override
    public String toString() {
        return "PooledBuffer#" + slot + "[" + capacity + " B at 0x" + Long.toHexString(address) + ", lkey 0x"
                + Integer.toHexString(lkey) + ", rkey 0x" + Integer.toHexString(rkey) + "]";
    }
}
