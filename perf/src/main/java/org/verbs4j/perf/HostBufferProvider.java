package org.verbs4j.perf;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PooledBuffer;

/**
 * Host memory from verbs4j's registered {@link BufferPool} (docs/buffer-pool.md): one pool per
 * side with one buffer of the side's size, registered when the pool is built (before any timing;
 * nothing registers in a timed loop), leased once and zeroed; closing releases the lease and
 * closes the pool (deregistration before the memory is freed). One thread.
 */
final class HostBufferProvider implements BufferProvider {
    private String described = "host memory (registered BufferPool)";

    @Override
    public PerfBuffer allocate(ProtectionDomain pd, long bytes, Set<Access> access) {
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a buffer of " + bytes + " bytes is larger than a pool's size class");
        }
        BufferPool pool = BufferPool.builder(pd)
                .name("verbs-perf")
                .sizeClass((int) bytes, 1)
                .access(access)
                .singleRegion(true)
                .build();
        PooledBuffer b;
        try {
            b = pool.lease((int) bytes);
            b.segment().fill((byte) 0);
        } catch (RuntimeException e) {
            pool.close();
            throw e;
        }
        described = "host memory (registered BufferPool, " + pool.registrations() + " registration of " + (bytes >> 10)
                + " KiB before timing)";
        return new PerfBuffer() {
            @Override
            public MemorySegment segment() {
                return b.segment();
            }

            @Override
            public MemoryRegion region() {
                return b.region();
            }

            @Override
            public long offset() {
                return b.offset();
            }

            @Override
            public void close() {
                try {
                    b.release();
                } finally {
                    pool.close();
                }
            }
        };
    }

    @Override
    public String describe() {
        return described;
    }
}
