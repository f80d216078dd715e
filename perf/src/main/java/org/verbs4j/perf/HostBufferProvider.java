package org.verbs4j.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PooledBuffer;
import org.verbs4j.pool.RegionAllocator;

/**
 * Host memory from verbs4j's registered {@link BufferPool} (docs/buffer-pool.md): one pool per
 * side with one buffer of the side's size, registered when the pool is built (before any timing;
 * nothing registers in a timed loop), leased once and zeroed; closing releases the lease and
 * closes the pool (deregistration before the memory is freed). perftest's {@code --use_hugepages}:
 * the pool's memory is one {@code mmap(MAP_HUGETLB)} mapping, or the run fails (no silent
 * fall-back). {@code --odp}: no pool; page-aligned memory of {@link Arena#ofAuto()} registered
 * on demand ({@link ProtectionDomain#registerOnDemand}), which verbs4j refuses, naming the missing
 * capability, on a device without ODP. One thread.
 */
final class HostBufferProvider implements BufferProvider {
    /** Huge pages or a clear failure: the pool's own huge-page allocator falls back to host memory. */
    static final RegionAllocator HUGE_PAGES_ONLY = new RegionAllocator() {
        @Override
        public Allocation allocate(long byteSize, long alignment) {
            Allocation a = RegionAllocator.hugePages().allocate(byteSize, alignment);
            if (!a.description().startsWith("hugetlb")) {
                a.close();
                throw new IllegalStateException(
                        "--use_hugepages: no huge pages for a buffer of " + byteSize + " bytes: " + a.description());
            }
            return a;
        }

        @Override
        public String description() {
            return "huge pages (mmap MAP_HUGETLB)";
        }
    };

    private final boolean hugePages;
    private final boolean onDemand;
    private String described = "host memory (registered BufferPool)";

    HostBufferProvider() {
        this(false, false);
    }

    HostBufferProvider(boolean hugePages, boolean onDemand) {
        this.hugePages = hugePages;
        this.onDemand = onDemand;
    }

    @Override
    public PerfBuffer allocate(ProtectionDomain pd, long bytes, Set<Access> access) {
        if (onDemand) {
            return onDemand(pd, bytes, access);
        }
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a buffer of " + bytes + " bytes is larger than a pool's size class");
        }
        BufferPool pool = BufferPool.builder(pd)
                .name("verbs-perf")
                .sizeClass((int) bytes, 1)
                .access(access)
                .singleRegion(true)
                .regionAllocator(hugePages ? HUGE_PAGES_ONLY : RegionAllocator.host())
                .build();
        PooledBuffer b;
        try {
            b = pool.lease((int) bytes);
            b.segment().fill((byte) 0);
        } catch (RuntimeException e) {
            pool.close();
            throw e;
        }
        described = (hugePages ? "huge pages" : "host memory") + " (registered BufferPool, " + pool.registrations()
                + " registration of " + (bytes >> 10) + " KiB before timing)";
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

    /** {@code --odp}: memory the region keeps alive, registered with {@code IBV_ACCESS_ON_DEMAND}. */
    private PerfBuffer onDemand(ProtectionDomain pd, long bytes, Set<Access> access) {
        MemorySegment memory = Arena.ofAuto().allocate(bytes, 4096);
        MemoryRegion mr = pd.registerOnDemand(memory, access);
        described = "host memory (on-demand paging, " + (bytes >> 10) + " KiB registered before timing)";
        return new PerfBuffer() {
            @Override
            public MemorySegment segment() {
                return memory;
            }

            @Override
            public MemoryRegion region() {
                return mr;
            }

            @Override
            public void close() {
                mr.close();
            }
        };
    }

    @Override
    public String describe() {
        return described;
    }
}
