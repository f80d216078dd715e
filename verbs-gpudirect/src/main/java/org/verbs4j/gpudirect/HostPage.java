package org.verbs4j.gpudirect;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.FunctionDescriptor;
import java.lang.invoke.MethodHandle;

/**
 * The host's page size, asked of the C library once ({@code getpagesize(3)}, the kernel's
 * {@code AT_PAGESZ}): GPU allocations are rounded up to it and dma-buf ranges must be aligned to
 * it. Stateless after initialisation; thread-safe.
 */
final class HostPage {
    private static final MethodHandle GETPAGESIZE = CudaBinding.libc("getpagesize", FunctionDescriptor.of(JAVA_INT));
    /** The page size in bytes (a power of two). */
    static final long SIZE = query();

    private HostPage() {}

    private static long query() {
        int size;
        try {
            size = (int) GETPAGESIZE.invokeExact();
        } catch (Throwable t) {
            throw new ExceptionInInitializerError(t);
        }
        if (size <= 0 || Integer.bitCount(size) != 1) {
            throw new ExceptionInInitializerError("getpagesize() answered " + size + ", not a power of two");
        }
        return size;
    }

    /** {@code bytes} rounded up to whole pages, or -1 when that does not fit a long. */
    static long roundUp(long bytes) {
        return bytes > Long.MAX_VALUE - SIZE + 1 ? -1 : (bytes + SIZE - 1) & -SIZE;
    }
}
