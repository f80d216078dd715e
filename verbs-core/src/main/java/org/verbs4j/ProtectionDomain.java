package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.ExtendedPostVerbs;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.QueuePairExLayout;
import org.verbs4j.natives.XrcVerbs;
import org.verbs4j.natives.generated.ibverbs.ibv_ah_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_qp_cap;
import org.verbs4j.natives.generated.ibverbs.ibv_qp_init_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_srq_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_srq_init_attr;

/**
 * A protection domain ({@code struct ibv_pd}): the scope in which memory regions, queue pairs,
 * shared receive queues and address handles may be used together.
 *
 * <p>Owned by its {@link Context}; owns nothing but the PD itself and refuses to close (EBUSY)
 * while objects created from it are open. Thread-safe (control-path verbs only).
 */
public final class ProtectionDomain extends NativeResource {
    private final Context context;
    private final ThreadDomain threadDomain;
    /**
     * The data-path gates of its queue pairs and SRQs (not the objects: a dropped QP stays
     * collectable); a parent domain shares its PD's, so a region of either waits for the posts of both.
     */
    final java.util.Set<Gate> gates;

    private static final Thread PROBE = Thread.ofPlatform().unstarted(() -> {});

    ProtectionDomain(Context context, MemorySegment pd) {
        this(context, pd, LibIbverbs::deallocPd);
    }

    ProtectionDomain(Context context, MemorySegment pd, Destroyer destroy) {
        super(context, "protection domain", "ibv_dealloc_pd", pd.reinterpret(16), destroy, null);
        this.context = context;
        this.threadDomain = null;
        this.gates = java.util.concurrent.ConcurrentHashMap.newKeySet();
    }

    /** A parent domain ({@link ThreadDomain#allocateParentDomain}): owned by {@code pd}, using {@code td}. */
    ProtectionDomain(ProtectionDomain pd, ThreadDomain td, MemorySegment parent, Destroyer destroy) {
        super(pd, new NativeResource[] {td}, "parent domain", "ibv_dealloc_pd", parent.reinterpret(16), destroy, null);
        this.context = pd.context;
        this.threadDomain = td;
        this.gates = pd.gates;
    }

    /** The thread domain of a parent domain; null for a plain protection domain. */
    public ThreadDomain threadDomain() {
        return threadDomain;
    }

    /** The context it was allocated on. */
    public Context context() {
        return context;
    }

    /**
     * Refuses this protection domain for {@code verb} on an object ({@code what}) of another context.
     *
     * @throws InvalidRequestException naming both devices and {@code fix}
     */
    void requireContext(String verb, Context other, String what, String fix) {
        if (context != other) {
            throw new InvalidRequestException(
                    verb,
                    "the protection domain is of " + context.deviceName() + ", the " + what + " of "
                            + other.deviceName(),
                    fix);
        }
    }

    /**
     * The raw {@code struct ibv_pd *}: restricted to modules with native access; the view stops
     * working when the protection domain closes.
     */
    public MemorySegment handle() {
        return rawHandle("ProtectionDomain.handle");
    }

    /** Waits until no post of its queue pairs or SRQs is inside the provider (before a region or handle dies). */
    void quiesce() {
        for (Gate g : gates) {
            g.awaitQuiescent();
        }
    }

    private static Set<Access> set(Access... access) {
        return access.length == 0 ? EnumSet.noneOf(Access.class) : EnumSet.of(access[0], access);
    }

    /**
     * Allocates {@code size} bytes (aligned to this machine's page size, zeroed) and registers them: the region owns the
     * memory and frees it only after it has been deregistered, so the adapter can never write into
     * memory the JVM has handed to someone else. {@link MemoryRegion#segment()} stops working when
     * the region closes. The first choice for buffers.
     */
    public MemoryRegion allocateMemoryRegion(long size, Access... access) {
        return allocateMemoryRegion(size, set(access));
    }

    /** {@link #allocateMemoryRegion(long, Access...)} with a set of rights. */
    public MemoryRegion allocateMemoryRegion(long size, Set<Access> access) {
        if (size <= 0) {
            throw new InvalidRequestException(
                    "ibv_reg_mr", "the size " + size + " is not positive", "allocate at least 1 byte");
        }
        checkAccess("ibv_reg_mr", access);
        pin("ibv_reg_mr");
        try {
            return allocateAndRegister(size, access);
        } finally {
            unpin();
        }
    }

    private MemoryRegion allocateAndRegister(long size, Set<Access> access) {
        Arena owned = Arena.ofShared();
        MemorySegment memory;
        try {
            memory = owned.allocate(size, LibC.PAGE_SIZE);
        } catch (OutOfMemoryError | IllegalArgumentException e) {
            owned.close();
            throw new VerbsException(
                    "ibv_reg_mr",
                    Errno.ENOMEM,
                    "no memory for a region of " + size + " bytes",
                    "allocate a smaller region (the machine's free memory is the limit)");
        }
        try {
            MemorySegment mr = InlineVerbs.regMr(handle, memory.address(), size, Access.mask(access));
            return new MemoryRegion(this, mr, memory, memory.address(), access, owned);
        } catch (RuntimeException e) {
            owned.close();
            throw e;
        }
    }

    /**
     * {@code ibv_reg_mr} of memory whose lifetime the region can guarantee: a segment of
     * {@link Arena#ofAuto()} (kept reachable by the region until it is deregistered) or of
     * {@link Arena#global()} (never freed). Memory of an arena that can be closed
     * ({@link Arena#ofShared()}, {@link Arena#ofConfined()}) is refused here, since closing it would
     * free memory the adapter may still write: register it with {@link #register(Arena,
     * MemorySegment, Access...)}, or let the region own its memory ({@link #allocateMemoryRegion}).
     * No rights given: local read only (least privilege).
     */
    public MemoryRegion register(MemorySegment segment, Access... access) {
        return register(segment, set(access));
    }

    /** {@code ibv_reg_mr} (the macro: {@code ibv_reg_mr_iova2} when optional access bits are set); see {@link #register(MemorySegment, Access...)}. */
    public MemoryRegion register(MemorySegment segment, Set<Access> access) {
        return register(segment, access, InlineVerbs::regMr, LibIbverbs::deregMr);
    }

    /** Registers memory with this PD's handle (ibv_reg_mr; a test's stand-in). */
    @FunctionalInterface
    interface Registrar {
        MemorySegment register(MemorySegment pd, long address, long length, int access);
    }

    /**
     * A region registered by {@code reg} and deregistered by {@code dereg}; the PD is pinned
     * meanwhile (a close on another thread is refused, or it came first and this throws EBADF).
     */
    MemoryRegion register(MemorySegment segment, Set<Access> access, Registrar reg, Destroyer dereg) {
        checkRegistration("ibv_reg_mr", segment, access);
        checkKeptAlive("ibv_reg_mr", segment);
        pin("ibv_reg_mr");
        try {
            MemorySegment mr = reg.register(handle, segment.address(), segment.byteSize(), Access.mask(access))
                    .reinterpret(ObjectLayout.MR_SIZE);
            return new MemoryRegion(
                    this,
                    mr,
                    segment,
                    segment.address(),
                    access,
                    dereg,
                    mr.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.MR_LKEY),
                    mr.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.MR_RKEY));
        } finally {
            unpin();
        }
    }

    /** {@code ibv_reg_mr_iova2}: peers address the region's first byte as {@code iova}; see {@link #register(MemorySegment, Access...)}. */
    public MemoryRegion register(MemorySegment segment, long iova, Set<Access> access) {
        checkRegistration("ibv_reg_mr_iova2", segment, access);
        checkKeptAlive("ibv_reg_mr_iova2", segment);
        pin("ibv_reg_mr_iova2");
        try {
            MemorySegment mr =
                    LibIbverbs.regMrIova2(handle, segment.address(), segment.byteSize(), iova, Access.mask(access));
            return new MemoryRegion(this, mr, segment, iova, access, null);
        } finally {
            unpin();
        }
    }

    /**
     * {@code ibv_reg_mr} of memory of a shared arena: the region is tied to {@code arena}, so that
     * closing the arena first deregisters the region (if it is still open), then frees the memory
     * (a shared arena runs the actions of its close in reverse order of registration, which a test
     * checks). A confined arena is refused: it frees its first allocation before later actions.
     */
    public MemoryRegion register(Arena arena, MemorySegment segment, Access... access) {
        return register(arena, segment, set(access));
    }

    /** {@link #register(Arena, MemorySegment, Access...)} with a set of rights. */
    public MemoryRegion register(Arena arena, MemorySegment segment, Set<Access> access) {
        checkRegistration("ibv_reg_mr", segment, access);
        if (!segment.scope().equals(arena.scope())) {
            throw new InvalidRequestException(
                    "ibv_reg_mr",
                    "the segment does not belong to the arena given",
                    "pass the arena the segment was allocated from");
        }
        if (!segment.isAccessibleBy(PROBE)) {
            throw new InvalidRequestException(
                    "ibv_reg_mr",
                    "memory of a confined arena cannot be registered safely: "
                            + "a confined arena frees its first allocation before the actions attached to its close, so the "
                            + "adapter could write into freed memory",
                    "allocate from Arena.ofShared(), or use allocateMemoryRegion");
        }
        MemoryRegion region;
        pin("ibv_reg_mr");
        try {
            MemorySegment mr = InlineVerbs.regMr(handle, segment.address(), segment.byteSize(), Access.mask(access));
            region = new MemoryRegion(this, mr, segment, segment.address(), access, null);
        } finally {
            unpin();
        }
        try {
            MemorySegment.ofAddress(segment.address()).reinterpret(arena, ignored -> region.closeWithArena());
        } catch (IllegalStateException e) { // the arena was closed meanwhile
            region.close();
            throw new InvalidRequestException("ibv_reg_mr", Errno.EFAULT, "the segment's arena was closed", null);
        }
        return region;
    }

    /**
     * {@code ibv_reg_mr} with {@code IBV_ACCESS_ON_DEMAND}: the pages are not pinned; the device
     * faults them in as it touches them ({@link MemoryRegion#advise} prefetches). The memory rules
     * of {@link #register(MemorySegment, Access...)} apply (memory of {@link Arena#ofAuto()} or
     * {@link Arena#global()}). Refused with EOPNOTSUPP, naming the missing capability, on a device
     * whose {@code odp_caps.general_caps} has no {@code IBV_ODP_SUPPORT}.
     */
    public MemoryRegion registerOnDemand(MemorySegment segment, Access... access) {
        return registerOnDemand(segment, set(access));
    }

    /** {@link #registerOnDemand(MemorySegment, Access...)} with a set of rights. */
    public MemoryRegion registerOnDemand(MemorySegment segment, Set<Access> access) {
        return registerOnDemand(segment, access, InlineVerbs::regMr, LibIbverbs::deregMr);
    }

    /** An on-demand region registered by {@code reg} and deregistered by {@code dereg} (a test's stand-in). */
    MemoryRegion registerOnDemand(MemorySegment segment, Set<Access> access, Registrar reg, Destroyer dereg) {
        ensureOpen("ibv_reg_mr");
        OnDemandPaging.require(context, "ibv_reg_mr", false);
        return register(segment, onDemand(access), reg, dereg);
    }

    /**
     * Implicit on-demand paging: {@code ibv_reg_mr(pd, NULL, SIZE_MAX, access | ON_DEMAND)}, one
     * region over the whole address space, whose lkey (and rkey, with remote rights) names any
     * address: SGEs give the absolute address as the offset ({@link MemoryRegion#address()} is 0).
     * It has no host view. Refused with EOPNOTSUPP, naming the missing capability, unless
     * {@code odp_caps.general_caps} has {@code IBV_ODP_SUPPORT_IMPLICIT}.
     *
     * <p>Restricted ({@link RestrictedMethodException} unless the calling module has native
     * access): such a region lets the adapter, and peers holding its rkey, write anywhere in the
     * process, which verbs4j cannot check.
     */
    public MemoryRegion registerImplicitOnDemand(Access... access) {
        Restricted.check("ProtectionDomain.registerImplicitOnDemand");
        return registerImplicitOnDemand(set(access), InlineVerbs::regMr, LibIbverbs::deregMr);
    }

    /** An implicit on-demand region registered by {@code reg} and deregistered by {@code dereg}. */
    MemoryRegion registerImplicitOnDemand(Set<Access> access, Registrar reg, Destroyer dereg) {
        String verb = "ibv_reg_mr";
        ensureOpen(verb);
        checkAccess(verb, access);
        OnDemandPaging.require(context, verb, true);
        Set<Access> a = onDemand(access);
        pin(verb);
        try {
            // SIZE_MAX as the length: the whole address space (ibv_reg_mr(3))
            MemorySegment mr = reg.register(handle, 0, -1L, Access.mask(a)).reinterpret(ObjectLayout.MR_SIZE);
            return new MemoryRegion(
                    this,
                    mr,
                    0,
                    Long.MAX_VALUE,
                    0,
                    a,
                    dereg,
                    mr.get(JAVA_INT, ObjectLayout.MR_LKEY),
                    mr.get(JAVA_INT, ObjectLayout.MR_RKEY));
        } finally {
            unpin();
        }
    }

    private static Set<Access> onDemand(Set<Access> access) {
        Set<Access> a = EnumSet.of(Access.ON_DEMAND);
        a.addAll(access);
        return a;
    }

    /**
     * {@code ibv_reg_dmabuf_mr}: registers {@code [offset, offset + length)} of the dma-buf
     * {@code fd} (exported by a GPU driver, a DRM device such as vgem, a udmabuf, ...). Peers and
     * SGEs address the region's first byte as {@code iova} ({@link MemoryRegion#address()} is
     * {@code iova}); the region has no host view ({@link MemoryRegion#isHostAccessible()} false).
     *
     * <p>The fd is borrowed: the kernel holds its own reference to the dma-buf while the region is
     * registered, and the caller closes the fd, preferably after closing the region. The memory
     * behind the dma-buf must stay allocated until the region is closed (GPU memory: close the
     * region before {@code cuMemFree}; verbs-gpudirect's {@code GpuMemory} does so). Providers
     * without dma-buf support answer EOPNOTSUPP (see {@link #probeDmaBuf()}): the exception says so
     * in plain words.
     */
    public MemoryRegion registerDmaBuf(int fd, long offset, long length, long iova, Set<Access> access) {
        String verb = "ibv_reg_dmabuf_mr";
        ensureOpen(verb);
        if (fd < 0) {
            throw VerbsException.create(
                    verb,
                    Errno.EBADF,
                    "the dma-buf fd " + fd + " is not a file descriptor",
                    "pass the fd the exporter returned (e.g. cuMemGetHandleForAddressRange, DRM_IOCTL_PRIME_HANDLE_TO_FD)");
        }
        if (offset < 0 || length <= 0) {
            throw new InvalidRequestException(
                    verb, "offset must be >= 0 and length > 0: offset " + offset + ", length " + length, null);
        }
        checkAccess(verb, access);
        if (LibIbverbs.IBV_REG_DMABUF_MR == null) {
            throw VerbsException.create(
                    verb,
                    Errno.EOPNOTSUPP,
                    "the system's libibverbs has no ibv_reg_dmabuf_mr",
                    "install rdma-core 34 or newer (IBVERBS_1.12), or register GPU memory through nvidia-peermem");
        }
        pin(verb);
        try {
            MemorySegment mr;
            try {
                mr = LibIbverbs.regDmabufMr(handle, offset, length, iova, fd, Access.mask(access));
            } catch (VerbsException e) {
                throw explainDmaBufFailure(e, fd, length);
            }
            return deviceRegion(mr, iova, length, access);
        } finally {
            unpin();
        }
    }

    /** {@link #registerDmaBuf(int, long, long, long, Set)} with rights as varargs (none: local read only). */
    public MemoryRegion registerDmaBuf(int fd, long offset, long length, long iova, Access... access) {
        return registerDmaBuf(fd, offset, length, iova, set(access));
    }

    /** A region of device memory (no host view) over a registered {@code struct ibv_mr *}, addressed as {@code address}. */
    private MemoryRegion deviceRegion(MemorySegment mr, long address, long length, Set<Access> access) {
        MemorySegment m = mr.reinterpret(ObjectLayout.MR_SIZE);
        return new MemoryRegion(
                this,
                m,
                address,
                length,
                address,
                access,
                LibIbverbs::deregMr,
                m.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.MR_LKEY),
                m.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.MR_RKEY));
    }

    private VerbsException explainDmaBufFailure(VerbsException e, int fd, long length) {
        String dev = context.deviceName();
        return switch (e.errno()) {
            case Errno.EOPNOTSUPP, Errno.EPROTONOSUPPORT ->
                VerbsException.create(
                        e.verb(),
                        e.errno(),
                        "the provider of " + dev + " (or its kernel driver) does not implement dma-buf registration",
                        "use an adapter whose driver supports dma-buf (mlx5, efa; Linux 5.12+), or register GPU memory through "
                                + "nvidia-peermem (ibv_reg_mr on the device pointer)");
            case Errno.EBADF ->
                VerbsException.create(
                        e.verb(),
                        e.errno(),
                        "fd " + fd + " is not an open dma-buf",
                        "pass an open dma-buf fd and keep it open until the registration returned");
            case Errno.EINVAL, Errno.EFAULT ->
                VerbsException.create(
                        e.verb(),
                        e.errno(),
                        "the kernel refused the range " + "(length " + length + ") of dma-buf fd " + fd,
                        "offset and length must lie inside the dma-buf; "
                                + "GPU drivers also require them aligned to the host page size");
            default -> e;
        };
    }

    /**
     * Registers device memory at {@code address} with plain {@code ibv_reg_mr}: how GPU memory is
     * registered where the nvidia-peermem kernel module (or the older nv_peer_mem) lets the kernel
     * pin device pointers. The region has no host view and {@link MemoryRegion#address()} is
     * {@code address}. It never frees the memory: close it before the memory is freed.
     *
     * <p>Restricted ({@link RestrictedMethodException} unless the calling module has native
     * access): verbs4j cannot check that {@code address} is device memory that outlives the
     * region, and a wrong address lets the adapter write into memory the JVM uses.
     */
    public MemoryRegion registerDeviceMemory(long address, long length, Set<Access> access) {
        Restricted.check("ProtectionDomain.registerDeviceMemory");
        String verb = "ibv_reg_mr";
        ensureOpen(verb);
        if (address == 0 || length <= 0) {
            throw new InvalidRequestException(
                    verb,
                    "device memory needs a non-null address and a positive length: 0x" + Long.toHexString(address)
                            + ", " + length,
                    null);
        }
        checkAccess(verb, access);
        pin(verb);
        try {
            MemorySegment mr;
            try {
                mr = InlineVerbs.regMr(handle, address, length, Access.mask(access));
            } catch (VerbsException e) {
                if (e.errno() == Errno.EFAULT || e.errno() == Errno.EINVAL) {
                    throw VerbsException.create(
                            verb,
                            e.errno(),
                            "the kernel could not pin " + length + " bytes of device memory at 0x"
                                    + Long.toHexString(address),
                            "GPU memory needs the nvidia-peermem kernel module (modprobe nvidia-peermem) for ibv_reg_mr; "
                                    + "without it register a dma-buf instead (registerDmaBuf)");
                }
                throw e;
            }
            return deviceRegion(mr, address, length, access);
        } finally {
            unpin();
        }
    }

    /**
     * Asks the provider whether it accepts dma-buf registrations, without registering anything:
     * {@code ibv_reg_dmabuf_mr(pd, 0, 4096, 0, fd = -1, LOCAL_WRITE)}, whose errno tells (EBADF:
     * supported, it looked at the fd; EOPNOTSUPP/EPROTONOSUPPORT: not implemented).
     */
    public DmaBufSupport probeDmaBuf() {
        String verb = "ibv_reg_dmabuf_mr";
        ensureOpen(verb);
        String dev = context.deviceName();
        if (LibIbverbs.IBV_REG_DMABUF_MR == null) {
            return new DmaBufSupport(
                    DmaBufSupport.Verdict.LIBIBVERBS_TOO_OLD,
                    0,
                    "the system's libibverbs has no "
                            + "ibv_reg_dmabuf_mr (it came with rdma-core 34): GPU memory can only be registered through "
                            + "nvidia-peermem");
        }
        pin(verb);
        try {
            MemorySegment mr = LibIbverbs.regDmabufMr(handle, 0, 4096, 0, -1, Access.mask(Set.of(Access.LOCAL_WRITE)));
            LibIbverbs.deregMr(mr); // a provider that ignores the fd: not what the probe expects
            return new DmaBufSupport(
                    DmaBufSupport.Verdict.UNKNOWN,
                    0,
                    dev + " registered fd -1 without complaint: " + "its dma-buf support cannot be judged");
        } catch (VerbsException e) {
            return switch (e.errno()) {
                case Errno.EBADF ->
                    new DmaBufSupport(
                            DmaBufSupport.Verdict.SUPPORTED,
                            e.errno(),
                            dev + " accepts dma-buf registrations (the probe with fd -1 answered EBADF)");
                case Errno.EOPNOTSUPP, Errno.EPROTONOSUPPORT ->
                    new DmaBufSupport(
                            DmaBufSupport.Verdict.NOT_SUPPORTED,
                            e.errno(),
                            dev + " does not accept dma-buf registrations (the probe answered "
                                    + Errno.name(e.errno())
                                    + "): its provider or kernel driver does not implement them "
                                    + "(rdma-core 44: only mlx5 and efa do); GPU memory on it needs nvidia-peermem");
                default ->
                    new DmaBufSupport(
                            DmaBufSupport.Verdict.UNKNOWN,
                            e.errno(),
                            dev + " answered the dma-buf " + "probe with " + Errno.name(e.errno())
                                    + " (expected EBADF or EOPNOTSUPP)");
            };
        } finally {
            unpin();
        }
    }

    private static void checkKeptAlive(String verb, MemorySegment segment) {
        String kind = segment.scope().getClass().getSimpleName();
        if (!kind.equals("GlobalSession") && !kind.equals("ImplicitSession")) {
            throw new InvalidRequestException(
                    verb,
                    "the segment belongs to an arena that can be closed at any time "
                            + "(Arena.ofShared or Arena.ofConfined): closing it while the region is registered would free memory "
                            + "the adapter may still write",
                    "register(arena, segment, ...) ties the region to a shared arena; "
                            + "allocateMemoryRegion(size, ...) lets the region own its memory; Arena.ofAuto() memory is kept alive");
        }
    }

    private void checkAccess(String verb, Set<Access> access) {
        if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC))
                && !access.contains(Access.LOCAL_WRITE)) {
            throw new InvalidRequestException(
                    verb, "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE", "add Access.LOCAL_WRITE");
        }
        checkFlush(verb, access);
    }

    /** FLUSH_GLOBAL and FLUSH_PERSISTENT only where {@code device_cap_flags_ex} has the device's bit for each. */
    private void checkFlush(String verb, Set<Access> access) {
        boolean global = access.contains(Access.FLUSH_GLOBAL);
        if (!global && !access.contains(Access.FLUSH_PERSISTENT)) {
            return;
        }
        long caps = Capabilities.capFlagsEx(context());
        for (Access a : access) {
            long bit = a == Access.FLUSH_GLOBAL
                    ? Capabilities.DEVICE_FLUSH_GLOBAL
                    : a == Access.FLUSH_PERSISTENT ? Capabilities.DEVICE_FLUSH_PERSISTENT : 0;
            if (bit != 0 && (caps & bit) == 0) {
                throw VerbsException.create(
                        verb,
                        Errno.EOPNOTSUPP,
                        context().deviceName() + " has no RDMA FLUSH for Access." + a.name()
                                + ": device attribute device_cap_flags_ex lacks IB_UVERBS_DEVICE_" + a.name()
                                + " (rxe has it from Linux 6.2)",
                        "register the region without Access." + a.name());
            }
        }
    }

    private void checkRegistration(String verb, MemorySegment segment, Set<Access> access) {
        ensureOpen(verb);
        if (!segment.isNative()) {
            throw VerbsException.create(
                    verb,
                    Errno.EINVAL,
                    "a heap segment cannot be registered (the GC moves it)",
                    "allocate the buffer from an Arena");
        }
        if (!segment.scope().isAlive()) {
            throw VerbsException.create(verb, Errno.EFAULT, "the segment's arena is closed", "register live memory");
        }
        if (segment.byteSize() == 0) {
            throw VerbsException.create(verb, Errno.EINVAL, "the segment is empty", null);
        }
        if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC))
                && !access.contains(Access.LOCAL_WRITE)) {
            throw VerbsException.create(
                    verb, Errno.EINVAL, "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE", "add Access.LOCAL_WRITE");
        }
        checkFlush(verb, access);
    }

    /**
     * {@code ibv_create_qp}; the created QP is in RESET. An {@link QueuePairType#XRC_SEND} queue
     * pair is made with {@code ibv_create_qp_ex} (its receive side unused: no receive queue, no
     * SRQ); an XRC_RECV one belongs to an XRC domain ({@link XrcDomain#createReceiveQueuePair}).
     */
    public QueuePair createQueuePair(QueuePairInit init) {
        if (init.type == QueuePairType.XRC_SEND) {
            MemorySegment ctx = context().handle;
            return createQueuePair(init, (pd, attr) -> ExtendedPostVerbs.createQpEx(ctx, attr), LibIbverbs::destroyQp);
        }
        return createQueuePair(init, LibIbverbs::createQp, LibIbverbs::destroyQp);
    }

    /**
     * Creates a native object from this PD's handle and a filled attribute struct: the
     * {@code struct ibv_qp} from an {@code ibv_qp_init_attr} (also an SRQ or address handle from
     * theirs).
     */
    @FunctionalInterface
    interface QueuePairCreator {
        MemorySegment create(MemorySegment pd, MemorySegment initAttr);
    }

    /**
     * A queue pair made by {@code create} (ibv_create_qp, or librdmacm's rdma_create_qp on a cm id)
     * and released by {@code destroy}: the same object, accounting and rules either way.
     */
    QueuePair createQueuePair(QueuePairInit init, QueuePairCreator create, Destroyer destroy) {
        return createQueuePair(init, create, destroy, 0L);
    }

    /**
     * {@code ibv_create_qp_ex} with {@code IBV_QP_INIT_ATTR_SEND_OPS_FLAGS}: a queue pair (in
     * RESET) that can also post through the extended API ({@link QueuePair#postSendExtended}) the
     * operations asked for; the classic {@link QueuePair#postSend} works on it as well.
     *
     * @param operations at least one; the provider refuses (EOPNOTSUPP or EINVAL) operations it
     *                   lacks for the queue pair's type
     */
    public QueuePair createExtendedQueuePair(QueuePairInit init, Set<SendOperation> operations) {
        return createExtendedQueuePair(init, operations, LibIbverbs::destroyQp);
    }

    /** An extended queue pair made through the context's create_qp_ex op and released by {@code destroy}. */
    QueuePair createExtendedQueuePair(QueuePairInit init, Set<SendOperation> operations, Destroyer destroy) {
        long ops = SendOperation.mask(operations);
        if (ops == 0) {
            throw new InvalidRequestException(
                    "ibv_create_qp_ex",
                    "no send operation asked for",
                    "name the operations the queue pair will post, e.g. EnumSet.of(SendOperation.SEND)");
        }
        if ((ops & SendOperation.ATOMIC_WRITE.bit()) != 0
                && (Capabilities.capFlagsEx(context()) & Capabilities.DEVICE_ATOMIC_WRITE) == 0) {
            throw VerbsException.create(
                    "ibv_create_qp_ex",
                    Errno.EOPNOTSUPP,
                    context().deviceName() + " has no RDMA ATOMIC WRITE: " + Capabilities.NO_ATOMIC_WRITE,
                    "leave SendOperation.ATOMIC_WRITE out, or use a device that has it (Context.capabilities()"
                            + " reports \"atomic write\")");
        }
        MemorySegment ctx = context().handle;
        QueuePair qp = createQueuePair(init, (pd, attr) -> ExtendedPostVerbs.createQpEx(ctx, attr), destroy, ops);
        ExtendedPosting.attach(qp, ops, init.type);
        return qp;
    }

    /**
     * {@code ibv_alloc_mw}: a memory window of {@code type} in this protection domain (see
     * {@link MemoryWindow}); EOPNOTSUPP where the provider has no memory windows.
     */
    public MemoryWindow allocateWindow(MemoryWindow.Type type) {
        pin("ibv_alloc_mw");
        try {
            MemorySegment ctx = context().handle;
            return new MemoryWindow(
                    this,
                    ExtendedPostVerbs.allocMw(ctx, handle, type.value),
                    type,
                    h -> ExtendedPostVerbs.deallocMw(ctx, h));
        } finally {
            unpin();
        }
    }

    private QueuePair createQueuePair(QueuePairInit init, QueuePairCreator create, Destroyer destroy, long sendOps) {
        boolean xrc = init.type == QueuePairType.XRC_SEND;
        boolean ex = sendOps != 0 || xrc;
        String verb = ex ? "ibv_create_qp_ex" : "ibv_create_qp";
        checkQueuePairType(verb, init);
        NativeResource[] used = {this, init.sendCq, init.recvCq, init.srq};
        pinAll(verb, used);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = !ex
                    ? arena.allocate(ibv_qp_init_attr.layout())
                    : arena.allocate(QueuePairExLayout.INIT_EX_SIZE, 8); // begins with an ibv_qp_init_attr
            if (ex) {
                a.set(
                        JAVA_INT,
                        QueuePairExLayout.INIT_COMP_MASK,
                        QueuePairExLayout.INIT_ATTR_PD
                                | (sendOps != 0 ? QueuePairExLayout.INIT_ATTR_SEND_OPS_FLAGS : 0));
                a.set(ADDRESS, QueuePairExLayout.INIT_PD, handle);
                a.set(JAVA_LONG, QueuePairExLayout.INIT_SEND_OPS_FLAGS, sendOps);
            }
            boolean ownRecv = init.srq == null && !xrc; // an XRC_SEND QP has no receive side
            ibv_qp_init_attr.send_cq(a, init.sendCq.handle);
            ibv_qp_init_attr.recv_cq(a, xrc ? MemorySegment.NULL : init.recvCq.handle);
            ibv_qp_init_attr.srq(a, init.srq == null ? MemorySegment.NULL : init.srq.handle);
            MemorySegment cap = ibv_qp_init_attr.cap(a);
            ibv_qp_cap.max_send_wr(cap, init.maxSendWr);
            ibv_qp_cap.max_recv_wr(cap, ownRecv ? init.maxRecvWr : 0);
            ibv_qp_cap.max_send_sge(cap, init.maxSendSge);
            ibv_qp_cap.max_recv_sge(cap, ownRecv ? init.maxRecvSge : 0);
            ibv_qp_cap.max_inline_data(cap, init.maxInlineData);
            ibv_qp_init_attr.qp_type(a, init.type.value());
            ibv_qp_init_attr.sq_sig_all(a, init.signalAll ? 1 : 0);
            MemorySegment qp = create.create(handle, a);
            // ibv_create_qp writes back the capacities the provider actually granted
            return new QueuePair(
                    this,
                    qp.reinterpret(ObjectLayout.QP_SIZE),
                    init,
                    ibv_qp_cap.max_send_wr(cap),
                    ibv_qp_cap.max_recv_wr(cap),
                    ibv_qp_cap.max_send_sge(cap),
                    ibv_qp_cap.max_recv_sge(cap),
                    ibv_qp_cap.max_inline_data(cap),
                    destroy);
        } finally {
            unpinAll(used);
        }
    }

    /** XRC_RECV has a creator of its own; an XRC_SEND queue pair receives nothing (no SRQ). */
    private static void checkQueuePairType(String verb, QueuePairInit init) {
        if (init.type == QueuePairType.XRC_RECV) {
            throw new InvalidRequestException(
                    verb,
                    "an XRC_RECV queue pair has no protection domain",
                    "create it with XrcDomain.createReceiveQueuePair()");
        }
        if (init.type == QueuePairType.XRC_SEND && init.srq != null) {
            throw new InvalidRequestException(
                    verb,
                    "an XRC_SEND queue pair receives nothing: it takes no shared receive queue",
                    "drop sharedReceiveQueue(...); the peer's XRC SRQ receives what it sends");
        }
    }

    /**
     * {@code ibv_create_srq_ex} of an XRC shared receive queue in {@code xrcd}: receive buffers
     * registered on this protection domain, for what peers' XRC_SEND queue pairs send through any
     * XRC_RECV queue pair of the domain, naming the SRQ by {@link SharedReceiveQueue#srqNumber()}.
     * Its receives complete on {@code cq}, which no other XRC SRQ may use. The SRQ uses
     * {@code xrcd} and {@code cq}: they refuse to close while it is open.
     */
    public SharedReceiveQueue createXrcSharedReceiveQueue(XrcDomain xrcd, CompletionQueue cq, int maxWr, int maxSge) {
        return createXrcSharedReceiveQueue(xrcd, cq, maxWr, maxSge, LibIbverbs::destroySrq);
    }

    /** An XRC SRQ released by {@code destroy} (a test's stand-in). */
    SharedReceiveQueue createXrcSharedReceiveQueue(
            XrcDomain xrcd, CompletionQueue cq, int maxWr, int maxSge, Destroyer destroy) {
        String verb = "ibv_create_srq_ex";
        if (xrcd == null || cq == null) {
            throw new InvalidRequestException(
                    verb,
                    "the " + (xrcd == null ? "XRC domain" : "completion queue") + " is null",
                    "pass the XRC domain the SRQ belongs to and the completion queue its receives complete on");
        }
        if (xrcd.context() != context) {
            throw new InvalidRequestException(
                    verb,
                    "the XRC domain is of " + xrcd.context().deviceName() + ", the protection domain of "
                            + context.deviceName(),
                    "open the XRC domain on the protection domain's context");
        }
        if (maxWr <= 0 || maxSge <= 0) {
            throw new InvalidRequestException(
                    verb,
                    "maxWr " + maxWr + " and maxSge " + maxSge + " must be positive",
                    "ask for at least 1 work request of 1 SGE (at most queryDevice().maxSrqWr())");
        }
        pinAll(verb, this, xrcd, cq);
        try (Arena arena = Arena.ofConfined()) {
            cq.claimXrc(verb);
            boolean made = false;
            try {
                MemorySegment a = arena.allocate(XrcVerbs.SRQ_INIT_EX_SIZE, 8);
                a.set(JAVA_INT, XrcVerbs.SRQ_INIT_EX_MAX_WR, maxWr);
                a.set(JAVA_INT, XrcVerbs.SRQ_INIT_EX_MAX_SGE, maxSge);
                a.set(
                        JAVA_INT,
                        XrcVerbs.SRQ_INIT_EX_COMP_MASK,
                        XrcVerbs.SRQ_INIT_ATTR_TYPE
                                | XrcVerbs.SRQ_INIT_ATTR_PD
                                | XrcVerbs.SRQ_INIT_ATTR_XRCD
                                | XrcVerbs.SRQ_INIT_ATTR_CQ);
                a.set(JAVA_INT, XrcVerbs.SRQ_INIT_EX_TYPE, XrcVerbs.SRQT_XRC);
                a.set(ADDRESS, XrcVerbs.SRQ_INIT_EX_PD, handle);
                a.set(ADDRESS, XrcVerbs.SRQ_INIT_EX_XRCD, xrcd.handle);
                a.set(ADDRESS, XrcVerbs.SRQ_INIT_EX_CQ, cq.handle);
                MemorySegment srq;
                try {
                    srq = XrcVerbs.createSrqEx(context.handle, a);
                } catch (VerbsException e) {
                    throw e.errno() == Errno.EOPNOTSUPP
                            ? VerbsException.create(
                                    verb,
                                    e.errno(),
                                    context.deviceName() + " offers no XRC SRQs (its provider has no create_srq_ex)",
                                    "use a device whose driver implements XRC (e.g. mlx5)")
                            : VerbsException.create(
                                    verb,
                                    e.errno(),
                                    "the provider of " + context.deviceName() + " refused an XRC SRQ of " + maxWr
                                            + " WRs x " + maxSge + " SGE",
                                    "ask for fewer work requests or SGEs (queryDevice().maxSrqWr(), maxSrqSge())");
                }
                int number;
                try {
                    number = XrcVerbs.getSrqNum(context.handle, srq);
                } catch (VerbsException e) {
                    destroy.destroy(srq);
                    throw e;
                }
                SharedReceiveQueue s = new SharedReceiveQueue(
                        this,
                        srq,
                        a.get(JAVA_INT, XrcVerbs.SRQ_INIT_EX_MAX_WR),
                        a.get(JAVA_INT, XrcVerbs.SRQ_INIT_EX_MAX_SGE),
                        destroy,
                        xrcd,
                        cq,
                        number);
                made = true;
                return s;
            } finally {
                if (!made) {
                    cq.detachXrc();
                }
            }
        } finally {
            unpinAll(this, xrcd, cq);
        }
    }

    /** {@code ibv_create_srq}. */
    public SharedReceiveQueue createSharedReceiveQueue(int maxWr, int maxSge) {
        return createSharedReceiveQueue(maxWr, maxSge, LibIbverbs::createSrq, LibIbverbs::destroySrq);
    }

    /** An SRQ made by {@code create} (from this PD's handle and a filled {@code ibv_srq_init_attr}) and released by {@code destroy}. */
    SharedReceiveQueue createSharedReceiveQueue(int maxWr, int maxSge, QueuePairCreator create, Destroyer destroy) {
        pin("ibv_create_srq");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(ibv_srq_init_attr.layout());
            MemorySegment attr = ibv_srq_init_attr.attr(a);
            ibv_srq_attr.max_wr(attr, maxWr);
            ibv_srq_attr.max_sge(attr, maxSge);
            MemorySegment srq = create.create(handle, a);
            return new SharedReceiveQueue(this, srq, ibv_srq_attr.max_wr(attr), ibv_srq_attr.max_sge(attr), destroy);
        } finally {
            unpin();
        }
    }

    /** {@code ibv_create_ah}: the destination of UD sends. */
    public AddressHandle createAddressHandle(AddressVector av) {
        return createAddressHandle(av, LibIbverbs::createAh, LibIbverbs::destroyAh);
    }

    /** An address handle made by {@code create} (from this PD's handle and a filled {@code ibv_ah_attr}) and released by {@code destroy}. */
    AddressHandle createAddressHandle(AddressVector av, QueuePairCreator create, Destroyer destroy) {
        pin("ibv_create_ah");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(ibv_ah_attr.layout());
            av.write(a);
            return new AddressHandle(this, create.create(handle, a), av, destroy);
        } finally {
            unpin();
        }
    }

    @Override
    String describe() {
        return "ProtectionDomain on " + device();
    }
}
