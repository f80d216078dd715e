package org.verbs4j.gpudirect;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;

/**
 * Registers GPU memory with an RDMA device, trying in order, each step's outcome logged at debug:
 * <ol>
 *   <li><b>dma-buf</b>: when the GPU reports {@code CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED}, the
 *       memory (host-page aligned) is exported with {@code cuMemGetHandleForAddressRange} and
 *       registered with {@code ibv_reg_dmabuf_mr(pd, 0, size, iova = device address, fd)};</li>
 *   <li><b>nvidia-peermem</b>: when the module is loaded ({@link PeerMemory}), {@code ibv_reg_mr}
 *       on the device pointer;</li>
 *   <li>else one {@link GpuRegistrationException} listing what was tried and what is missing.</li>
 * </ol>
 * {@link Mode#DMA_BUF} and {@link Mode#PEERMEM} restrict it to one way (perftest's
 * {@code --use_cuda_dmabuf} and {@code --use_cuda}). Immutable and thread-safe.
 */
public final class GpuRegistrar {
    private static final Logger LOG = LoggerFactory.getLogger(GpuRegistrar.class);

    /** Which ways it may try. */
    public enum Mode {
        /** dma-buf first, then nvidia-peermem. */
        AUTOMATIC,
        /** dma-buf only ({@code ibv_reg_dmabuf_mr}). */
        DMA_BUF,
        /** nvidia-peermem only ({@code ibv_reg_mr} on the device pointer). */
        PEERMEM
    }

    /** The verbs calls it makes: the real ones, or a test's stand-in provider. */
    interface Verbs {
        MemoryRegion dmaBuf(ProtectionDomain pd, int fd, long offset, long length, long iova, Set<Access> access);

        MemoryRegion deviceMemory(ProtectionDomain pd, long address, long length, Set<Access> access);
    }

    private static final Verbs REAL = new Verbs() {
        @Override
        public MemoryRegion dmaBuf(
                ProtectionDomain pd, int fd, long offset, long length, long iova, Set<Access> access) {
            return pd.registerDmaBuf(fd, offset, length, iova, access);
        }

        @Override
        public MemoryRegion deviceMemory(ProtectionDomain pd, long address, long length, Set<Access> access) {
            return pd.registerDeviceMemory(address, length, access);
        }
    };

    private final Mode mode;
    private final Path sys;
    private final Verbs verbs;

    GpuRegistrar(Mode mode, Path sys, Verbs verbs) {
        this.mode = Objects.requireNonNull(mode, "mode");
        this.sys = Objects.requireNonNull(sys, "sys");
        this.verbs = Objects.requireNonNull(verbs, "verbs");
    }

    /** dma-buf, then nvidia-peermem (sysfs at {@code /sys}). */
    public static GpuRegistrar automatic() {
        return of(Mode.AUTOMATIC);
    }

    /** A registrar restricted to {@code mode} (sysfs at {@code /sys}). */
    public static GpuRegistrar of(Mode mode) {
        return new GpuRegistrar(mode, Path.of("/sys"), REAL);
    }

    /** A registrar restricted to {@code mode}, reading sysfs at {@code sys}, registering with the real verbs. */
    static GpuRegistrar of(Mode mode, Path sys) {
        return new GpuRegistrar(mode, sys, REAL);
    }

    /** Its mode. */
    public Mode mode() {
        return mode;
    }

    /**
     * Registers all of {@code memory} in {@code pd}. The registration is owned by
     * {@code memory} too: closing the memory closes it first.
     *
     * @throws GpuRegistrationException listing every step tried and why it failed
     */
    public GpuRegistration register(ProtectionDomain pd, GpuMemory memory, Set<Access> access) {
        String verb = mode == Mode.PEERMEM ? "ibv_reg_mr" : "ibv_reg_dmabuf_mr";
        if (pd == null || memory == null || access == null) {
            throw new InvalidRequestException(
                    verb,
                    (pd == null ? "the protection domain" : memory == null ? "the GPU memory" : "the access set")
                            + " is null",
                    "pass an open ProtectionDomain, open GpuMemory and a set of Access rights (may be empty)");
        }
        memory.ensureOpen(verb); // before the device query and the sysfs probe: nothing to register
        Set<Access> rights = access.isEmpty() ? EnumSet.noneOf(Access.class) : EnumSet.copyOf(access);
        List<String> attempts = new ArrayList<>();
        GpuDevice gpu = memory.driver().device(memory.ordinal());
        String where = "GPU " + gpu.ordinal() + " (" + gpu.name() + ", " + gpu.pciAddress() + ") on "
                + pd.context().deviceName();
        VerbsException last = null;
        if (mode != Mode.PEERMEM) {
            if (!gpu.dmaBufSupported()) {
                note(
                        attempts,
                        "dma-buf: not tried, the driver reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0 for " + where
                                + " (dma-buf export needs driver 515+ with the open kernel modules, or 530+)");
            } else {
                DmaBuf buf = null;
                try {
                    buf = memory.exportDmaBuf();
                    DmaBuf exported = buf;
                    GpuRegistration[] r = new GpuRegistration[1];
                    // registered and tracked under the memory's read lock: a concurrent close() waits, then closes it
                    memory.use("ibv_reg_dmabuf_mr", () -> {
                        MemoryRegion mr =
                                verbs.dmaBuf(pd, exported.fd(), 0, exported.length(), exported.address(), rights);
                        note(
                                attempts,
                                "dma-buf: registered " + exported.length() + " bytes of " + where
                                        + " with ibv_reg_dmabuf_mr (" + exported + ")");
                        r[0] = memory.track(
                                new GpuRegistration(mr, GpuRegistration.Method.DMA_BUF, exported, attempts));
                    });
                    return r[0];
                } catch (ResourceClosedException e) {
                    if (buf != null) {
                        buf.close();
                    }
                    throw e; // the memory (or the PD) was closed: nothing to fall back to
                } catch (VerbsException e) {
                    last = e;
                    if (buf != null) {
                        buf.close();
                    }
                    note(attempts, "dma-buf: " + refusal(e)); // the export or the registration
                }
            }
        }
        if (mode != Mode.DMA_BUF) {
            PeerMemory peer = PeerMemory.detect(sys);
            if (!peer.loaded()) {
                note(attempts, "nvidia-peermem: not tried, " + peer.how());
            } else {
                try {
                    GpuRegistration[] r = new GpuRegistration[1];
                    memory.use("ibv_reg_mr", () -> {
                        MemoryRegion mr = verbs.deviceMemory(pd, memory.address(), memory.byteSize(), rights);
                        note(
                                attempts,
                                "nvidia-peermem: registered " + memory.byteSize() + " bytes of " + where
                                        + " with ibv_reg_mr on the device pointer (" + peer.how() + ")");
                        r[0] = memory.track(new GpuRegistration(mr, GpuRegistration.Method.PEERMEM, null, attempts));
                    });
                    return r[0];
                } catch (ResourceClosedException e) {
                    throw e;
                } catch (VerbsException e) {
                    last = e;
                    note(attempts, "nvidia-peermem: " + refusal(e));
                }
            }
        }
        throw new GpuRegistrationException(where, mode, attempts, last);
    }

    /** "{@code <verb> refused: ...}": the exception's text without a second "failed" in the one that lists it. */
    private static String refusal(VerbsException e) {
        String m = e.getMessage();
        String prefix = e.verb() + " failed";
        return m.startsWith(prefix) ? e.verb() + " refused" + m.substring(prefix.length()) : m;
    }

    private static void note(List<String> attempts, String outcome) {
        attempts.add(outcome);
        LOG.debug("GPU registration: {}", outcome);
    }
}
