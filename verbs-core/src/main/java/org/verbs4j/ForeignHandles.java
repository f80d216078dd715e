package org.verbs4j;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.ObjectLayout;

/**
 * The escape hatch in the other direction: wraps verbs objects that were created outside
 * verbs4j (by librdmacm's {@code rdma_create_qp}, by C code, by a test's stand-in provider) so
 * that the allocation-free data path can be used on them. The wrappers BORROW their handles:
 * closing them releases nothing native (the creator does), but they keep every other rule of
 * their type (owners, use after close, checked mode).
 *
 * <p>The caller guarantees that each handle is a valid object of its type and outlives the
 * wrapper. Restricted, like the JDK's own restricted methods: callable only from a module with
 * native access ({@link RestrictedMethodException} otherwise). Stateless; any thread may call it.
 */
public final class ForeignHandles {
    private static final NativeResource.Destroyer BORROWED = h -> {};

    private ForeignHandles() {}

    /**
     * Wraps a {@code struct ibv_context *}. Once a CQ, QP or SRQ of it is wrapped or created (or
     * {@link Context#nextAsyncEvent} is called), verbs4j's event thread reads its async events
     * and makes its async fd non-blocking: the creator must not read them itself.
     */
    public static Context context(MemorySegment ibvContext, String deviceName) {
        Restricted.check("ForeignHandles.context");
        notNull("ForeignHandles.context", ibvContext, "struct ibv_context *");
        return new Context(ibvContext.reinterpret(ContextLayout.SIZE), deviceName, BORROWED);
    }

    /** {@link #context(MemorySegment, String)} with the data path linked critical or not, whatever the provider. */
    static Context context(MemorySegment ibvContext, String deviceName, boolean criticalDataPath) {
        return new Context(ibvContext.reinterpret(ContextLayout.SIZE), deviceName, BORROWED, criticalDataPath);
    }

    private static void notNull(String method, MemorySegment handle, String type) {
        if (handle.equals(MemorySegment.NULL)) {
            throw new InvalidRequestException(method, "a NULL " + type, "pass the object its creator returned");
        }
    }

    /** Wraps a {@code struct ibv_pd *} of {@code context}. */
    public static ProtectionDomain protectionDomain(Context context, MemorySegment ibvPd) {
        Restricted.check("ForeignHandles.protectionDomain");
        return wrap("ForeignHandles.protectionDomain", () -> new ProtectionDomain(context, ibvPd, BORROWED), context);
    }

    /** Wraps a {@code struct ibv_cq *} of {@code context} (no completion channel). */
    public static CompletionQueue completionQueue(Context context, MemorySegment ibvCq) {
        Restricted.check("ForeignHandles.completionQueue");
        return wrap(
                "ForeignHandles.completionQueue",
                () -> new CompletionQueue(context, ibvCq.reinterpret(ObjectLayout.CQ_SIZE), null, BORROWED),
                context);
    }

    /**
     * Wraps a {@code struct ibv_cq *} of {@code context} (no completion channel) as a completion
     * queue confined to the calling thread (see {@link Context#createConfinedCompletionQueue(int)}).
     */
    public static CompletionQueue confinedCompletionQueue(Context context, MemorySegment ibvCq) {
        Restricted.check("ForeignHandles.confinedCompletionQueue");
        Thread confinedTo = Thread.currentThread();
        return wrap(
                "ForeignHandles.confinedCompletionQueue",
                () -> new CompletionQueue(context, ibvCq.reinterpret(ObjectLayout.CQ_SIZE), null, BORROWED, confinedTo),
                context);
    }

    /**
     * Wraps a {@code struct ibv_qp *} created with {@code init}'s shape and capacities, in
     * {@code state} (what checked mode assumes until the next transition or query).
     */
    public static QueuePair queuePair(
            ProtectionDomain pd, MemorySegment ibvQp, QueuePairInit init, QueuePairState state) {
        Restricted.check("ForeignHandles.queuePair");
        QueuePair qp = wrap(
                "ForeignHandles.queuePair",
                () -> new QueuePair(
                        pd,
                        ibvQp.reinterpret(ObjectLayout.QP_SIZE),
                        init,
                        init.maxSendWr,
                        init.maxRecvWr,
                        init.maxSendSge,
                        init.maxRecvSge,
                        init.maxInlineData,
                        BORROWED),
                pd,
                init.sendCq,
                init.recvCq,
                init.srq);
        qp.assumeState(state);
        return qp;
    }

    /**
     * Wraps a {@code struct ibv_qp *} that C code created with {@code ibv_create_qp_ex} for
     * {@code operations}, as {@link #queuePair} does, with its extended posting
     * ({@link QueuePair#postSendExtended}); refused (EOPNOTSUPP) when the QP has no {@code ibv_qp_ex}.
     */
    public static QueuePair extendedQueuePair(
            ProtectionDomain pd,
            MemorySegment ibvQp,
            QueuePairInit init,
            Set<SendOperation> operations,
            QueuePairState state) {
        QueuePair qp = queuePair(pd, ibvQp, init, state);
        ExtendedPosting.attach(qp, SendOperation.mask(operations), init.type);
        return qp;
    }

    /** Wraps a {@code struct ibv_srq *} of {@code pd} with the capacities it was created with. */
    public static SharedReceiveQueue sharedReceiveQueue(
            ProtectionDomain pd, MemorySegment ibvSrq, int maxWr, int maxSge) {
        Restricted.check("ForeignHandles.sharedReceiveQueue");
        return wrap(
                "ForeignHandles.sharedReceiveQueue",
                () -> new SharedReceiveQueue(pd, ibvSrq, maxWr, maxSge, BORROWED),
                pd);
    }

    /** Wraps memory registered elsewhere under {@code lkey}/{@code rkey} (e.g. by C code). */
    public static MemoryRegion memoryRegion(
            ProtectionDomain pd, MemorySegment segment, int lkey, int rkey, Set<Access> access) {
        Restricted.check("ForeignHandles.memoryRegion");
        return wrap(
                "ForeignHandles.memoryRegion",
                () -> new MemoryRegion(
                        pd, MemorySegment.NULL, segment, segment.address(), access, BORROWED, lkey, rkey),
                pd);
    }

    /**
     * Wraps device memory registered elsewhere (e.g. by C code, or a test's stand-in provider)
     * under {@code lkey}/{@code rkey}: a region without a host view whose SGEs name
     * {@code address}. {@code release} runs once when the wrapper closes (null: nothing is
     * released).
     */
    public static MemoryRegion deviceMemoryRegion(
            ProtectionDomain pd, long address, long length, int lkey, int rkey, Set<Access> access, Runnable release) {
        Restricted.check("ForeignHandles.deviceMemoryRegion");
        NativeResource.Destroyer destroy = release == null ? BORROWED : h -> release.run();
        return wrap(
                "ForeignHandles.deviceMemoryRegion",
                () -> new MemoryRegion(pd, MemorySegment.NULL, address, length, address, access, destroy, lkey, rkey),
                pd);
    }

    /**
     * Makes a wrapper while the objects it is created from or uses are pinned: one of them closed
     * (or closed by another thread meanwhile) refuses it with EBADF naming {@code method}.
     */
    private static <T> T wrap(String method, java.util.function.Supplier<T> make, NativeResource... parents) {
        NativeResource.pinAll(method, parents);
        try {
            return make.get();
        } finally {
            NativeResource.unpinAll(parents);
        }
    }
}
