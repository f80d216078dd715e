package org.verbs4j.netty;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledDirectByteBuf;
import io.netty.buffer.UnpooledHeapByteBuf;
import java.net.InetAddress;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.verbs4j.Access;
import org.verbs4j.Context;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PooledBuffer;

/**
 * A {@code ByteBufAllocator} whose direct buffers are slices of a {@link BufferPool}, memory
 * registered once: the transport posts writes of these buffers straight from them (no copy into
 * a send buffer), while heap and other direct buffers are copied, as always. Set it per channel
 * with {@code ChannelOption.ALLOCATOR} (and {@code childOption} on a server); that channel's
 * connection then uses the allocator's protection domain if it is on the connection's device
 * (else the library's, and the buffers are copied).
 *
 * <p>Lifetimes follow the work: a buffer written is not returned to the pool until every send
 * posted from it completed (or its connection was destroyed), even when its reference count
 * reached zero before; so a slot is never handed out again while the device may still read it.
 * A request larger than the pool's largest size class, or one the exhausted pool cannot serve,
 * gets an ordinary direct buffer ({@link #fallbacks()}), which the transport copies. Heap
 * buffers are ordinary heap buffers.
 *
 * <p>Close it after every channel using it closed: {@link #close()} refuses while buffers are
 * outstanding. Thread-safe.
 */
public final class RdmaByteBufAllocator extends AbstractByteBufAllocator implements AutoCloseable {
    private final BufferPool pool;
    private final ProtectionDomain ownedPd, pd;
    private final int largest;
    private final AtomicLong fallbacks = new AtomicLong();
    /** The allocator's own hold on {@link #ownedPd} and one per loop's shared receive queue on it: closed at 0. */
    private final AtomicInteger domainHolds = new AtomicInteger(1);

    private final AtomicBoolean closed = new AtomicBoolean();

    /**
     * An allocator over {@code pool}, which stays the caller's to close (after this allocator's
     * buffers are all released). The pool's protection domain must be on the device context
     * librdmacm uses ({@code CmEventChannel.deviceContext(address)}); a pool built with {@code
     * unsafeSharedBuffers(true)} hands out buffers without an arena per lease (this allocator
     * releases each slot exactly once).
     */
    public RdmaByteBufAllocator(BufferPool pool) {
        this(pool, null);
    }

    /** An allocator over {@code pool}, closing {@code ownedPd} (its pool's domain) when it and every hold on it are done. */
    RdmaByteBufAllocator(BufferPool pool, ProtectionDomain ownedPd) {
        super(true);
        if (pool == null) {
            throw new IllegalArgumentException("RdmaByteBufAllocator: pool is null; give a BufferPool");
        }
        this.pool = pool;
        this.ownedPd = ownedPd;
        this.pd = pool.regions().getFirst().protectionDomain();
        int max = 0;
        for (int c : pool.sizeClasses()) {
            max = Math.max(max, c);
        }
        this.largest = max;
    }

    /**
     * An allocator for connections on the RDMA device serving {@code localAddress}: a protection
     * domain of its own and a pool of 1,024 buffers of 4 KiB and 128 of 64 KiB (12 MiB
     * registered once), both closed by {@link #close()}.
     *
     * @throws java.net.ConnectException no RDMA device serves the address
     */
    public static RdmaByteBufAllocator forAddress(InetAddress localAddress) throws java.net.ConnectException {
        if (localAddress == null) {
            throw new IllegalArgumentException(
                    "RdmaByteBufAllocator.forAddress: localAddress is null; give the address of an RDMA interface");
        }
        Context ctx = Connector.deviceOf(localAddress);
        ProtectionDomain pd = ctx.allocateProtectionDomain();
        try {
            BufferPool pool = BufferPool.builder(pd)
                    .name("RdmaByteBufAllocator")
                    .sizeClass(4096, 1024)
                    .sizeClass(65536, 128)
                    .access(Access.LOCAL_WRITE)
                    .unsafeSharedBuffers(true)
                    .build();
            return new RdmaByteBufAllocator(pool, pd);
        } catch (RuntimeException e) {
            pd.close();
            throw e;
        }
    }

    /** The pool the direct buffers come from. */
    public BufferPool pool() {
        return pool;
    }

    /** Direct buffers requested that the pool could not serve (too large, or exhausted). */
    public long fallbacks() {
        return fallbacks.get();
    }

    @Override
    public boolean isDirectBufferPooled() {
        return true;
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return new UnpooledHeapByteBuf(this, initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        long token = initialCapacity <= largest ? pool.tryLeaseToken(initialCapacity) : BufferPool.NO_TOKEN;
        if (token == BufferPool.NO_TOKEN) {
            fallbacks.incrementAndGet();
            return toLeakAwareBuffer(new UnpooledDirectByteBuf(this, initialCapacity, maxCapacity));
        }
        try {
            PooledBuffer slot = pool.buffer(token);
            int capacity = Math.min(slot.capacity(), maxCapacity);
            return toLeakAwareBuffer(new RegisteredByteBuf(this, slot, capacity, maxCapacity));
        } catch (RuntimeException | Error e) {
            pool.release(token);
            throw e;
        }
    }

    /** Returns a slot whose buffer was released and whose sends all completed. */
    void release(long token) {
        pool.release(token);
    }

    /**
     * The protection domain a connection on {@code ctx} should use so that this channel's
     * allocator's buffers post in place: the allocator's if it is one of these on that device, else null
     * (the library's own).
     */
    static ProtectionDomain domainFor(io.netty.buffer.ByteBufAllocator alloc, Context ctx) {
        if (alloc instanceof RdmaByteBufAllocator r) {
            return r.pd.context() == ctx ? r.pd : null;
        }
        return null;
    }

    /**
     * A hold on the protection domain a connection on {@code ctx} takes from {@code alloc}
     * ({@link #domainFor}), for a loop's shared receive queue made on it: the domain then stays
     * open until the returned action runs (once), even past the allocator's {@link #close()}.
     * Null when there is none this transport may hold (no allocator of this kind on {@code ctx},
     * one over a caller's pool, or one closed): the queue then makes a domain of its own.
     */
    static Runnable holdDomain(io.netty.buffer.ByteBufAllocator alloc, Context ctx) {
        if (!(alloc instanceof RdmaByteBufAllocator r)
                || r.ownedPd == null
                || r.pd.context() != ctx
                || r.closed.get()) {
            return null;
        }
        for (int n; (n = r.domainHolds.get()) > 0; ) {
            if (r.domainHolds.compareAndSet(n, n + 1)) {
                AtomicBoolean released = new AtomicBoolean();
                return () -> {
                    if (released.compareAndSet(false, true)) {
                        r.dropDomainHold();
                    }
                };
            }
        }
        return null;
    }

    private void dropDomainHold() {
        if (domainHolds.decrementAndGet() == 0) {
            try {
                ownedPd.close();
            } catch (RuntimeException e) { // refused (EBUSY): the hold stays, so that a later close can retry
                domainHolds.incrementAndGet();
                throw e;
            }
        }
    }

    /**
     * Closes the pool this allocator made, and its protection domain once no event loop's shared
     * receive queue holds it any more; refused, with everything left open, while any of its
     * buffers is leased or in flight, or while a connection's queue pair is still on the domain
     * (EBUSY: close the channels first, then this again). Idempotent once it succeeded. An
     * allocator over a caller's pool closes nothing.
     */
    @Override
    public void close() {
        if (ownedPd == null || closed.get()) {
            return;
        }
        if (!pool.isClosed()) { // closed by an earlier call whose domain close was refused
            pool.close();
        }
        if (closed.compareAndSet(false, true)) {
            try {
                dropDomainHold();
            } catch (RuntimeException e) {
                closed.set(false); // not closed: a later close() retries
                throw e;
            }
        }
    }

    @Override
    public String toString() {
        return "RdmaByteBufAllocator over " + pool;
    }
}
