package org.verbs4j.pool;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.natives.Errno;

/**
 * {@code mmap(MAP_HUGETLB)} regions with a logged fall-back to host memory. Downcalls resolved
 * once; stateless apart from the once-only log flag; any thread.
 */
final class HugePageAllocator implements RegionAllocator {
    static final HugePageAllocator INSTANCE = new HugePageAllocator();
    /** The default huge page size on x86-64 and arm64 (4 KiB base pages). */
    static final long HUGE_PAGE = 2L << 20;

    private static final Logger LOG = LoggerFactory.getLogger(HugePageAllocator.class);
    private static final int PROT_READ = 1,
            PROT_WRITE = 2,
            MAP_PRIVATE = 2,
            MAP_ANONYMOUS = 0x20,
            MAP_HUGETLB = 0x40000,
            MADV_HUGEPAGE = 14;
    private static final long MAP_FAILED = -1L;
    private static final AtomicBoolean FALLBACK_LOGGED = new AtomicBoolean();

    /** {@code void *mmap(void *, size_t, int, int, int, off_t)}; pointers travel as {@code long}. */
    static final FunctionDescriptor MMAP_DESCRIPTOR =
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG);
    /** {@code int munmap(void *, size_t)}; the pointer travels as a {@code long}. */
    static final FunctionDescriptor MUNMAP_DESCRIPTOR = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG);
    /** {@code int madvise(void *, size_t, int)}; the pointer travels as a {@code long}. */
    static final FunctionDescriptor MADVISE_DESCRIPTOR =
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT);

    private static final class Calls {
        static final MethodHandle MMAP, MUNMAP, MADVISE;

        static {
            org.verbs4j.natives.NativeAccess.grantedAtStart(); // sampled before this class's restricted calls
            Linker linker = Linker.nativeLinker();
            MMAP = linker.downcallHandle(
                    linker.defaultLookup().findOrThrow("mmap"), MMAP_DESCRIPTOR, Errno.CAPTURE_OPTION);
            MUNMAP = linker.downcallHandle(linker.defaultLookup().findOrThrow("munmap"), MUNMAP_DESCRIPTOR);
            MADVISE = linker.downcallHandle(linker.defaultLookup().findOrThrow("madvise"), MADVISE_DESCRIPTOR);
        }
    }

    private HugePageAllocator() {}

    @Override
    public Allocation allocate(long byteSize, long alignment) {
        long len = roundUp(Math.max(byteSize, 1), HUGE_PAGE);
        String why;
        if (alignment > HUGE_PAGE) {
            why = "alignment " + alignment + " exceeds the huge page size";
        } else {
            try {
                MemorySegment cap = Errno.captureSegment();
                long addr = (long) Calls.MMAP.invokeExact(
                        cap, 0L, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0L);
                if (addr != MAP_FAILED) {
                    Arena arena = Arena.ofShared();
                    MemorySegment seg = MemorySegment.ofAddress(addr).reinterpret(len, arena, s -> munmap(addr, len));
                    return new Allocation(seg, "hugetlb (mmap MAP_HUGETLB, " + (len >> 20) + " MiB)", arena::close);
                }
                int e = Errno.captured(cap);
                why = "mmap(MAP_HUGETLB) of " + len + " bytes failed: " + Errno.name(e)
                        + (e == Errno.ENOMEM
                                ? " (no free huge pages: reserve some with " + "'echo N > /proc/sys/vm/nr_hugepages')"
                                : "");
            } catch (Throwable t) {
                why = "mmap is not callable: " + t;
            }
        }
        if (FALLBACK_LOGGED.compareAndSet(false, true)) {
            LOG.warn("verbs4j pool: huge pages unavailable, using ordinary host memory instead: {}", why);
        } else {
            LOG.debug("verbs4j pool: huge pages unavailable: {}", why);
        }
        Arena arena = Arena.ofShared();
        MemorySegment seg;
        try {
            seg = arena.allocate(len, Math.max(alignment, HUGE_PAGE));
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        try {
            int ignored = (int) Calls.MADVISE.invokeExact(seg.address(), len, MADV_HUGEPAGE);
        } catch (Throwable ignored) {
            // a hint only
        }
        return new Allocation(seg, "host (huge pages unavailable: " + why + ")", arena::close);
    }

    private static void munmap(long addr, long len) {
        try {
            int rc = (int) Calls.MUNMAP.invokeExact(addr, len);
            if (rc != 0) {
                LOG.warn("verbs4j pool: munmap of a huge-page region failed (rc {})", rc);
            }
        } catch (Throwable t) {
            LOG.warn("verbs4j pool: munmap of a huge-page region failed: {}", t.toString());
        }
    }

    static long roundUp(long v, long to) {
        return (v + to - 1) / to * to;
    }

    @Override
    public String description() {
        return "huge pages (mmap MAP_HUGETLB, host fallback)";
    }
}
