package org.verbs4j.pool;

import java.util.List;

/**
 * A snapshot of a {@link BufferPool}'s counters ({@link BufferPool#metrics()}). Counters that are
 * kept per thread are summed without stopping the world, so a snapshot taken while other threads
 * lease is approximate; at quiescence it is exact.
 *
 * @param leases             successful leases since start-up
 * @param cacheMisses        leases (or attempts) that the calling thread's cache could not serve
 *                           and went to the shared free list
 * @param exhaustions        leases that found their size class empty (they failed, waited, or
 *                           tryLease returned null)
 * @param bytesInUse         bytes of the buffers leased now (leaked ones included)
 * @param highWaterMarkBytes the most bytes ever leased at once
 * @param registrations      memory registrations the pool performed; fixed at start-up
 * @param leaked             buffers found unreachable without a release (leak tracking on)
 * @param sizeClasses        per size class: size, buffers, leased now, leaked
 */
public record PoolMetrics(
        long leases,
        long cacheMisses,
        long exhaustions,
        long bytesInUse,
        long highWaterMarkBytes,
        long registrations,
        long leaked,
        List<SizeClassMetrics> sizeClasses) {

    /** Thread-cache misses plus exhaustions. */
    public long misses() {
        return cacheMisses + exhaustions;
    }

    /** One size class of the snapshot. */
    public record SizeClassMetrics(int bufferSize, int buffers, int leased, int leaked) {}
}
