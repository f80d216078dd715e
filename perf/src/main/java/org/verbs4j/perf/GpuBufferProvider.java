package org.verbs4j.perf;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.gpudirect.CudaDriver;

/**
 * GPU memory ({@code --use_cuda=N}, with {@code --use_cuda_dmabuf} registered as a dma-buf)
 * through {@link GpuPerfBuffer}: allocated, zeroed and registered once before any timing. The
 * buffer has no host view ({@link PerfBuffer#segment()} is {@link MemorySegment#NULL}): only the
 * bandwidth tests, which never touch the buffer with the CPU, use it. One thread.
 */
final class GpuBufferProvider implements BufferProvider {
    private final int device;
    private final boolean dmaBuf;
    private String described;

    GpuBufferProvider(int device, boolean dmaBuf) {
        this.device = device;
        this.dmaBuf = dmaBuf;
        this.described = "GPU " + device + (dmaBuf ? " (dma-buf)" : " (nvidia-peermem)");
    }

    /** Fails before anything opens when the system has no usable CUDA driver, with the capability report's reason. */
    static void checkAvailable() {
        CudaDriver cuda = CudaDriver.system();
        if (!cuda.isAvailable()) {
            throw new UnsupportedOperationException("--use_cuda: no GPU memory on this machine: "
                    + cuda.unavailabilityCause().orElse("the CUDA driver is not available")
                    + " (verbs-perf gpu-info prints the whole report)");
        }
    }

    @Override
    public PerfBuffer allocate(ProtectionDomain pd, long bytes, Set<Access> access) {
        GpuPerfBuffer g = GpuPerfBuffer.allocate(pd, device, dmaBuf, bytes);
        try {
            g.zero();
        } catch (RuntimeException e) {
            g.close();
            throw e;
        }
        described = g.describe();
        return BufferProvider.withoutHostView(g.region(), g::close);
    }

    @Override
    public String describe() {
        return described;
    }
}
