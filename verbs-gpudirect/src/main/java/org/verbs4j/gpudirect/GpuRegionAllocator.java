package org.verbs4j.gpudirect;

import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.pool.RegionAllocator;
import org.verbs4j.pool.Registrar;

/**
 * GPU memory for a {@link org.verbs4j.pool.BufferPool}: the pool allocates its regions here
 * ({@code cuMemAlloc} on one GPU, device memory without a host view), registers each once with
 * this allocator's {@link #registrar()} (a {@link GpuRegistrar}: dma-buf, then nvidia-peermem,
 * as its mode allows), and leases buffers of it like host buffers; their {@code segment()}
 * refuses, their {@code address()}/{@code lkey()}/{@code rkey()} go into work requests. When
 * the pool closes it deregisters each region, then frees it here ({@link GpuMemory#close()}:
 * the dma-buf fd is closed, then {@code cuMemFree}).
 *
 * <pre>{@code
 * try (BufferPool pool = BufferPool.builder(pd)
 *         .regionAllocator(GpuRegionAllocator.of(0))        // GPU 0, dma-buf or peermem
 *         .sizeClass(1 << 20, 64).access(Access.LOCAL_WRITE, Access.REMOTE_WRITE).build()) { ... }
 * }</pre>
 *
 * Called by the pool's building and closing threads; thread-safe.
 */
public final class GpuRegionAllocator implements RegionAllocator {
    private final CudaDriver driver;
    private final int ordinal;
    private final GpuRegistrar registrar;
    private final Map<Long, GpuMemory> live = new ConcurrentHashMap<>();

    /**
     * An allocator of GPU memory on GPU {@code ordinal}, registered by {@code registrar}.
     *
     * @param driver    the CUDA driver (e.g. {@link CudaDriver#system()})
     * @param ordinal   the GPU
     * @param registrar how the regions are registered
     */
    public GpuRegionAllocator(CudaDriver driver, int ordinal, GpuRegistrar registrar) {
        this.driver = Objects.requireNonNull(driver, "driver");
        this.ordinal = ordinal;
        this.registrar = Objects.requireNonNull(registrar, "registrar");
    }

    /** GPU {@code ordinal} of the system driver, registered the automatic way (dma-buf, then peermem). */
    public static GpuRegionAllocator of(int ordinal) {
        return new GpuRegionAllocator(CudaDriver.system(), ordinal, GpuRegistrar.automatic());
    }

    /** GPU {@code ordinal} of the system driver, registered as {@code mode} allows. */
    public static GpuRegionAllocator of(int ordinal, GpuRegistrar.Mode mode) {
        return new GpuRegionAllocator(CudaDriver.system(), ordinal, GpuRegistrar.of(mode));
    }

    @Override
    public Allocation allocate(long byteSize, long alignment) {
        GpuMemory m = GpuMemory.allocate(driver, ordinal, byteSize);
        if ((m.address() & (alignment - 1)) != 0) {
            m.close();
            throw new InvalidRequestException(
                    "cuMemAlloc_v2",
                    "the driver returned 0x" + Long.toHexString(m.address()) + ", not aligned to " + alignment,
                    "ask for an alignment of at most 2 MiB");
        }
        live.put(m.address(), m);
        return Allocation.device(m.address(), m.byteSize(), m.toString(), () -> {
            live.remove(m.address());
            m.close();
        });
    }

    @Override
    public String description() {
        return "GPU " + ordinal + " memory (cuMemAlloc, " + registrar.mode() + " registration)";
    }

    @Override
    public boolean hostAccessible() {
        return false;
    }

    @Override
    public Registrar registrar() {
        return Registrar.device((pd, address, byteSize, access) -> {
            GpuMemory m = live.get(address);
            if (m == null) {
                throw new InvalidRequestException(
                        "Registrar.registerDevice",
                        "0x" + Long.toHexString(address) + " was not allocated by this GPU allocator",
                        "register memory of the same allocator");
            }
            return registrar.register(pd, m, access).region();
        });
    }

    /** The GPU memory allocated and not yet freed (for tests and reports). */
    int liveAllocations() {
        return live.size();
    }
}
