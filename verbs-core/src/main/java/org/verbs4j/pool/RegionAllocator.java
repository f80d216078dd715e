package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * Where a {@link BufferPool}'s regions come from. The pool asks for them once, while it is built,
 * registers each with the allocator's {@link #registrar()} (unless the builder names another)
 * and frees them with {@link Allocation#close()} when it closes, always AFTER deregistering them
 * (and never when the deregistration failed): memory freed while still registered is the
 * corruption path (the device keeps writing into whatever reuses it). An allocation must
 * therefore be freed only by its {@link Allocation#close()}, never by anything else first (e.g.
 * an arena that someone else may close).
 *
 * <p>Built in: {@link #host()} (a shared arena per region, freed on close), {@link #auto()}
 * (GC-managed), {@link #of(Arena)} (pool-owned memory whose life a caller's arena bounds) and
 * {@link #hugePages()} ({@code mmap(MAP_HUGETLB)}, falling back to {@link #host()} with a logged
 * reason). The hook for device memory: a GPU module (verbs-gpudirect's {@code GpuRegionAllocator})
 * implements this interface with {@link #hostAccessible()} false, allocations made with
 * {@link Allocation#device} (an address and a size, no host segment) and a {@link #registrar()}
 * made with {@link Registrar#device} (e.g. {@code ibv_reg_dmabuf_mr}); the pool never reads or
 * writes the memory itself, and its buffers refuse {@code segment()}.
 *
 * <p>Implementations are called from the thread that builds the pool and, for
 * {@link Allocation#close()}, the thread that closes it.
 */
public interface RegionAllocator {

    /**
     * Allocates one region of at least {@code byteSize} bytes whose first byte is aligned to
     * {@code alignment} (a power of two, at least the page size).
     */
    Allocation allocate(long byteSize, long alignment);

    /** What this allocator is, for logs and metrics, e.g. {@code "host (Arena.ofShared)"}. */
    String description();

    /** Whether the CPU may read and write the memory (false for device memory). */
    default boolean hostAccessible() {
        return true;
    }

    /** How its regions are registered unless the pool's builder says otherwise. */
    default Registrar registrar() {
        return Registrar.ibvRegMr();
    }

    /** Host memory, one {@link Arena#ofShared() shared arena} per region, freed when the pool closes. */
    static RegionAllocator host() {
        return HostAllocators.SHARED;
    }

    /** Host memory from {@link Arena#ofAuto()}: freed by the GC once the pool is unreachable. */
    static RegionAllocator auto() {
        return HostAllocators.AUTO;
    }

    /**
     * Host memory whose life is bounded by a caller's arena: the pool allocates and owns it (a
     * shared arena per region, so that no arena but the pool's frees it), and gives it back, in
     * the pool's order (deregister, then free), when the pool closes or when {@code arena} closes,
     * whichever comes first. Closing {@code arena} while buffers are leased ends those leases
     * (logged): close the pool first. The memory no longer comes from {@code arena} itself,
     * because an arena frees its allocations in an order of its own (a confined arena frees its
     * first allocation first), which could free the memory before its deregistration.
     */
    static RegionAllocator of(Arena arena) {
        return new HostAllocators.FromArena(Objects.requireNonNull(arena, "arena"));
    }

    /**
     * Huge-page backed host memory: {@code mmap(MAP_ANONYMOUS | MAP_HUGETLB)}, rounded up to 2 MiB,
     * unmapped when the pool closes. When the kernel refuses (typically ENOMEM: no huge pages are
     * reserved in {@code /proc/sys/vm/nr_hugepages}), the region comes from {@link #host()}
     * instead (with {@code madvise(MADV_HUGEPAGE)} as a hint) and the reason is logged once.
     */
    static RegionAllocator hugePages() {
        return HugePageAllocator.INSTANCE;
    }

    /**
     * One allocated region: the memory and how to free it. Closing it frees the memory (once;
     * later calls do nothing). Owned by the pool that asked for it.
     */
    final class Allocation implements AutoCloseable {
        private final MemorySegment segment; // null for device memory
        private final long address;
        private final long byteSize;
        private final String description;
        private final Runnable free;
        private boolean freed; // under lock
        private final Object lock = new Object();
        /** Set by the pool once built: what the close of a bounding arena does (deregister, then free). */
        volatile Runnable revoke;

        /**
         * An allocated region of host memory.
         *
         * @param segment     the host memory (device memory: {@link #device})
         * @param description what it is, for logs (e.g. "hugetlb 2 MiB pages")
         * @param free        frees it; null when the memory is freed by someone else
         */
        public Allocation(MemorySegment segment, String description, Runnable free) {
            this.segment = Objects.requireNonNull(segment, "segment");
            this.address = segment.address();
            this.byteSize = segment.byteSize();
            this.description = Objects.requireNonNull(description, "description");
            this.free = free;
        }

        private Allocation(long address, long byteSize, String description, Runnable free) {
            if (address == 0 || byteSize <= 0) {
                throw new IllegalArgumentException("device memory needs an address and a positive size: 0x"
                        + Long.toHexString(address) + ", " + byteSize);
            }
            this.segment = null;
            this.address = address;
            this.byteSize = byteSize;
            this.description = Objects.requireNonNull(description, "description");
            this.free = free;
        }

        /**
         * Device memory (e.g. GPU memory) at {@code address}: no host segment exists for it, and
         * the pool registers it with {@link Registrar#registerDevice}.
         *
         * @param free frees it (called after its deregistration); null when freed by someone else
         */
        public static Allocation device(long address, long byteSize, String description, Runnable free) {
            return new Allocation(address, byteSize, description, free);
        }

        /** Whether the CPU may touch the memory ({@link #segment()} exists). */
        public boolean hostAccessible() {
            return segment != null;
        }

        /**
         * The memory.
         *
         * @throws IllegalStateException for device memory, which has no host view
         */
        public MemorySegment segment() {
            if (segment == null) {
                throw new IllegalStateException(
                        "device memory at 0x" + Long.toHexString(address) + " has no host view (" + description + ")");
            }
            return segment;
        }

        /** The address of the first byte (host or device). */
        public long address() {
            return address;
        }

        /** The size in bytes. */
        public long byteSize() {
            return byteSize;
        }

        /** What it is, for logs. */
        public String description() {
            return description;
        }

        /** Frees the memory (idempotent). */
        @Override
        public void close() {
            Runnable f;
            synchronized (lock) { // a private lock: a caller holding this object's monitor blocks nothing
                if (freed) {
                    return;
                }
                freed = true;
                f = free;
            }
            if (f != null) {
                f.run();
            }
        }
    }
}
