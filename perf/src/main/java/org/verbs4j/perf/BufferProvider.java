package org.verbs4j.perf;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;

/**
 * Where verbs-perf's buffers come from: the one place a GPU allocator (perftest's
 * {@code --use_cuda}, {@code --use_cuda_dmabuf}) plugs in. A provider allocates and registers
 * a buffer once, before any timing; the timed loops only use it. {@link #forOptions} picks the
 * provider of a run.
 */
public interface BufferProvider {

    /** A registered buffer; closing it deregisters and frees it. Owned by the side that asked for it. */
    interface PerfBuffer extends AutoCloseable {
        MemorySegment segment();

        MemoryRegion region();

        /** Where the buffer starts inside {@link #region()} (a pool's buffer may lie inside a larger region). */
        default long offset() {
            return 0;
        }

        @Override
        void close();
    }

    /** A buffer with no host view ({@link PerfBuffer#segment()} is {@code NULL}: GPU or device memory) that {@code close} frees. */
    static PerfBuffer withoutHostView(MemoryRegion region, Runnable close) {
        return new PerfBuffer() {
            @Override
            public MemorySegment segment() {
                return MemorySegment.NULL;
            }

            @Override
            public MemoryRegion region() {
                return region;
            }

            @Override
            public void close() {
                close.run();
            }
        };
    }

    /** A buffer of {@code bytes}, page-aligned, zeroed, registered on {@code pd} with {@code access}. */
    PerfBuffer allocate(ProtectionDomain pd, long bytes, Set<Access> access);

    /** For the header: "host memory", "GPU 0 (dma-buf)", ... */
    String describe();

    /**
     * The provider the options ask for: GPU memory with {@code --use_cuda}, the adapter's memory
     * with {@code --dm}, else host memory (in huge pages with {@code --use_hugepages}, registered
     * on demand with {@code --odp}).
     */
    static BufferProvider forOptions(PerfOptions o) {
        if (o.useCuda != null) {
            return new GpuBufferProvider(o.useCuda, o.useCudaDmabuf);
        }
        return o.dm ? new DeviceMemoryBufferProvider() : new HostBufferProvider(o.useHugepages, o.odp);
    }
}
