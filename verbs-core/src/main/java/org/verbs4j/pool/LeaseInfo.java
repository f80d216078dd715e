package org.verbs4j.pool;

/**
 * One buffer that is leased (or was found leaked) at the time of a report, from
 * {@link BufferPool#outstandingLeases()}.
 *
 * @param bufferSize the buffer's size class in bytes
 * @param slot       the buffer's {@link PooledBuffer#id() id}
 * @param leaked     true when the buffer became unreachable without being released (leak
 *                   tracking on); its slot is quarantined and never leased again
 * @param site       where it was leased, when {@code -Dverbs4j.pool.leakSites=true} (else null)
 */
public record LeaseInfo(int bufferSize, int slot, boolean leaked, Throwable site) {}
