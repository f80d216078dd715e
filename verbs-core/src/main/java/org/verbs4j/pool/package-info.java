/**
 * The registered buffer pool: regions registered once at start-up, sliced into size classes and
 * leased without registration, locks or allocation on the hot path. Leases carry a generation:
 * a lease token ({@link org.verbs4j.pool.BufferPool#leaseToken(int)}) is checked on every use,
 * so a release through a lease that ended is refused ({@link org.verbs4j.pool.StaleLeaseException}).
 * Memory is deregistered before it is freed, on close and when a dropped pool is reclaimed.
 */
package org.verbs4j.pool;
