package org.verbs4j.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.LongAdder;

/**
 * The counters of one pool behind {@link PoolMetrics}: bytes leased now and their high-water
 * mark, leases that missed the thread cache, leases served by the shared lists or by stealing,
 * and leases that found their class empty. Allocation-free, lock-free; any thread.
 */
final class PoolCounters {
    private static final VarHandle BYTES_IN_USE, HIGH_WATER;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            BYTES_IN_USE = l.findVarHandle(PoolCounters.class, "bytesInUse", long.class);
            HIGH_WATER = l.findVarHandle(PoolCounters.class, "highWater", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final LongAdder cacheMisses = new LongAdder();
    final LongAdder sharedLeases = new LongAdder();
    final LongAdder exhaustions = new LongAdder();

    @SuppressWarnings("unused") // through BYTES_IN_USE
    private volatile long bytesInUse;

    @SuppressWarnings("unused") // through HIGH_WATER
    private volatile long highWater;

    /** A buffer of {@code size} bytes was leased. */
    void leased(int size) {
        long used = (long) BYTES_IN_USE.getAndAdd(this, (long) size) + size;
        if (used > (long) HIGH_WATER.getOpaque(this)) {
            raiseHighWater(used);
        }
    }

    /** A buffer of {@code size} bytes was released. */
    void released(int size) {
        BYTES_IN_USE.getAndAdd(this, -(long) size);
    }

    private void raiseHighWater(long used) {
        long h;
        while (used > (h = (long) HIGH_WATER.getVolatile(this))) {
            if (HIGH_WATER.compareAndSet(this, h, used)) {
                return;
            }
        }
    }

    long bytesInUse() {
        return (long) BYTES_IN_USE.getVolatile(this);
    }

    long highWater() {
        return (long) HIGH_WATER.getVolatile(this);
    }
}
