package org.verbs4j.perf;

import java.util.EnumSet;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.gpudirect.CudaDriver;
import org.verbs4j.gpudirect.GpuDevice;
import org.verbs4j.gpudirect.GpuMemory;
import org.verbs4j.gpudirect.GpuRegistrar;
import org.verbs4j.gpudirect.GpuRegistration;

/**
 * The buffer of one verbs-perf side in GPU memory, for perftest's flags: {@code --use_cuda=N}
 * (GPU N, registered through nvidia-peermem: {@code ibv_reg_mr} on the device pointer) and
 * {@code --use_cuda_dmabuf} with it (registered as a dma-buf: {@code ibv_reg_dmabuf_mr}). The
 * region has no host view: tests that read or write the buffer with the CPU (the latency tests'
 * polled markers) cannot use it, and {@link #zero()} replaces {@code buffer.fill(0)}. Owns the
 * GPU memory and its registration; {@link #close()} deregisters, then frees. One thread.
 */
public final class GpuPerfBuffer implements AutoCloseable {
    private final GpuMemory memory;
    private final GpuRegistration registration;
    private final GpuDevice device;

    private GpuPerfBuffer(GpuMemory memory, GpuRegistration registration, GpuDevice device) {
        this.memory = memory;
        this.registration = registration;
        this.device = device;
    }

    /**
     * Allocates {@code bytes} on GPU {@code cudaDevice} of the system CUDA driver and registers
     * them in {@code pd} with LOCAL_WRITE, REMOTE_WRITE and REMOTE_READ.
     *
     * @param dmaBuf {@code --use_cuda_dmabuf}: dma-buf only; else nvidia-peermem only (perftest's way)
     * @throws org.verbs4j.VerbsException with the reason (no driver, no GPU, what registration is missing)
     */
    public static GpuPerfBuffer allocate(ProtectionDomain pd, int cudaDevice, boolean dmaBuf, long bytes) {
        CudaDriver cuda = CudaDriver.system();
        GpuMemory m = GpuMemory.allocate(cuda, cudaDevice, bytes);
        try {
            GpuRegistration r = GpuRegistrar.of(dmaBuf ? GpuRegistrar.Mode.DMA_BUF : GpuRegistrar.Mode.PEERMEM)
                    .register(pd, m, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
            return new GpuPerfBuffer(m, r, cuda.device(cudaDevice));
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /** The registered region (its {@code address()}, {@code lkey()}, {@code rkey()} go into work requests). */
    public MemoryRegion region() {
        return registration.region();
    }

    /** The GPU memory (copies through the driver). */
    public GpuMemory memory() {
        return memory;
    }

    /** Sets every byte to 0 (cuMemsetD8). */
    public void zero() {
        memory.fill((byte) 0);
    }

    /** One line for the run's header, e.g. "GPU 0 (NVIDIA H200, 0000:3d:00.0): 2 MiB, DMA_BUF registration". */
    public String describe() {
        return "GPU " + device.ordinal() + " (" + device.name() + ", " + device.pciAddress() + "): "
                + (memory.byteSize() >> 10) + " KiB, " + registration.method() + " registration";
    }

    /** Deregisters the region, closes its dma-buf fd, then frees the GPU memory. */
    @Override
    public void close() {
        memory.close();
    }
}
