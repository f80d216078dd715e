package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.VerbsException;
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

    ProtectionDomain(Context context, MemorySegment pd) {
        this(context, pd, LibIbverbs::deallocPd);
    }

    ProtectionDomain(Context context, MemorySegment pd, Destroyer destroy) {
        super(context, "protection domain", "ibv_dealloc_pd", pd.reinterpret(16), destroy, null);
        this.context = context;
    }

    /** The context it was allocated on. */
    public Context context() {
        return context;
    }

    /** The raw {@code struct ibv_pd *}. */
    public MemorySegment handle() {
        ensureOpen("ibv_pd");
        return handle;
    }

    /** {@code ibv_reg_mr} of a native segment with the given rights (none: local read only). */
    public MemoryRegion register(MemorySegment segment, Access... access) {
        Set<Access> set = access.length == 0 ? EnumSet.noneOf(Access.class) : EnumSet.of(access[0], access);
        return register(segment, set);
    }

    /** {@code ibv_reg_mr} (the macro: {@code ibv_reg_mr_iova2} when optional access bits are set). */
    public MemoryRegion register(MemorySegment segment, Set<Access> access) {
        checkRegistration("ibv_reg_mr", segment, access);
        MemorySegment mr = InlineVerbs.regMr(handle, segment.address(), segment.byteSize(), Access.mask(access));
        return new MemoryRegion(this, mr, segment, segment.address(), access);
    }

    /** {@code ibv_reg_mr_iova2}: peers address the region's first byte as {@code iova}. */
    public MemoryRegion register(MemorySegment segment, long iova, Set<Access> access) {
        checkRegistration("ibv_reg_mr_iova2", segment, access);
        MemorySegment mr = LibIbverbs.regMrIova2(handle, segment.address(), segment.byteSize(), iova, Access.mask(access));
        return new MemoryRegion(this, mr, segment, iova, access);
    }

    private void checkRegistration(String verb, MemorySegment segment, Set<Access> access) {
        ensureOpen(verb);
        if (!segment.isNative()) {
            throw new VerbsException(verb, Errno.EINVAL, "a heap segment cannot be registered (the GC moves it)",
                    "allocate the buffer from an Arena");
        }
        if (!segment.scope().isAlive()) {
            throw new VerbsException(verb, Errno.EFAULT, "the segment's arena is closed", "register live memory");
        }
        if (segment.byteSize() == 0) {
            throw new VerbsException(verb, Errno.EINVAL, "the segment is empty", null);
        }
        if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC))
                && !access.contains(Access.LOCAL_WRITE)) {
            throw new VerbsException(verb, Errno.EINVAL, "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE",
                    "add Access.LOCAL_WRITE");
        }
    }

    /** {@code ibv_create_qp}; the created QP is in RESET. */
    public QueuePair createQueuePair(QueuePairInit init) {
        ensureOpen("ibv_create_qp");
        init.sendCq.ensureOpen("ibv_create_qp");
        init.recvCq.ensureOpen("ibv_create_qp");
        if (init.srq != null) {
            init.srq.ensureOpen("ibv_create_qp");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(ibv_qp_init_attr.layout());
            ibv_qp_init_attr.send_cq(a, init.sendCq.handle);
            ibv_qp_init_attr.recv_cq(a, init.recvCq.handle);
            ibv_qp_init_attr.srq(a, init.srq == null ? MemorySegment.NULL : init.srq.handle);
            MemorySegment cap = ibv_qp_init_attr.cap(a);
            ibv_qp_cap.max_send_wr(cap, init.maxSendWr);
            ibv_qp_cap.max_recv_wr(cap, init.srq == null ? init.maxRecvWr : 0);
            ibv_qp_cap.max_send_sge(cap, init.maxSendSge);
            ibv_qp_cap.max_recv_sge(cap, init.srq == null ? init.maxRecvSge : 0);
            ibv_qp_cap.max_inline_data(cap, init.maxInlineData);
            ibv_qp_init_attr.qp_type(a, init.type.value());
            ibv_qp_init_attr.sq_sig_all(a, init.signalAll ? 1 : 0);
            MemorySegment qp = LibIbverbs.createQp(handle, a);
            // ibv_create_qp writes back the capacities the provider actually granted
            return new QueuePair(this, qp.reinterpret(ObjectLayout.QP_SIZE), init,
                    ibv_qp_cap.max_send_wr(cap), ibv_qp_cap.max_recv_wr(cap), ibv_qp_cap.max_send_sge(cap),
                    ibv_qp_cap.max_recv_sge(cap), ibv_qp_cap.max_inline_data(cap));
        }
    }

    /** {@code ibv_create_srq}. */
    public SharedReceiveQueue createSharedReceiveQueue(int maxWr, int maxSge) {
        ensureOpen("ibv_create_srq");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(ibv_srq_init_attr.layout());
            MemorySegment attr = ibv_srq_init_attr.attr(a);
            ibv_srq_attr.max_wr(attr, maxWr);
            ibv_srq_attr.max_sge(attr, maxSge);
            MemorySegment srq = LibIbverbs.createSrq(handle, a);
            return new SharedReceiveQueue(this, srq, ibv_srq_attr.max_wr(attr), ibv_srq_attr.max_sge(attr));
        }
    }

    /** {@code ibv_create_ah}: the destination of UD sends. */
    public AddressHandle createAddressHandle(AddressVector av) {
        ensureOpen("ibv_create_ah");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(ibv_ah_attr.layout());
            av.write(a);
            return new AddressHandle(this, LibIbverbs.createAh(handle, a), av);
        }
    }
}
