package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;

/**
 * Registered memory ({@code struct ibv_mr}): a native {@link MemorySegment} pinned and known to
 * the adapter, with the keys work requests name it by. Sizes are longs (regions of 4 GiB and
 * more work).
 *
 * <p>Lifetimes: the memory of a region is never freed before the region is deregistered, so the
 * adapter never writes into memory the JVM has handed to someone else. A region made by
 * {@link ProtectionDomain#allocateMemoryRegion} owns its memory and frees it right after
 * deregistration; one over {@link java.lang.foreign.Arena#ofAuto()} or global memory keeps it
 * reachable until then; one tied to a shared arena with
 * {@link ProtectionDomain#register(java.lang.foreign.Arena, MemorySegment, Access...)} is
 * deregistered by that arena's close before the arena frees the memory. Closing a region (or its
 * arena) revokes the device's access at once: work still outstanding on it completes with an
 * error, and chains that name it are refused at their next post, in every mode. Thread-safe: keys
 * and bounds are immutable.
 *
 * <p>Device memory (GPU memory registered with {@link ProtectionDomain#registerDmaBuf} or
 * {@link ProtectionDomain#registerDeviceMemory}) makes a region without a host view:
 * {@link #isHostAccessible()} is false, {@link #segment()} and {@link #slice} refuse (the CPU must
 * never dereference it), and {@link #address()} is the address work requests name it by (the
 * device pointer, or the iova of a dma-buf). Such a region never frees the device memory: its
 * owner (e.g. verbs-gpudirect's {@code GpuMemory}) deregisters it before freeing the memory.
 */
public final class MemoryRegion extends NativeResource {
    private final MemorySegment segment;
    private final long address;
    private final long length;
    private final long iova;
    private final int lkey;
    private final int rkey;
    private final Set<Access> access;
    /** False for device memory: no host view exists (SGEs of it may not be inline, segment() refuses). */
    final boolean hostAccessible;

    /** @param owned the arena of memory the region owns (closed right after deregistration), or null */
    MemoryRegion(
            ProtectionDomain pd,
            MemorySegment mr,
            MemorySegment segment,
            long iova,
            Set<Access> access,
            java.lang.foreign.Arena owned) {
        this(
                pd,
                mr.reinterpret(ObjectLayout.MR_SIZE),
                segment,
                iova,
                access,
                owned == null
                        ? LibIbverbs::deregMr
                        : h -> {
                            LibIbverbs.deregMr(h);
                            owned.close(); // deregistered first: only then may the memory go
                        },
                mr.reinterpret(ObjectLayout.MR_SIZE).get(JAVA_INT, ObjectLayout.MR_LKEY),
                mr.reinterpret(ObjectLayout.MR_SIZE).get(JAVA_INT, ObjectLayout.MR_RKEY));
    }

    MemoryRegion(
            ProtectionDomain pd,
            MemorySegment mr,
            MemorySegment segment,
            long iova,
            Set<Access> access,
            Destroyer destroy,
            int lkey,
            int rkey) {
        super(pd, "memory region", "ibv_dereg_mr", mr, destroy, segment);
        this.segment = segment;
        this.address = segment.address();
        this.length = segment.byteSize();
        this.iova = iova;
        this.lkey = lkey;
        this.rkey = rkey;
        this.access = Set.copyOf(access);
        this.hostAccessible = true;
    }

    /**
     * A region of device memory: no host view. {@code address} is what SGEs name (the device
     * pointer, or the iova of a dma-buf registration).
     */
    MemoryRegion(
            ProtectionDomain pd,
            MemorySegment mr,
            long address,
            long length,
            long iova,
            Set<Access> access,
            Destroyer destroy,
            int lkey,
            int rkey) {
        super(pd, "device memory region", "ibv_dereg_mr", mr, destroy, null);
        this.segment = MemorySegment.NULL; // never handed out; its (global) scope keeps checkSge branch-free
        this.address = address;
        this.length = length;
        this.iova = iova;
        this.lkey = lkey;
        this.rkey = rkey;
        this.access = Set.copyOf(access);
        this.hostAccessible = false;
    }

    /**
     * Whether the CPU may read and write the registered memory through {@link #segment()}: false
     * for device (GPU) memory, which has no host view.
     */
    public boolean isHostAccessible() {
        return hostAccessible;
    }

    /**
     * The registered memory.
     *
     * @throws InvalidRequestException (EINVAL) for device memory, which has no host view
     */
    public MemorySegment segment() {
        if (!hostAccessible) {
            throw noHostView("MemoryRegion.segment");
        }
        return segment;
    }

    private InvalidRequestException noHostView(String verb) {
        if (access.contains(Access.ON_DEMAND)) {
            return new InvalidRequestException(
                    verb,
                    "this region is an implicit on-demand registration of the whole address space, which has no "
                            + "segment of its own",
                    "name memory in SGEs by its absolute address (as the offset) with this region's lkey, or "
                            + "register the buffer itself with registerOnDemand");
        }
        return new InvalidRequestException(
                verb,
                "this region registers device (GPU) memory at 0x" + Long.toHexString(address)
                        + ", which the CPU cannot read or write",
                "copy through the device's own API (e.g. GpuMemory.copyFromHost / copyToHost in verbs-gpudirect)");
    }

    /** The virtual address of the first byte. */
    public long address() {
        return address;
    }

    /** The registered length in bytes. */
    public long length() {
        return length;
    }

    /** The I/O virtual address peers use for this region's first byte (the address unless registered with an iova). */
    public long iova() {
        return iova;
    }

    /** The local key, for SGEs. */
    public int lkey() {
        return lkey;
    }

    /** The remote key, for peers' RDMA and atomic work requests. */
    public int rkey() {
        return rkey;
    }

    /** The access rights it was registered with. */
    public Set<Access> access() {
        return access;
    }

    /** {@code enum ibv_advise_mr_advice}: what {@link #advise} asks of the device. */
    public enum Advice {
        /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH}: fault the pages in for reading. */
        PREFETCH(OnDemandPaging.ADVICE_PREFETCH),
        /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE}: fault them in writable (the region needs LOCAL_WRITE). */
        PREFETCH_WRITE(OnDemandPaging.ADVICE_PREFETCH_WRITE),
        /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT}: map only the pages already present. */
        PREFETCH_NO_FAULT(OnDemandPaging.ADVICE_PREFETCH_NO_FAULT);

        final int value;

        Advice(int value) {
            this.value = value;
        }
    }

    /**
     * {@code ibv_advise_mr} over {@code [offset, offset + length)} of this on-demand region
     * ({@link ProtectionDomain#registerOnDemand}, or of the whole address space for an implicit
     * one, where the offset is the address): the device maps those pages before they are used.
     * {@code wait}: return only once they are mapped ({@code IBV_ADVISE_MR_FLAG_FLUSH}). Refused
     * for a region that was not registered on demand, for a range outside it, and (EOPNOTSUPP)
     * where the provider has no {@code advise_mr}.
     */
    public void advise(Advice advice, long offset, long length, boolean wait) {
        String verb = "ibv_advise_mr";
        if (!access.contains(Access.ON_DEMAND)) {
            throw new InvalidRequestException(
                    verb,
                    describe() + " was not registered on demand: its pages are pinned already",
                    "advise regions of ProtectionDomain.registerOnDemand (or registerImplicitOnDemand) only");
        }
        if (length <= 0 || !contains(offset, length)) {
            throw new InvalidRequestException(
                    verb,
                    "the range [" + offset + ", +" + length + ") is empty or outside the region of " + this.length
                            + " bytes",
                    "advise a non-empty range inside the region");
        }
        if (advice == Advice.PREFETCH_WRITE && !access.contains(Access.LOCAL_WRITE)) {
            throw new InvalidRequestException(
                    verb,
                    "PREFETCH_WRITE on a region without LOCAL_WRITE",
                    "use PREFETCH, or register it with LOCAL_WRITE");
        }
        pin(verb);
        try {
            OnDemandPaging.advise(this, advice.value, wait ? OnDemandPaging.FLAG_FLUSH : 0, address + offset, length);
        } finally {
            unpin();
        }
    }

    /** {@link #advise}: the range faulted in (writable where the region has LOCAL_WRITE), waiting until it is. */
    public void prefetch(long offset, long length) {
        advise(access.contains(Access.LOCAL_WRITE) ? Advice.PREFETCH_WRITE : Advice.PREFETCH, offset, length, true);
    }

    /**
     * The raw {@code struct ibv_mr *}: restricted to modules with native access; the view stops
     * working when the region closes.
     */
    public MemorySegment handle() {
        return rawHandle("MemoryRegion.handle");
    }

    @Override
    void beforeRelease() {
        Revocations.revoke(); // chains naming it re-check before their next post
        ((ProtectionDomain) owner).quiesce(); // and no post that missed the revocation is still inside
    }

    /** Run by the close of the shared arena it is tied to: deregister (once) before the arena frees the memory. */
    void closeWithArena() {
        if (isOpen()) {
            try {
                close();
                return;
            } catch (ResourceClosedException raced) {
                // closed by its owner at the same moment: wait below until the deregistration finished
            } catch (RuntimeException e) {
                org.slf4j.LoggerFactory.getLogger(MemoryRegion.class)
                        .warn("verbs4j: deregistering a region when its arena " + "closed failed: {}", e.getMessage());
                return;
            }
        }
        awaitReleased();
    }

    /** The protection domain it belongs to. */
    public ProtectionDomain protectionDomain() {
        return (ProtectionDomain) owner;
    }

    /** True when {@code [offset, offset + len)} lies inside the region. */
    public boolean contains(long offset, long len) {
        return offset >= 0 && len >= 0 && offset <= length - len;
    }

    /** A slice of the registered memory; refused (EINVAL) for device memory. */
    public MemorySegment slice(long offset, long len) {
        if (!hostAccessible) {
            throw noHostView("MemoryRegion.slice");
        }
        return segment.asSlice(offset, len);
    }

    /**
     * Checked-mode validation of an SGE: region open, its memory alive, the range inside it.
     * Allocation-free unless it throws.
     */
    void checkSge(String verb, long offset, long len) {
        // one branch on the hot path; the reasons are sorted out off it (keeps this method inlinable)
        if (!isOpenPlain() || !segment.scope().isAlive() || !contains(offset, len)) {
            throw sgeRefused(verb, offset, len);
        }
    }

    private VerbsException sgeRefused(String verb, long offset, long len) {
        if (!isOpenPlain()) {
            return closedException(verb);
        }
        if (!segment.scope().isAlive()) {
            return VerbsException.create(
                    verb,
                    Errno.EFAULT,
                    "the memory of the registered region was freed (its arena is closed)",
                    "keep the arena open until the memory region is closed and no work request uses it");
        }
        return VerbsException.create(
                verb,
                Errno.EINVAL,
                "SGE [offset " + offset + ", length " + len + ") lies outside the registered region of " + length
                        + " bytes",
                "post only buffers inside a registered region, or register a larger one");
    }

    @Override
    String describe() {
        return "MemoryRegion " + length + " B on " + device() + ", lkey 0x" + Integer.toHexString(lkey) + ", rkey 0x"
                + Integer.toHexString(rkey) + ", "
                + (access.isEmpty() ? "no access" : java.util.EnumSet.copyOf(access));
    }
}
