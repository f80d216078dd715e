package org.verbs4j.pool;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;
import org.verbs4j.InvalidRequestException;
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
 * <p><b>Checked access, the cheap safe path.</b> {@link #get(ValueLayout.OfInt, long) get},
 * {@link #set(ValueLayout.OfInt, long, int) set}, {@link #write(long, MemorySegment, long, long)
 * write} and {@link #read(long, MemorySegment, long, long) read} reach the buffer's memory
 * without handing out a segment: each checks the bounds and that this object's lease is still
 * current, and pins the slot for the access, so a release on another thread waits for the access
 * to end and an access after the release is refused ({@link StaleLeaseException}). An access
 * through a reference kept past its lease can therefore never read or write the next holder's
 * buffer, from any thread, in any mode (through an unsafe shared flyweight: only while the slot
 * is free); it costs two atomic adds on the slot's own cache line and allocates nothing. {@link #segment()} hands out a real segment instead, at the price of an arena
 * per lease (see there).
 *
 * <p>The addressing accessors are immutable facts of the slot and never check the lease (the
 * data path reads them). {@link #segment()} and the checked accessors check it.
 *
 * <p>Thread-safe to read; the thread that holds the lease decides when to release it (it may
 * hand the buffer to another thread, e.g. a completion poller, which then releases it).
 */
public final class PooledBuffer implements AutoCloseable {
    /** The slot's facts, shared by its flyweight and every lease's object (a lease's object is its token and this). */
    final Facts at;
    /** The lease this object is of, or {@link BufferPool#NO_TOKEN} for an unsafe shared flyweight. */
    final long leaseToken;

    /** The immutable facts of one slot, made at start-up. */
    static final class Facts {
        final BufferPool pool;
        final SizeClass sizeClass;
        final int slot;
        final int local;
        final MemorySegment segment;
        final MemoryRegion region;
        final long offset;
        final long address;
        final long remoteAddress;
        final int capacity;
        final int lkey;
        final int rkey;
        final boolean hostMemory;

        Facts(
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
            this.region = region;
            this.offset = offset;
            this.capacity = sizeClass.size;
            this.segment = view.asSlice(offset, capacity);
            this.address = region.address() + offset;
            this.remoteAddress = region.iova() + offset;
            this.lkey = region.lkey();
            this.rkey = region.rkey();
            this.hostMemory = region.isHostAccessible();
        }
    }

    PooledBuffer(
            BufferPool pool,
            SizeClass sizeClass,
            int slot,
            int local,
            MemoryRegion region,
            MemorySegment view,
            long offset) {
        this.at = new Facts(pool, sizeClass, slot, local, region, view, offset);
        this.leaseToken = BufferPool.NO_TOKEN;
    }

    /** The object of one lease: the slot's facts and the lease's token (24 bytes). */
    PooledBuffer(PooledBuffer slotBuffer, long token) {
        this.at = slotBuffer.at;
        this.leaseToken = token;
    }

    /**
     * The buffer's memory: a fixed slice of the registered region. For a lease's own object (the
     * default) a view that dies when the lease ends (made on the first call, closed by the
     * release); for an unsafe shared flyweight, scoped to the pool. Any access after that throws
     * IllegalStateException (from the FFM API) rather than touching another holder's or freed
     * memory. The first call of a lease makes a shared arena, and the release closes it (tens of
     * microseconds, more with many threads: the JVM makes sure no thread is accessing it); the
     * checked accessors ({@link #get(ValueLayout.OfInt, long) get}, {@link #write(long,
     * MemorySegment, long, long) write}, ...) need no arena.
     *
     * @throws StaleLeaseException     when the buffer is not leased (through a lease's own
     *                                 object: when its lease ended)
     * @throws org.verbs4j.ResourceClosedException when the pool is closed
     * @throws org.verbs4j.InvalidRequestException for device (GPU) memory, which the CPU cannot touch
     */
    public MemorySegment segment() {
        if (!isLeased() || !at.segment.scope().isAlive()) {
            throw useRefused("segment()");
        }
        if (!at.hostMemory) {
            throw deviceMemory("segment");
        }
        return leaseToken == BufferPool.NO_TOKEN ? at.segment : at.pool.leaseSegment(this, at.segment);
    }

    // ---- checked access (no segment handed out) ---------------------------------------------

    /** The byte at {@code offset}: a checked access (see the class comment); allocation-free. */
    public byte get(ValueLayout.OfByte layout, long offset) {
        enter(layout, offset, "get");
        try {
            return at.segment.get(layout, offset);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** Writes the byte at {@code offset}: a checked access (see the class comment); allocation-free. */
    public void set(ValueLayout.OfByte layout, long offset, byte value) {
        enter(layout, offset, "set");
        try {
            at.segment.set(layout, offset, value);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** The short at {@code offset}, in {@code layout}'s byte order and alignment: a checked access. */
    public short get(ValueLayout.OfShort layout, long offset) {
        enter(layout, offset, "get");
        try {
            return at.segment.get(layout, offset);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** Writes the short at {@code offset}, in {@code layout}'s byte order and alignment: a checked access. */
    public void set(ValueLayout.OfShort layout, long offset, short value) {
        enter(layout, offset, "set");
        try {
            at.segment.set(layout, offset, value);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /**
     * The int at {@code offset}, in {@code layout}'s byte order and alignment (e.g. {@code
     * ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN)}): a checked access.
     *
     * @throws StaleLeaseException     when this object's lease ended (nothing is read)
     * @throws InvalidRequestException when the value does not lie inside the buffer or is not
     *                                 aligned as {@code layout} requires, or for device memory
     * @throws org.verbs4j.ResourceClosedException when the pool is closed
     */
    public int get(ValueLayout.OfInt layout, long offset) {
        enter(layout, offset, "get");
        try {
            return at.segment.get(layout, offset);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** Writes the int at {@code offset} (see {@link #get(ValueLayout.OfInt, long)}): a checked access. */
    public void set(ValueLayout.OfInt layout, long offset, int value) {
        enter(layout, offset, "set");
        try {
            at.segment.set(layout, offset, value);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** The long at {@code offset}, in {@code layout}'s byte order and alignment: a checked access. */
    public long get(ValueLayout.OfLong layout, long offset) {
        enter(layout, offset, "get");
        try {
            return at.segment.get(layout, offset);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** Writes the long at {@code offset}, in {@code layout}'s byte order and alignment: a checked access. */
    public void set(ValueLayout.OfLong layout, long offset, long value) {
        enter(layout, offset, "set");
        try {
            at.segment.set(layout, offset, value);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /**
     * Copies {@code bytes} bytes of {@code src} from {@code srcOffset} into this buffer at {@code
     * offset}: a checked access (see the class comment); allocation-free.
     *
     * @throws StaleLeaseException     when this object's lease ended (nothing is written)
     * @throws InvalidRequestException when either range does not lie inside its memory, or for
     *                                 device memory
     */
    public void write(long offset, MemorySegment src, long srcOffset, long bytes) {
        Objects.requireNonNull(src, "src");
        checkRange("write", "src", src.byteSize(), srcOffset, bytes);
        enter(offset, bytes, 1, "write");
        try {
            MemorySegment.copy(src, srcOffset, at.segment, offset, bytes);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** Copies {@code bytes} bytes of {@code src} from {@code srcIndex} into this buffer at {@code offset}: a checked access. */
    public void write(long offset, byte[] src, int srcIndex, int bytes) {
        Objects.requireNonNull(src, "src");
        checkRange("write", "src", src.length, srcIndex, bytes);
        enter(offset, bytes, 1, "write");
        try {
            MemorySegment.copy(src, srcIndex, at.segment, ValueLayout.JAVA_BYTE, offset, bytes);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /**
     * Copies {@code bytes} bytes of this buffer from {@code offset} into {@code dst} at {@code
     * dstOffset}: a checked access (see the class comment); allocation-free.
     *
     * @throws StaleLeaseException     when this object's lease ended (nothing is read)
     * @throws InvalidRequestException when either range does not lie inside its memory, when
     *                                 {@code dst} is read-only, or for device memory
     */
    public void read(long offset, MemorySegment dst, long dstOffset, long bytes) {
        Objects.requireNonNull(dst, "dst");
        checkRange("read", "dst", dst.byteSize(), dstOffset, bytes);
        if (dst.isReadOnly()) {
            throw new InvalidRequestException(
                    "PooledBuffer.read",
                    "the destination segment is read-only (" + this + ")",
                    "read into a writable segment");
        }
        enter(offset, bytes, 1, "read");
        try {
            MemorySegment.copy(at.segment, offset, dst, dstOffset, bytes);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    /** Copies {@code bytes} bytes of this buffer from {@code offset} into {@code dst} at {@code dstIndex}: a checked access. */
    public void read(long offset, byte[] dst, int dstIndex, int bytes) {
        Objects.requireNonNull(dst, "dst");
        checkRange("read", "dst", dst.length, dstIndex, bytes);
        enter(offset, bytes, 1, "read");
        try {
            MemorySegment.copy(at.segment, ValueLayout.JAVA_BYTE, offset, dst, dstIndex, bytes);
        } finally {
            at.pool.unpin(at.slot);
        }
    }

    private void enter(ValueLayout layout, long offset, String what) {
        enter(offset, layout.byteSize(), layout.byteAlignment(), what);
    }

    /** Checks bounds and alignment, then pins the slot for this object's lease (refused when it ended). */
    private void enter(long offset, long bytes, long alignment, String what) {
        if (offset < 0 || bytes < 0 || offset > at.capacity - bytes) {
            throw outside(what, offset, bytes);
        }
        if (((at.address + offset) & (alignment - 1)) != 0) {
            throw misaligned(what, offset, alignment);
        }
        if (!at.pool.pin(at.slot, leaseToken)) {
            throw useRefused(what + "()");
        }
        if (!at.hostMemory) {
            at.pool.unpin(at.slot);
            throw deviceMemory(what);
        }
    }

    private RuntimeException outside(String what, long offset, long bytes) {
        return new InvalidRequestException(
                "PooledBuffer." + what,
                bytes + " byte(s) at offset " + offset + " do not lie inside " + this,
                "keep offset and length within [0, capacity()) = [0, " + at.capacity + ")");
    }

    private RuntimeException misaligned(String what, long offset, long alignment) {
        return new InvalidRequestException(
                "PooledBuffer." + what,
                "offset " + offset + " of " + this + " is not aligned to the layout's " + alignment + " bytes",
                "use an aligned offset or an unaligned layout (e.g. ValueLayout.JAVA_INT_UNALIGNED)");
    }

    private RuntimeException deviceMemory(String what) {
        return new InvalidRequestException(
                "PooledBuffer." + what,
                "the pool's buffers are device (GPU) memory, which the CPU cannot read or write",
                "copy through the device's API at address() (e.g. GpuMemory.copyFromHost in verbs-gpudirect)");
    }

    private static void checkRange(String what, String name, long size, long offset, long bytes) {
        if (offset < 0 || bytes < 0 || offset > size - bytes) {
            throw new InvalidRequestException(
                    "PooledBuffer." + what,
                    bytes + " byte(s) at offset " + offset + " of " + name + " do not lie inside its " + size
                            + " byte(s)",
                    "keep " + name + "'s range within its size");
        }
    }

    /** The virtual address of the first byte (an SGE's {@code addr}). */
    public long address() {
        return at.address;
    }

    /** The buffer's size in bytes: its size class, at least what the lease asked for. */
    public int capacity() {
        return at.capacity;
    }

    /** The local key (an SGE's {@code lkey}). */
    public int lkey() {
        return at.lkey;
    }

    /** The remote key a peer names this buffer by in RDMA READ/WRITE and atomics. */
    public int rkey() {
        return at.rkey;
    }

    /** The address a peer uses for this buffer's first byte (the region's iova plus {@link #offset()}). */
    public long remoteAddress() {
        return at.remoteAddress;
    }

    /** The registered region the buffer lies in (shared with the other buffers of the region). */
    public MemoryRegion region() {
        return at.region;
    }

    /** The offset of the buffer's first byte inside {@link #region()}. */
    public long offset() {
        return at.offset;
    }

    /**
     * The buffer's id in its pool, in {@code [0, pool.capacity())}: stable for the pool's life,
     * shared by every lease of the buffer (a lease is named by its {@link #token()}).
     */
    public int id() {
        return at.slot;
    }

    /** The pool it belongs to. */
    public BufferPool pool() {
        return at.pool;
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
            return at.pool.currentToken(this);
        }
        if (!at.pool.isCurrent(leaseToken)) {
            throw at.pool.refused(leaseToken, "token()");
        }
        at.pool.untrack(at.slot, leaseToken);
        return leaseToken;
    }

    /**
     * Whether the buffer is leased now: for a lease's own object, whether its lease is still
     * current; for an unsafe shared flyweight, by anyone (successive leases share it).
     */
    public boolean isLeased() {
        return leaseToken == BufferPool.NO_TOKEN ? at.pool.isLeased(at.slot) : at.pool.isCurrent(leaseToken);
    }

    /** Returns the buffer to its pool: {@code pool().release(this)}. */
    public void release() {
        at.pool.release(this);
    }

    /** {@link #release()}, for try-with-resources. */
    @Override
    public void close() {
        at.pool.release(this);
    }

    /** Why this object may not be used now (out of line: the data path's checks stay small). */
    RuntimeException useRefused(String what) {
        if (at.pool.isEnding() || !at.segment.scope().isAlive()) {
            return at.pool.closedException(what, this + ": its memory was deregistered and freed");
        }
        if (leaseToken != BufferPool.NO_TOKEN) {
            return at.pool.refused(leaseToken, what);
        }
        return at.pool.notLeased(this, what, BufferPool.FREE);
    }

    @Override
    public String toString() {
        return "PooledBuffer#" + at.slot + "[" + at.capacity + " B at 0x" + Long.toHexString(at.address) + ", lkey 0x"
                + Integer.toHexString(at.lkey) + ", rkey 0x" + Integer.toHexString(at.rkey)
                + (leaseToken == BufferPool.NO_TOKEN ? "" : ", lease 0x" + Long.toHexString(leaseToken)) + "]";
    }
}
