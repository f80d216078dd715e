package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;

/**
 * A shared receive queue ({@code struct ibv_srq}): one pool of receive buffers that several
 * queue pairs consume. Owned by its protection domain; refuses to close while queue pairs use
 * it. One thread posts to it at a time: a second thread posting at the same moment gets a
 * {@link ResourceBusyException}, and a close racing a post waits for it (see {@link Gate}). In
 * checked mode a post that would overrun it is refused with a {@link QueueFullException}.
 */
public final class SharedReceiveQueue extends NativeResource {
    private static final boolean CHECKED = Verbs.CHECKED;
    final long address;
    private final MemorySegment postFn;
    /** Post through critical downcalls (see Context.criticalDataPath). */
    private final boolean critical;

    private final int maxWr;
    private final int maxSge;
    private final XrcDomain xrcDomain;
    private final CompletionQueue xrcCq;
    private final int srqNumber;
    /** The bad_wr out-slot: provider writes happen only inside a post (under the gate), so an automatic arena that lives as long as this object is enough. */
    private final java.lang.foreign.Arena scratch = java.lang.foreign.Arena.ofAuto();

    private final MemorySegment badWr;
    final Gate postGate;
    private final Gate[] gates;
    private static final java.lang.invoke.VarHandle POSTED, COMPLETED;

    static {
        try {
            java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
            POSTED = l.findVarHandle(SharedReceiveQueue.class, "posted", long.class);
            COMPLETED = l.findVarHandle(SharedReceiveQueue.class, "completedCount", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("unused")
    private long posted, completedCount; // poster-owned, poller-owned

    SharedReceiveQueue(ProtectionDomain pd, MemorySegment srq, int maxWr, int maxSge) {
        this(pd, srq, maxWr, maxSge, LibIbverbs::destroySrq);
    }

    SharedReceiveQueue(ProtectionDomain pd, MemorySegment srq, int maxWr, int maxSge, Destroyer destroy) {
        this(pd, srq, maxWr, maxSge, destroy, null, null, -1);
    }

    /**
     * An XRC SRQ ({@code xrcd} and {@code cq} not null, both used by it): its receives complete on
     * {@code cq}, which it alone of XRC SRQs may use (see {@link CompletionQueue#attachXrc}).
     */
    SharedReceiveQueue(
            ProtectionDomain pd,
            MemorySegment srq,
            int maxWr,
            int maxSge,
            Destroyer destroy,
            XrcDomain xrcd,
            CompletionQueue cq,
            int srqNumber) {
        Gate gate = new Gate();
        java.util.Set<Gate> pdGates = pd.gates;
        super(
                pd,
                new NativeResource[] {xrcd, cq},
                xrcd == null ? "shared receive queue" : "XRC shared receive queue",
                "ibv_destroy_srq",
                srq.reinterpret(128),
                h -> {
                    destroy.destroy(h);
                    pdGates.remove(gate);
                    if (cq != null) {
                        cq.detachXrc();
                    }
                },
                null);
        this.xrcDomain = xrcd;
        this.xrcCq = cq;
        this.srqNumber = srqNumber;
        this.postGate = gate;
        this.gates = new Gate[] {gate};
        pdGates.add(gate);
        this.address = srq.address();
        this.postFn = InlineVerbs.contextOp(pd.context().handle, ContextLayout.OPS_POST_SRQ_RECV);
        this.critical = pd.context().criticalDataPath;
        this.maxWr = maxWr;
        this.maxSge = maxSge;
        this.badWr = scratch.allocate(ADDRESS.byteSize(), ADDRESS.byteAlignment());
        if (cq != null) {
            cq.attachXrc(this);
        }
        pd.context().asyncEvents.register(this); // last: the event thread may look it up at once
    }

    /** The XRC domain of an XRC SRQ; null for a plain one. */
    public XrcDomain xrcDomain() {
        return xrcDomain;
    }

    /** The completion queue an XRC SRQ's receives complete on; null for a plain SRQ (its QPs' receive CQs). */
    public CompletionQueue completionQueue() {
        return xrcCq;
    }

    /**
     * The number ({@code ibv_get_srq_num}) that a peer's XRC_SEND requests name to reach this XRC
     * SRQ ({@link SendWorkRequests#remoteSrqNumber}).
     *
     * @throws InvalidRequestException for a plain SRQ, which has none
     */
    public int srqNumber() {
        if (xrcDomain == null) {
            throw new InvalidRequestException(
                    "ibv_get_srq_num",
                    describe() + " is not an XRC SRQ",
                    "create it with ProtectionDomain.createXrcSharedReceiveQueue");
        }
        return srqNumber;
    }

    /** The number of receive work requests it holds (what the provider granted). */
    public int maxWr() {
        return maxWr;
    }

    /** The scatter/gather entries per receive work request. */
    public int maxSge() {
        return maxSge;
    }

    @Override
    Gate[] gates() {
        return gates;
    }

    /** Receives posted and not yet completed (checked mode's count). */
    long outstanding() {
        return (long) POSTED.getAcquire(this) - (long) COMPLETED.getAcquire(this);
    }

    /** One of its receives completed (the polling thread). */
    void completed() {
        COMPLETED.setRelease(this, (long) COMPLETED.get(this) + 1);
    }

    /** {@code ibv_post_srq_recv} of the whole chain in one call; allocation-free on success. */
    public void postRecv(ReceiveWorkRequests wrs) {
        Gate g = postGate;
        if (!g.tryEnter()) {
            throw g.refusal("ibv_post_srq_recv", this, "posting receives to");
        }
        try {
            if (wrs.isClosed()) {
                throw new ResourceClosedException("ibv_post_srq_recv", "the ReceiveWorkRequests is closed", null);
            }
            int n = wrs.count;
            if (n == 0) {
                return;
            }
            if (asyncFailure != null) {
                throw AsyncEventDispatcher.failure("ibv_post_srq_recv", asyncFailure);
            }
            wrs.verifyLive("ibv_post_srq_recv");
            if (CHECKED) {
                if (wrs.maxSges > maxSge) {
                    VerbsException e = Refusals.srqSges(wrs, n, maxSge);
                    if (e != null) {
                        throw e;
                    }
                }
                long outstanding = outstanding();
                if (outstanding + n > maxWr) {
                    throw Refusals.srqFull(maxWr, outstanding, n);
                }
            }
            if (CHECKED) {
                // counted BEFORE the provider sees them: a poller on another thread may reap a
                // receive's completion before post_srq_recv has returned
                POSTED.setRelease(this, (long) POSTED.get(this) + n);
            }
            int rc = wrs.postTo(critical, postFn, address, badWr.address(), n);
            if (rc != 0) {
                int index = wrs.indexOf(badWr.get(ADDRESS, 0).address());
                if (CHECKED) {
                    POSTED.setRelease(this, (long) POSTED.get(this) - (n - Math.max(index, 0))); // not posted after all
                }
                throw VerbsException.of(
                        "ibv_post_srq_recv", rc, "work request #" + index + " of " + n + " was not posted");
            }
        } finally {
            g.exit();
            java.lang.ref.Reference.reachabilityFence(wrs);
        }
    }

    @Override
    void afterRelease() {
        ((ProtectionDomain) owner).context().asyncEvents.unregister(this);
    }

    @Override
    String describe() {
        return (xrcDomain == null ? "SharedReceiveQueue on " : "SharedReceiveQueue XRC #" + srqNumber + " on ")
                + device() + ", " + maxWr + " WRs x " + maxSge + " SGE";
    }
}
