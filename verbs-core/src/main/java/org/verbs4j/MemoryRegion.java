package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.VerbsException;

/**
 * Registered memory ({@code struct ibv_mr}): a native {@link MemorySegment} pinned and known to
 * the adapter, with the keys work requests name it by. Sizes are longs (regions of 4 GiB and
 * more work).
 *
 * <p>Owns the registration and keeps the segment reachable until it is deregistered (closed);
 * it never frees the memory itself, which belongs to the segment's arena. Posting from a region
 * that is closed, or whose arena was closed, is refused in checked mode. Thread-safe: keys and
 * bounds are immutable.
 */
public final class MemoryRegion extends NativeResource {
    private final MemorySegment segment;
    private final long address;
    private final long length;
    private final long iova;
    private final int lkey;
    private final int rkey;
    private final Set<Access> access;

    MemoryRegion(ProtectionDomain pd, MemorySegment mr, MemorySegment segment, long iova, Set<Access> access) {
        this(pd, mr.reinterpret(ObjectLayout.MR_SIZE), segment, iova, access, LibIbverbs::deregMr,
                mr.reinterpret(ObjectLayout.MR_SIZE).get(JAVA_INT, ObjectLayout.MR_LKEY),
                mr.reinterpret(ObjectLayout.MR_SIZE).get(JAVA_INT, ObjectLayout.MR_RKEY));
    }

    MemoryRegion(ProtectionDomain pd, MemorySegment mr, MemorySegment segment, long iova, Set<Access> access,
                 Destroyer destroy, int lkey, int rkey) {
        super(pd, "memory region", "ibv_dereg_mr", mr, destroy, segment);
        this.segment = segment;
        this.address = segment.address();
        this.length = segment.byteSize();
        this.iova = iova;
        this.lkey = lkey;
        this.rkey = rkey;
        this.access = Set.copyOf(access);
    }

    /** The registered memory. */
    public MemorySegment segment() {
        return segment;
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

    /** The raw {@code struct ibv_mr *}. */
    public MemorySegment handle() {
        ensureOpen("ibv_mr");
        return handle;
    }

    /** The protection domain it belongs to. */
    public ProtectionDomain protectionDomain() {
        return (ProtectionDomain) owner;
    }

    /** True when {@code [offset, offset + len)} lies inside the region. */
    public boolean contains(long offset, long len) {
        return offset >= 0 && len >= 0 && offset <= length - len;
    }

    /** A slice of the registered memory. */
    public MemorySegment slice(long offset, long len) {
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
            return new VerbsException(verb, Errno.EFAULT, "the memory of the registered region was freed (its arena is closed)",
                    "keep the arena open until the memory region is closed and no work request uses it");
        }
        return new VerbsException(verb, Errno.EINVAL, "SGE [offset " + offset + ", length " + len
                + ") lies outside the registered region of " + length + " bytes",
                "post only buffers inside a registered region, or register a larger one");
    }
}
