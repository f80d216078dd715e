package org.verbs4j.gpudirect;

import java.lang.foreign.MemorySegment;
import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ResourceClosedException;

/**
 * GPU memory from {@code cuMemAlloc}: the device address and size, never a host
 * {@link MemorySegment} (the CPU cannot dereference it). Copies go through the driver
 * ({@link #copyFromHost}, {@link #copyToHost}); {@code CU_POINTER_ATTRIBUTE_SYNC_MEMOPS} is set
 * on every allocation, so that memory operations on it are synchronous with respect to the
 * adapter's RDMA (what GPUDirect RDMA requires of memory the adapter touches). The size is
 * rounded up to the host page size (dma-buf export needs whole pages).
 *
 * <p>Owns the allocation and everything made from it: the {@link DmaBuf}s it exported and the
 * {@link GpuRegistration}s made over it. {@link #close()} closes the registrations first (each
 * region deregistered, then its dma-buf fd closed), then the exported fds, then frees the memory
 * ({@code cuMemFree}): GPU memory is never freed while the adapter may still write it. Memory
 * that becomes unreachable unclosed is released the same way by a Cleaner, with a warning.
 * Thread-safe: copies, exports and registrations may run on any thread; {@link #close()} waits
 * for those in progress and refuses later ones ({@link ResourceClosedException}).
 */
public final class GpuMemory implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(GpuMemory.class);
    private static final Cleaner CLEANER = Cleaner.create(
            Thread.ofPlatform().daemon().name("verbs4j-gpu-cleaner").factory());

    private final CudaDriver driver;
    private final int ordinal;
    private final long address;
    private final long byteSize;
    private final State state;
    private final Cleaner.Cleanable cleanable;

    /** What close (or the Cleaner) releases; references nothing of the GpuMemory itself. */
    private static final class State implements Runnable {
        final CudaDriver driver;
        final int ordinal;
        final long address;
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        final List<GpuRegistration> registrations = new ArrayList<>();
        final List<DmaBuf> exports = new ArrayList<>();
        boolean closed;
        volatile boolean explicit;

        State(CudaDriver driver, int ordinal, long address) {
            this.driver = driver;
            this.ordinal = ordinal;
            this.address = address;
        }

        @Override
        public void run() {
            lock.writeLock().lock();
            try {
                if (closed) {
                    return;
                }
                closed = true;
                if (!explicit) {
                    LOG.warn(
                            "verbs4j: GPU memory at 0x{} became unreachable without close(): releasing it now "
                                    + "(close GpuMemory when done)",
                            Long.toHexString(address));
                }
                boolean deregistered = true;
                for (GpuRegistration r : registrations) {
                    try {
                        r.close(); // deregister, then close its fd
                    } catch (RuntimeException e) {
                        deregistered = false;
                        LOG.warn(
                                "verbs4j: deregistering GPU memory at 0x{} failed ({}): the memory is leaked, not freed",
                                Long.toHexString(address),
                                e.getMessage());
                    }
                }
                for (DmaBuf d : exports) {
                    d.close();
                }
                if (!deregistered) {
                    return; // never free memory the adapter may still write
                }
                driver.makeCurrent(ordinal);
                int rc = driver.memFree(address);
                if (rc != 0) {
                    LOG.warn("verbs4j: cuMemFree_v2(0x{}) failed: {}", Long.toHexString(address), driver.describe(rc));
                }
            } finally {
                lock.writeLock().unlock();
            }
        }
    }

    private GpuMemory(CudaDriver driver, int ordinal, long address, long byteSize) {
        this.driver = driver;
        this.ordinal = ordinal;
        this.address = address;
        this.byteSize = byteSize;
        this.state = new State(driver, ordinal, address);
        this.cleanable = CLEANER.register(this, state);
    }

    /** Allocates {@code size} bytes on GPU {@code ordinal} of the {@link CudaDriver#system() system driver}. */
    public static GpuMemory allocate(int ordinal, long size) {
        return allocate(CudaDriver.system(), ordinal, size);
    }

    /**
     * {@code cuMemAlloc_v2} of {@code size} bytes (rounded up to the host page size) on GPU
     * {@code ordinal}, in its primary context, with {@code CU_POINTER_ATTRIBUTE_SYNC_MEMOPS} set.
     *
     * @throws CudaException when the driver is unavailable (with the reason) or refuses
     */
    public static GpuMemory allocate(CudaDriver driver, int ordinal, long size) {
        if (size <= 0) {
            throw new InvalidRequestException("cuMemAlloc_v2", "the size must be positive: " + size, null);
        }
        driver.ensureAvailable();
        long rounded = HostPage.roundUp(size);
        if (rounded < 0) {
            throw new InvalidRequestException(
                    "cuMemAlloc_v2",
                    "the size " + size + " cannot be rounded up to whole " + "host pages of " + HostPage.SIZE
                            + " bytes",
                    null);
        }
        driver.makeCurrent(ordinal);
        long dptr = driver.memAlloc(rounded);
        try {
            driver.setSyncMemops(dptr);
        } catch (RuntimeException e) {
            driver.memFree(dptr);
            throw e;
        }
        LOG.debug(
                "cuMemAlloc_v2: {} bytes at 0x{} on GPU {} (SYNC_MEMOPS set)",
                rounded,
                Long.toHexString(dptr),
                ordinal);
        return new GpuMemory(driver, ordinal, dptr, rounded);
    }

    /** The device address of the first byte (what SGEs and peers name). */
    public long address() {
        return address;
    }

    /** The size in bytes (a multiple of the {@link #hostPageSize() host page size}). */
    public long byteSize() {
        return byteSize;
    }

    /**
     * The host's page size (the kernel's, from {@code getpagesize(3)}): allocations are rounded
     * up to it and dma-buf exports are whole pages of it.
     */
    public static long hostPageSize() {
        return HostPage.SIZE;
    }

    /** The GPU's ordinal. */
    public int ordinal() {
        return ordinal;
    }

    /** The driver it was allocated through. */
    public CudaDriver driver() {
        return driver;
    }

    /** Whether {@link #close()} has not run yet. */
    public boolean isOpen() {
        state.lock.readLock().lock();
        try {
            return !state.closed;
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /** {@code cuMemcpyHtoD}: copies all of {@code src} (native memory) to {@code offset}. */
    public void copyFromHost(MemorySegment src, long offset) {
        String fn = "cuMemcpyHtoD_v2";
        checkCopy(fn, src, offset);
        use(fn, () -> driver.copyHtoD(address + offset, src, src.byteSize()));
    }

    /** {@code cuMemcpyDtoH}: fills all of {@code dst} (native memory) from {@code offset}. */
    public void copyToHost(long offset, MemorySegment dst) {
        String fn = "cuMemcpyDtoH_v2";
        checkCopy(fn, dst, offset);
        use(fn, () -> driver.copyDtoH(dst, address + offset, dst.byteSize()));
    }

    /** {@code cuMemsetD8}: sets every byte to {@code value}. */
    public void fill(byte value) {
        use("cuMemsetD8_v2", () -> {
            driver.memset(address, value, byteSize);
            driver.synchronize();
        });
    }

    private void checkCopy(String fn, MemorySegment host, long offset) {
        if (!host.isNative()) {
            throw new InvalidRequestException(
                    fn,
                    "a heap segment cannot be copied by the driver (the GC moves it)",
                    "copy from or to native memory (an Arena's segment)");
        }
        if (!host.scope().isAlive()) {
            throw new InvalidRequestException(fn, "the host segment's arena is closed", null);
        }
        if (offset < 0 || offset > byteSize - host.byteSize()) {
            throw new InvalidRequestException(
                    fn,
                    "[" + offset + ", " + offset + " + " + host.byteSize() + ") lies outside the " + byteSize
                            + " bytes of GPU memory",
                    null);
        }
    }

    /**
     * Exports the whole allocation as a dma-buf ({@code cuMemGetHandleForAddressRange}, type
     * {@code CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD}). Closed by {@link #close()} at the latest.
     */
    public DmaBuf exportDmaBuf() {
        DmaBuf[] out = new DmaBuf[1];
        use("cuMemGetHandleForAddressRange", () -> {
            DmaBuf d = new DmaBuf(driver.exportDmaBuf(address, byteSize), address, byteSize);
            synchronized (state.exports) {
                state.exports.add(d);
            }
            out[0] = d;
        });
        return out[0];
    }

    /** Registers the whole allocation in {@code pd} the {@link GpuRegistrar#automatic() automatic} way. */
    public GpuRegistration register(ProtectionDomain pd, Access... access) {
        return GpuRegistrar.automatic()
                .register(pd, this, access.length == 0 ? EnumSet.noneOf(Access.class) : EnumSet.of(access[0], access));
    }

    /** Adds a registration made over this memory (closed before the memory is freed). */
    GpuRegistration track(GpuRegistration r) {
        synchronized (state.registrations) {
            state.registrations.add(r);
        }
        return r;
    }

    /** Runs {@code work} with the memory guaranteed allocated, in this GPU's context. */
    void use(String fn, Runnable work) {
        state.lock.readLock().lock();
        try {
            if (state.closed) {
                throw new ResourceClosedException(
                        fn,
                        "the GPU memory at 0x" + Long.toHexString(address) + " was freed",
                        "use GPU memory before closing it");
            }
            driver.makeCurrent(ordinal);
            work.run();
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /**
     * Closes every registration over it (regions deregistered, then their dma-buf fds closed),
     * the dma-bufs it exported, then frees the memory. Idempotent.
     */
    @Override
    public void close() {
        state.explicit = true;
        cleanable.clean();
    }

    /** The registrations made over it that are still tracked (for tests and reports). */
    List<GpuRegistration> registrations() {
        synchronized (state.registrations) {
            return List.copyOf(state.registrations);
        }
    }

    @Override
    public String toString() {
        return "GPU " + ordinal + " memory: " + byteSize + " bytes at 0x" + Long.toHexString(address);
    }
}
