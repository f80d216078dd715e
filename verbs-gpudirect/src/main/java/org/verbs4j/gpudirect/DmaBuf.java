package org.verbs4j.gpudirect;

import java.util.concurrent.atomic.AtomicBoolean;
import org.verbs4j.ResourceClosedException;

/**
 * A dma-buf file descriptor exported from GPU memory ({@link GpuMemory#exportDmaBuf()}): owns the
 * fd and closes it once. Register it with
 * {@code ProtectionDomain.registerDmaBuf(fd(), 0, length(), address(), access)}; close it after
 * the region is closed (the kernel keeps its own reference while the region is registered, so an
 * earlier close is harmless, only untidy). The owning {@link GpuMemory} closes it before it frees
 * the memory. After close, {@link #fd()} is refused; close the dma-buf only when no thread still
 * uses its fd number. Thread-safe.
 */
public final class DmaBuf implements AutoCloseable {
    private final int fd;
    private final long address;
    private final long length;
    private final AtomicBoolean closed = new AtomicBoolean();

    DmaBuf(int fd, long address, long length) {
        this.fd = fd;
        this.address = address;
        this.length = length;
    }

    /**
     * The file descriptor. Once closed, the number may already name another file of the process,
     * so it is never handed out again.
     *
     * @throws ResourceClosedException after {@link #close()} (this one's, or its memory's)
     */
    public int fd() {
        if (closed.get()) {
            throw new ResourceClosedException(
                    "DmaBuf.fd",
                    "the dma-buf (" + length + " bytes at 0x" + Long.toHexString(address)
                            + ") is closed: its fd number may already name another file",
                    "export the GPU memory again (GpuMemory.exportDmaBuf), or close the dma-buf only after its last use");
        }
        return fd;
    }

    /** The device address of its first byte (the iova to register it under). */
    public long address() {
        return address;
    }

    /** Its length in bytes (a multiple of the host page size). */
    public long length() {
        return length;
    }

    /** Whether {@link #close()} has run. */
    public boolean isClosed() {
        return closed.get();
    }

    /** Closes the fd (once; later calls do nothing). */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            CudaDriver.closeFd(fd);
        }
    }

    @Override
    public String toString() {
        return (closed.get() ? "closed dma-buf" : "dma-buf fd " + fd) + " (" + length + " bytes at 0x"
                + Long.toHexString(address) + ")";
    }
}
