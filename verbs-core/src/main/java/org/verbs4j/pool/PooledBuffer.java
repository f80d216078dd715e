package org.verbs4j.pool;

import java.lang.foreign.MemorySegment;
import org.verbs4j.MemoryRegion;

/**
 * One buffer of a {@link BufferPool}: a fixed slice of a region registered at start-up, with
 * everything a work request needs (address, length, lkey, rkey, the peer-facing remote address,
 * and the owning {@link MemoryRegion} with the offset inside it, for
 * {@link org.verbs4j.SendWorkRequests#sge}). See {@link PoolWorkRequests} for one-call SGEs.
 *
 * <p><b>Lease object or shared flyweight.</b> By default each lease gets an object of its own
 * that carries the lease's {@link #token()}: once the lease ended (released, or its buffer leased
 * again since), every release or checked use through it throws {@link StaleLeaseException}, and
 * the {@link #segment()} it handed out is closed (an access throws IllegalStateException instead
 * of reading or writing the next holder's data). With
 * {@link BufferPool.Builder#unsafeSharedBuffers(boolean) unsafe shared buffers} the pool creates
 * one object per slot at start-up and hands the same one out on every lease of that slot, so
 * leasing allocates nothing; such an object cannot tell its holder from a later holder of the
 * same slot (a release through it is refused while the slot is free, but once the slot was leased
 * again it would release the new lease, and its segment stays open until the pool closes). There
 * <b>after {@link #release()} the reference is dead</b>: carry the lease's {@link #token()} where a
 * reference may outlive its lease; the pool checks a token's generation on every use.
 *
 * <p>The addressing accessors are immutable facts of the slot and never check the lease (the
 * data path reads them). {@link #segment()} checks it.
 *
 * <p>Thread-safe to read; the thread that holds the lease decides when to release it (it may
 * hand the buffer to another thread, e.g. a completion poller, which then releases it).
 */
public final class PooledBuffer implements AutoCloseable {
    final BufferPool pool;
    final SizeClass sizeClass;
    final int slot;
    final int local;
    /** The lease this object is of, or {@link BufferPool#NO_TOKEN} for an unsafe shared flyweight. */
    final long leaseToken;

    private final MemorySegment segment;
    private final MemoryRegion region;
    private final long offset;
    private final long address;
    private final long remoteAddress;
    private final int capacity;
    private final int lkey;
    private final int rkey;

    PooledBuffer(
            BufferPool pool,
            SizeClass sizeClass,
            int slot,
            int local,
            MemoryRegion region,
            MemorySegment view,
            long offset) {
        this.pool = pool;
        this.sizeClass = sizeClass;
        this.slot = slot;
        this.local = local;
        this.leaseToken = BufferPool.NO_TOKEN;
        this.region = region;
        this.offset = offset;
        this.capacity = sizeClass.size;
        this.segment = view.asSlice(offset, capacity);
        this.address = region.address() + offset;
        this.remoteAddress = region.iova() + offset;
        this.lkey = region.lkey();
        this.rkey = region.rkey();
    }

    /** The object of one lease: the slot's facts and the lease's token. */
    PooledBuffer(PooledBuffer slotBuffer, long token) {
        this.pool = slotBuffer.pool;
        this.sizeClass = slotBuffer.sizeClass;
        this.slot = slotBuffer.slot;
        this.local = slotBuffer.local;
        this.leaseToken = token;
        this.region = slotBuffer.region;
        this.offset = slotBuffer.offset;
        this.capacity = slotBuffer.capacity;
        this.segment = slotBuffer.segment;
        this.address = slotBuffer.address;
        this.remoteAddress = slotBuffer.remoteAddress;
        this.lkey = slotBuffer.lkey;
        this.rkey = slotBuffer.rkey;
    }

    /**
     * The buffer's memory: a fixed slice of the registered region. For a lease's own object (the
     * default) a view that dies when the lease ends (made on the first call, closed by the
     * release); for an unsafe shared flyweight, scoped to the pool. Any access after that throws
     * IllegalStateException (from the FFM API) rather than touching another holder's or freed
     * memory. The first call of a lease makes a shared arena, and the release closes it (a few
     * microseconds, more with many threads: the JVM makes sure no thread is accessing it).
     *
     * @throws StaleLeaseException     when the buffer is not leased (through a lease's own
     *                                 object: when its lease ended)
     * @throws org.verbs4j.ResourceClosedException when the pool is closed
     * @throws org.verbs4j.InvalidRequestException for device (GPU) memory, which the CPU cannot touch
     */
    public MemorySegment segment() {
        if (!isLeased() || !segment.scope().isAlive()) {
            throw useRefused("segment()");
        }
        if (!region.isHostAccessible()) {
            throw new org.verbs4j.InvalidRequestException(
                    "PooledBuffer.segment",
                    "the pool's buffers are device (GPU) " + "memory, which the CPU cannot read or write",
                    "copy through the device's API at address() " + "(e.g. GpuMemory.copyFromHost in verbs-gpudirect)");
        }
        return leaseToken == BufferPool.NO_TOKEN ? segment : pool.leaseSegment(this, segment);
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
     * The buffer's id in its pool, in {@code [0, pool.capacity())}: stable for the pool's life,
     * shared by every lease of the buffer (a lease is named by its {@link #token()}).
     */
    public int id() {
        return slot;
    }

    /** The pool it belongs to. */
    public BufferPool pool() {
        return pool;
    }

    /**
     * The token of this lease ({@link BufferPool#release(long)}, {@link BufferPool#buffer(long)}):
     * for the shared flyweight, of the slot's current lease, so take it while you hold the lease
     * (right after leasing). With leak tracking, the lease is no longer tracked through this
     * object once its token was taken (a token is a value the GC cannot follow).
     *
     * @throws StaleLeaseException when the buffer is not leased (for a lease's own object: when its lease ended)
     */
    public long token() {
        if (leaseToken == BufferPool.NO_TOKEN) {
            return pool.currentToken(this);
        }
        if (!pool.isCurrent(leaseToken)) {
            throw pool.refused(leaseToken, "token()");
        }
        pool.untrack(slot, leaseToken);
        return leaseToken;
    }

    /**
     * Whether the buffer is leased now: for a lease's own object, whether its lease is still
     * current; for an unsafe shared flyweight, by anyone (successive leases share it).
     */
    public boolean isLeased() {
        return leaseToken == BufferPool.NO_TOKEN ? pool.isLeased(slot) : pool.isCurrent(leaseToken);
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

    /** Why this object may not be used now (out of line: the data path's checks stay small). */
    RuntimeException useRefused(String what) {
        if (pool.isEnding() || !segment.scope().isAlive()) {
            return pool.closedException(what + " of " + this + ": its memory was deregistered and freed");
        }
        if (leaseToken != BufferPool.NO_TOKEN) {
            return pool.refused(leaseToken, what);
        }
        return pool.notLeased(this, what, BufferPool.FREE);
    }

    @Override
    public String toString() {
        return "PooledBuffer#" + slot + "[" + capacity + " B at 0x" + Long.toHexString(address) + ", lkey 0x"
                + Integer.toHexString(lkey) + ", rkey 0x" + Integer.toHexString(rkey)
                + (leaseToken == BufferPool.NO_TOKEN ? "" : ", lease 0x" + Long.toHexString(leaseToken)) + "]";
    }
}
