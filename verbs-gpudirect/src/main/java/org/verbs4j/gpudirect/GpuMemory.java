package org.verbs4j.gpudirect;

import java.lang.foreign.MemorySegment;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ResourceBusyException;
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
 * (bounded) for those in progress and refuses later ones ({@link ResourceClosedException}); a
 * close that gives up waiting is refused ({@link ResourceBusyException}) and changes nothing.
 * Every copy checks its host segment (native, writable where written, alive, accessible from
 * this thread, inside the allocation) before any native code runs, in every mode.
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
        /** Read: a copy, export or registration in progress; write: the close. */
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();

        final List<GpuRegistration> registrations = new ArrayList<>();
        final List<DmaBuf> exports = new ArrayList<>();
        /** Written under the write lock; read without it by {@link GpuMemory#isOpen()}. */
        volatile boolean closed;

        State(CudaDriver driver, int ordinal, long address) {
            this.driver = driver;
            this.ordinal = ordinal;
            this.address = address;
        }

        /** The Cleaner: the memory is unreachable, so nothing can be using it. */
        @Override
        public void run() {
            lock.writeLock().lock();
            try {
                if (!closed) {
                    LOG.warn(
                            "verbs4j: GPU memory at 0x{} became unreachable without close(): releasing it now "
                                    + "(close GpuMemory when done)",
                            Long.toHexString(address));
                    release();
                }
            } finally {
                lock.writeLock().unlock();
            }
        }

        /**
         * close(): waits at most {@code waitNanos} for the copies, exports and registrations in
         * progress, then releases everything. Null when closed; else why not (nothing changed).
         */
        String close(long waitNanos) {
            if (lock.getReadHoldCount() > 0) {
                return "close() was called from inside a copy, export or registration of this memory";
            }
            try {
                if (!lock.writeLock().tryLock(waitNanos, TimeUnit.NANOSECONDS)) {
                    return "a copy, export or registration on another thread did not finish within "
                            + waitNanos / 1_000_000 + " ms";
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return "the closing thread was interrupted while it waited for a copy, export or registration";
            }
            try {
                if (!closed) {
                    release();
                }
                return null;
            } finally {
                lock.writeLock().unlock();
            }
        }

        /** Under the write lock: the registrations, then the exports, then the memory. */
        private void release() {
            closed = true;
            boolean deregistered = true;
            for (GpuRegistration r : registrations) {
                try {
                    r.close(); // deregister, then close its fd
                } catch (RuntimeException e) {
                    deregistered = false;
                    LOG.warn(
                            "verbs4j: deregistering GPU memory at 0x{} was refused ({}): the memory is leaked, not freed",
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
                LOG.warn("verbs4j: cuMemFree_v2(0x{}) answered {}", Long.toHexString(address), driver.describe(rc));
            }
        }
    }

    /**
     * The longest {@link #close()} waits for copies, exports and registrations in progress on
     * other threads, as verbs-core's close waits for a post or poll in progress (10 s); a test
     * shortens it.
     */
    static volatile long closeWaitNanos = 10_000_000_000L;

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
            throw new InvalidRequestException(
                    "cuMemAlloc_v2", "the size must be positive: " + size, "allocate at least 1 byte");
        }
        driver.ensureAvailable();
        long rounded = HostPage.roundUp(size);
        if (rounded < 0) {
            throw new InvalidRequestException(
                    "cuMemAlloc_v2",
                    "the size " + size + " cannot be rounded up to whole " + "host pages of " + HostPage.SIZE
                            + " bytes",
                    "allocate at most " + (Long.MAX_VALUE & -HostPage.SIZE) + " bytes");
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
        return !state.closed;
    }

    /**
     * {@code cuMemcpyHtoD}: copies all of {@code src} (native memory, read-only views included) to
     * {@code offset}.
     *
     * @throws InvalidRequestException (before any native code runs) when {@code src} is a heap
     *     segment, its arena is closed or confined to another thread, or it does not fit at
     *     {@code offset}
     * @throws ResourceClosedException when this memory was closed
     */
    public void copyFromHost(MemorySegment src, long offset) {
        String fn = "cuMemcpyHtoD_v2";
        checkCopy(fn, src, offset, false);
        use(fn, () -> {
            try {
                driver.copyHtoD(address + offset, src, src.byteSize());
            } catch (IllegalStateException | WrongThreadException e) {
                throw hostSegmentGone(fn, e);
            }
        });
    }

    /**
     * {@code cuMemcpyDtoH}: fills all of {@code dst} (writable native memory) from {@code offset}.
     *
     * @throws InvalidRequestException (before any native code runs) when {@code dst} is read-only
     *     (a read-only file mapping, a view made by {@code asReadOnly()}), a heap segment, its
     *     arena is closed or confined to another thread, or it does not fit at {@code offset}
     * @throws ResourceClosedException when this memory was closed
     */
    public void copyToHost(long offset, MemorySegment dst) {
        String fn = "cuMemcpyDtoH_v2";
        checkCopy(fn, dst, offset, true);
        use(fn, () -> {
            try {
                driver.copyDtoH(dst, address + offset, dst.byteSize());
            } catch (IllegalStateException | WrongThreadException e) {
                throw hostSegmentGone(fn, e);
            }
        });
    }

    /** {@code cuMemsetD8}: sets every byte to {@code value}. */
    public void fill(byte value) {
        use("cuMemsetD8_v2", () -> {
            driver.memset(address, value, byteSize);
            driver.synchronize();
        });
    }

    /**
     * The checks that keep the JVM safe, in every mode, before any native code runs: the driver
     * copies with the CPU, so a read-only, freed or foreign-thread segment would fault or be
     * written behind the owner's back.
     */
    private void checkCopy(String fn, MemorySegment host, long offset, boolean written) {
        if (host == null) {
            throw new InvalidRequestException(fn, "the host segment is null", "pass a segment of an Arena");
        }
        if (!host.isNative()) {
            throw new InvalidRequestException(
                    fn,
                    "a heap segment cannot be copied by the driver (the GC moves it)",
                    "copy from or to native memory (an Arena's segment)");
        }
        if (written && host.isReadOnly()) {
            throw new InvalidRequestException(
                    fn,
                    "the host segment of " + host.byteSize()
                            + " bytes is read-only (a read-only file mapping or an asReadOnly() view): the copy would write it",
                    "copy into writable memory (an Arena's segment, or a READ_WRITE mapping)");
        }
        if (!host.scope().isAlive()) {
            throw new InvalidRequestException(
                    fn,
                    CudaException.EFAULT,
                    "the host segment's arena is closed (its memory was freed)",
                    "keep the arena open until the copy returns");
        }
        if (!host.isAccessibleBy(Thread.currentThread())) {
            throw new InvalidRequestException(
                    fn,
                    "the host segment belongs to a confined arena of another thread",
                    "copy on the thread that owns the arena, or allocate from Arena.ofShared()");
        }
        if (offset < 0 || offset > byteSize - host.byteSize()) {
            throw new InvalidRequestException(
                    fn,
                    "the offset " + offset + " and the host segment's " + host.byteSize() + " bytes lie outside the "
                            + byteSize + " bytes of GPU memory",
                    "copy at an offset in [0, " + byteSize + " - segment size]");
        }
    }

    /** The host segment's arena closed (or changed hands) between the checks and the downcall. */
    private static InvalidRequestException hostSegmentGone(String fn, RuntimeException e) {
        InvalidRequestException x = new InvalidRequestException(
                fn,
                CudaException.EFAULT,
                "the host segment's arena was closed by another thread as the copy started ("
                        + e.getClass().getSimpleName() + ")",
                "close an arena only after the copies that use it have returned");
        x.initCause(e);
        return x;
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
                state.exports.removeIf(DmaBuf::isClosed);
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

    /** Adds a registration made over this memory (closed before the memory is freed); call inside {@link #use}. */
    GpuRegistration track(GpuRegistration r) {
        synchronized (state.registrations) {
            state.registrations.add(r);
        }
        return r;
    }

    /** Throws the use-after-close exception for {@code fn} if this memory was closed. */
    void ensureOpen(String fn) {
        if (state.closed) {
            throw closedException(fn);
        }
    }

    private ResourceClosedException closedException(String fn) {
        return new ResourceClosedException(
                fn,
                "the GPU memory at 0x" + Long.toHexString(address) + " was freed (closed)",
                "use GPU memory before closing it");
    }

    /**
     * Runs {@code work} with the memory guaranteed allocated, in this GPU's context: a
     * {@link #close()} on another thread waits (bounded) until it returned.
     */
    void use(String fn, Runnable work) {
        state.lock.readLock().lock();
        try {
            if (state.closed) {
                throw closedException(fn);
            }
            driver.makeCurrent(ordinal);
            work.run();
        } finally {
            state.lock.readLock().unlock();
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Closes every registration over it (regions deregistered, then their dma-buf fds closed),
     * the dma-bufs it exported, then frees the memory. Idempotent. Waits up to 10 s for copies,
     * exports and registrations in progress on other threads; those that start later are refused
     * ({@link ResourceClosedException}).
     *
     * @throws ResourceBusyException (and nothing is closed: the memory stays fully usable) when
     *     a copy, export or registration did not finish within 10 s, when called from inside one
     *     (a registration's callback), or when the calling thread was interrupted while waiting
     */
    @Override
    public void close() {
        String refused = state.close(closeWaitNanos);
        if (refused != null) {
            throw new ResourceBusyException(
                    "cuMemFree_v2",
                    refused + "; the GPU memory at 0x" + Long.toHexString(address) + " stays open and usable",
                    "close GPU memory after the threads that copy to it, export it or register it have returned");
        }
        cleanable.clean(); // already released: unregisters the Cleaner's action
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
