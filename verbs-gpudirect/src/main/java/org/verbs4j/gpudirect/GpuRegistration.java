package org.verbs4j.gpudirect;

import java.util.List;
import org.verbs4j.MemoryRegion;

/**
 * GPU memory registered with an RDMA device: the {@link MemoryRegion} (no host view; its
 * {@code address()} is the device address), how it was registered, and what was tried on the
 * way. Owns the region and, for a dma-buf registration, the exported fd: {@link #close()}
 * deregisters the region, then closes the fd. The {@link GpuMemory} it was made from closes it
 * before freeing the memory. Thread-safe.
 */
public final class GpuRegistration implements AutoCloseable {
    /** How GPU memory was registered. */
    public enum Method {
        /** {@code cuMemGetHandleForAddressRange} exported a dma-buf, registered with {@code ibv_reg_dmabuf_mr}. */
        DMA_BUF,
        /** {@code ibv_reg_mr} on the device pointer, which the nvidia-peermem kernel module makes possible. */
        PEERMEM
    }

    private final MemoryRegion region;
    private final Method method;
    private final DmaBuf dmaBuf;
    private final List<String> attempts;

    GpuRegistration(MemoryRegion region, Method method, DmaBuf dmaBuf, List<String> attempts) {
        this.region = region;
        this.method = method;
        this.dmaBuf = dmaBuf;
        this.attempts = List.copyOf(attempts);
    }

    /** The registered region (device memory: {@code segment()} refuses). */
    public MemoryRegion region() {
        return region;
    }

    /** How it was registered. */
    public Method method() {
        return method;
    }

    /** The steps tried, in order, with their outcome (the last one succeeded). */
    public List<String> attempts() {
        return attempts;
    }

    /** Deregisters the region (if still open), then closes the dma-buf fd. Idempotent. */
    @Override
    public synchronized void close() {
        try {
            if (region.isOpen()) {
                region.close();
            }
        } finally {
            if (dmaBuf != null && !region.isOpen()) {
                dmaBuf.close(); // only after the deregistration
            }
        }
    }

    @Override
    public String toString() {
        return method + " registration of " + region.length() + " bytes at 0x" + Long.toHexString(region.address())
                + (dmaBuf != null ? " (" + dmaBuf + ")" : "");
    }
}
