package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.generated.ibverbs.ibv_qp_attr;

/**
 * A queue pair ({@code struct ibv_qp}): RC, UC or UD, its state transitions with the attribute
 * masks each one needs, and the data path: {@link #postSend} and {@link #postRecv} hand a
 * preallocated chain of work requests to the provider's {@code post_send}/{@code post_recv}
 * in one call, allocation-free.
 *
 * <p>Owned by its protection domain; uses its completion queues and SRQ (they refuse to close
 * while it is open). State transitions are control-path calls, serialised by the caller.
 * Posting is single-threaded per queue: one thread posts sends and one thread posts receives
 * at a time. Breaking that rule is caught, not undefined: each side has a {@link Gate}, so a
 * second thread posting at the same moment gets a {@link ResourceBusyException}, and a
 * {@link #close()} racing a post waits for it to leave the provider before the QP is destroyed.
 *
 * <p>Checked mode accounts for outstanding work: a post that could overrun the send queue, the
 * receive queue or the completion queue their completions go to is refused with a
 * {@link QueueFullException} (nothing of the chain is posted). A send's slot comes back when its
 * completion, or that of a later signaled send, is polled, so unsignaled sends must be followed by
 * a signaled one often enough. After an error completion the QP is in ERR: further posts are
 * refused until {@link #reset()}.
 */
public final class QueuePair extends NativeResource {
    private static final boolean CHECKED = Verbs.CHECKED;

    final ProtectionDomain pd;
    /** The multicast groups it is attached to ({@link #attachMulticast}), detached on close. */
    final MulticastAttachment multicast = new MulticastAttachment();

    private final QueuePairType type;
    private final int qpNumber;
    final long address;
    private final MemorySegment postSendFn;
    private final MemorySegment postRecvFn;
    /** Post through critical downcalls (see Context.criticalDataPath). */
    private final boolean critical;
    /** The bad_wr out-slot: provider writes happen only inside a post (under the gate), so an automatic arena that lives as long as this object is enough. */
    private final java.lang.foreign.Arena scratch = java.lang.foreign.Arena.ofAuto();

    private final MemorySegment badWr;
    private final long badWrAddress;
    private final int maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData;
    private final SharedReceiveQueue srq;
    final CompletionQueue sendCq, recvCq;
    final Gate sendGate, recvGate;
    private final Gate[] gates;

    /** Checked-mode accounting of outstanding work; shared with the CQs' tables (never this object). */
    final QueueAccount account;
    /** As of the last transition or query through this object (transitions are control path, by the owner). */
    private QueuePairState state = QueuePairState.RESET;

    private volatile boolean lastWqeReached;
    /** The port of the last INIT transition (control path, by the owner). */
    int port = 1;
    /** The extended posting of a queue pair created with {@code ibv_create_qp_ex}, else null (set once, before publication). */
    ExtendedPosting extended;

    QueuePair(
            ProtectionDomain pd,
            MemorySegment qp,
            QueuePairInit init,
            int maxSendWr,
            int maxRecvWr,
            int maxSendSge,
            int maxRecvSge,
            int maxInlineData) {
        this(pd, qp, init, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, LibIbverbs::destroyQp);
    }

    QueuePair(
            ProtectionDomain pd,
            MemorySegment qp,
            QueuePairInit init,
            int maxSendWr,
            int maxRecvWr,
            int maxSendSge,
            int maxRecvSge,
            int maxInlineData,
            Destroyer destroy) {
        QueueAccount acct = new QueueAccount(
                qp.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.QP_QP_NUM),
                init.sendCq,
                init.recvCq,
                init.srq,
                maxSendWr,
                maxRecvWr,
                init.signalAll);
        Gate send = new Gate(), recv = new Gate();
        // the destroyer (also run by the cleaner for a leaked QP) takes the account out of the CQs'
        // tables and the gates out of the PD's set; it captures neither this object nor anything holding it
        java.util.Set<Gate> pdGates = pd.gates;
        super(
                pd,
                new NativeResource[] {init.sendCq, init.recvCq, init.srq},
                "queue pair",
                "ibv_destroy_qp",
                qp,
                h -> {
                    destroy.destroy(h);
                    acct.detach();
                    pdGates.remove(send);
                    pdGates.remove(recv);
                },
                null);
        this.account = acct;
        this.sendGate = send;
        this.recvGate = recv;
        this.gates = new Gate[] {send, recv};
        pdGates.add(send);
        pdGates.add(recv);
        this.pd = pd;
        this.type = init.type;
        this.address = qp.address();
        this.qpNumber = qp.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.QP_QP_NUM);
        MemorySegment ctx = pd.context().handle;
        this.postSendFn = InlineVerbs.contextOp(ctx, ContextLayout.OPS_POST_SEND);
        this.postRecvFn = InlineVerbs.contextOp(ctx, ContextLayout.OPS_POST_RECV);
        this.critical = pd.context().criticalDataPath;
        this.badWr = scratch.allocate(ADDRESS.byteSize(), ADDRESS.byteAlignment());
        this.badWrAddress = badWr.address();
        this.maxSendWr = maxSendWr;
        this.maxRecvWr = maxRecvWr;
        this.maxSendSge = maxSendSge;
        this.maxRecvSge = maxRecvSge;
        this.maxInlineData = maxInlineData;
        this.srq = init.srq;
        this.sendCq = init.sendCq;
        this.recvCq = init.recvCq;
        acct.attach();
        pd.context().asyncEvents.register(this); // last: the event thread may look it up at once
    }

    @Override
    Gate[] gates() {
        return gates;
    }

    /** The protection domain the queue pair was created in. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /** RC, UC or UD. */
    public QueuePairType type() {
        return type;
    }

    /** The QP number peers address. */
    public int qpNumber() {
        return qpNumber;
    }

    void assumeState(QueuePairState s) {
        state = s;
    }

    /** The state as of the last transition made through this object or {@link #query()}. */
    public QueuePairState state() {
        return state;
    }

    /** The send queue depth the provider granted. */
    public int maxSendWr() {
        return maxSendWr;
    }

    /** The receive queue depth the provider granted (0 with a shared receive queue). */
    public int maxRecvWr() {
        return maxRecvWr;
    }

    /** SGEs per send request, as granted. */
    public int maxSendSge() {
        return maxSendSge;
    }

    /** SGEs per receive request, as granted. */
    public int maxRecvSge() {
        return maxRecvSge;
    }

    /** The inline capacity the provider granted. */
    public int maxInlineData() {
        return maxInlineData;
    }

    /**
     * The raw {@code struct ibv_qp *}, for code that calls libibverbs itself: restricted to modules
     * with native access; the view stops working when the queue pair closes.
     */
    public MemorySegment handle() {
        return rawHandle("QueuePair.handle");
    }

    // ---- state transitions (the attribute blocks: QueuePairTransitions) --------------------

    /**
     * Whether {@code IBV_EVENT_QP_LAST_WQE_REACHED} arrived for this queue pair since it was
     * created or last reset. A queue pair on a shared receive queue, moved to ERR, gets it once no
     * more of the SRQ's receives can complete on it: after that and a drain of its completion
     * queue it may be destroyed without losing a completion (and the buffers they hold). The
     * event is queued for {@link Context#nextAsyncEvent} too.
     */
    public boolean lastWqeReached() {
        return lastWqeReached;
    }

    /** The async event thread saw {@code IBV_EVENT_QP_LAST_WQE_REACHED} for this queue pair. */
    void markLastWqeReached() {
        lastWqeReached = true;
    }

    /** One {@code ibv_modify_qp} to {@code to} with the attributes {@code mask} names (control path). */
    void modify(MemorySegment attr, int mask, QueuePairState to) {
        pin("ibv_modify_qp"); // a close on another thread meanwhile gets EBUSY
        ibv_qp_attr.qp_state(attr, to.value());
        try {
            LibIbverbs.modifyQp(handle, attr, mask | QueuePairTransitions.MASK_STATE);
        } catch (VerbsException e) {
            throw VerbsException.create(
                    "ibv_modify_qp",
                    e.errno(),
                    state + "->" + to + " of " + type + " QP " + qpNumber + " with attribute mask 0x"
                            + Integer.toHexString(mask | QueuePairTransitions.MASK_STATE) + " refused",
                    null);
        } finally {
            unpin();
        }
        state = to;
        if (to == QueuePairState.RESET) {
            asyncFailure = null; // a reset queue pair is usable again
            lastWqeReached = false;
        }
    }

    /**
     * RESET→INIT for RC/UC: bound to {@code port}, granting peers {@code remoteAccess}
     * (REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC; none by default: least privilege).
     */
    public void toInit(int port, Set<Access> remoteAccess) {
        QueuePairTransitions.toInit(this, port, remoteAccess);
    }

    /** RESET→INIT→RTR→RTS for UD with the given Q_Key and send PSN. */
    public void activateUd(int port, int qkey, int sqPsn) {
        QueuePairTransitions.activateUd(this, port, qkey, sqPsn);
    }

    /** This side's connection data for {@code gidIndex} (-1: LID only) and starting PSN. */
    public QueuePairEndpoint localEndpoint(int gidIndex, int psn) {
        Context ctx = pd.context();
        PortAttributes pa = ctx.queryPort(port);
        Gid gid = gidIndex >= 0 ? ctx.queryGid(port, gidIndex) : null;
        return new QueuePairEndpoint(qpNumber, psn & 0xffffff, pa.lid(), gid, pa.activeMtu());
    }

    /** INIT→RTR: receive from {@code remote}. */
    public void toRtr(QueuePairEndpoint remote, ConnectOptions o) {
        QueuePairTransitions.toRtr(this, remote, o);
    }

    /** RTR→RTS: send, starting at {@code sqPsn}, with the options' timeout and bounded retries. */
    public void toRts(int sqPsn, ConnectOptions o) {
        QueuePairTransitions.toRts(this, sqPsn, o);
    }

    /**
     * RESET→INIT→RTR→RTS of an RC or UC queue pair against {@code remote}, the usual
     * out-of-band-exchange setup: {@code local} is what this side sent to the peer.
     */
    public void connect(
            int port, Set<Access> remoteAccess, QueuePairEndpoint local, QueuePairEndpoint remote, ConnectOptions o) {
        toInit(port, remoteAccess);
        toRtr(remote, o);
        toRts(local.psn(), o);
    }

    /** Moves to ERR: every outstanding work request completes with {@code IBV_WC_WR_FLUSH_ERR}. */
    public void toError() {
        QueuePairTransitions.move(this, QueuePairState.ERR);
    }

    /**
     * Moves to RESET (from any state); the queues are emptied and the accounting of outstanding
     * work starts over. Call it only when no thread posts to or polls for this queue pair.
     */
    public void reset() {
        QueuePairTransitions.move(this, QueuePairState.RESET);
        account.reset();
    }

    /**
     * {@code ibv_attach_mcast}: this UD queue pair receives the datagrams sent to the multicast
     * group {@code group} (its MGID; for RoCE v2 the IPv4-mapped group address, {@link
     * Gid#ofAddress}) with LID {@code lid} (0 on RoCE). On RoCE the interface must also be in the
     * IP group (rdma_cm's join does that; see {@code org.verbs4j.cm.MulticastGroup}).
     */
    public void attachMulticast(Gid group, int lid) {
        MulticastAttachment.call(this, true, group, lid);
    }

    /** {@code ibv_detach_mcast}: undoes {@link #attachMulticast}; {@link #close()} detaches what is still attached. */
    public void detachMulticast(Gid group, int lid) {
        MulticastAttachment.call(this, false, group, lid);
    }

    /** {@code ibv_query_qp}: the state, as the provider sees it, and the main attributes. */
    public QueuePairAttributes query() {
        pin("ibv_query_qp");
        try {
            QueuePairAttributes a = QueuePairTransitions.query(handle);
            state = a.state();
            return a;
        } finally {
            unpin();
        }
    }

    // ---- data path ------------------------------------------------------------------------

    /**
     * {@code ibv_post_send} of the whole chain in one call. On failure the exception names the
     * first request not posted (those before it were posted). Allocation-free on success.
     */
    public void postSend(SendWorkRequests wrs) {
        postSend(wrs, null);
    }

    /**
     * Posts the whole chain through the extended API: {@code ibv_wr_start}, one
     * {@code ibv_wr_*} builder (with {@code ibv_wr_set_sge(_list)},
     * {@code ibv_wr_set_inline_data}, {@code ibv_wr_set_ud_addr}) per request, and
     * {@code ibv_wr_complete}, which posts all of it or nothing. The same chain, gates, region and
     * window checks and checked-mode accounting as {@link #postSend}; in every mode a request whose
     * operation the queue pair was not created for is refused before anything reaches the provider.
     * Allocation-free on success. On rxe with rdma-core before 64, whose {@code wr_set_sge_list}
     * miscounts a list of unequal lengths, a chain holding such a request goes through
     * {@code ibv_post_send} instead (the same work queue entries, counted right).
     *
     * @throws InvalidRequestException the queue pair was not created by
     *                                 {@link ProtectionDomain#createExtendedQueuePair}, or the chain
     *                                 holds an operation it was not created for
     */
    public void postSendExtended(SendWorkRequests wrs) {
        ExtendedPosting x = extended;
        if (x == null) {
            throw new InvalidRequestException(
                    "ibv_wr_start",
                    describe() + " was created without the extended API (no ibv_qp_ex)",
                    "create it with ProtectionDomain.createExtendedQueuePair, or post with postSend");
        }
        postSend(wrs, x);
    }

    private void postSend(SendWorkRequests wrs, ExtendedPosting x) {
        Gate g = sendGate;
        if (!g.tryEnter()) {
            throw g.refusal("ibv_post_send", this, "posting sends to");
        }
        try {
            int n = wrs.count;
            if (wrs.closed || n == 0) {
                if (wrs.closed) {
                    throw Refusals.unusable(this, "ibv_post_send", wrs);
                }
                return;
            }
            if (asyncFailure != null) {
                throw AsyncEventDispatcher.failure("ibv_post_send", asyncFailure);
            }
            wrs.verifyLive("ibv_post_send");
            if (type != QueuePairType.RC) {
                if (type == QueuePairType.UD && !wrs.everyRequestHasDestination()) {
                    throw Refusals.sendRefused(this, wrs, n); // every mode: the provider reads the address handle
                }
                if (type == QueuePairType.XRC_SEND && !wrs.everyRequestHasSrqNumber()) {
                    throw Refusals.noSrqNumber(this, wrs); // every mode: it would land in whatever SRQ 0 is
                }
            }
            if (x != null && !x.accepts(wrs)) {
                throw Refusals.notCreatedFor(this, wrs, x.opcodes); // every mode: the builder is a NULL pointer
            }
            if ((wrs.opcodes & SendWorkRequests.EXTENDED_ONLY_OPCODES) != 0
                    && (x == null || x.postsClassically(wrs, n))) {
                throw Refusals.extendedOnly(
                        this, wrs, x != null); // every mode: ibv_post_send would read an SGE it lacks
            }
            if (CHECKED) {
                checkSend(wrs, n);
                if (sendCq.overcommitted) {
                    synchronized (sendCq.roomLock) {
                        sendCq.checkRoom("ibv_post_send", n);
                        postSendNow(wrs, n, x);
                    }
                    return;
                }
            }
            postSendNow(wrs, n, x);
        } finally {
            g.exit();
            java.lang.ref.Reference.reachabilityFence(wrs);
        }
    }

    private void postSendNow(SendWorkRequests wrs, int n, ExtendedPosting x) {
        if (CHECKED) {
            // counted BEFORE the provider sees them: a poller on another thread may reap the
            // completion before post_send has even returned
            account.posted(wrs, n);
        }
        if (x != null && !x.postsClassically(wrs, n)) {
            int rc = x.post(wrs, n);
            if (rc != 0) { // wr_complete posts all or nothing
                if (CHECKED) {
                    account.notPosted(wrs, 0, n);
                }
                throw Refusals.extendedPostFailed(rc, n);
            }
            return;
        }
        wrs.endAt(n);
        int rc = InlineVerbs.postSend(critical, postSendFn, address, wrs.address, badWrAddress);
        if (rc != 0) {
            int index = wrs.indexOf(badWr.get(ADDRESS, 0).address());
            if (CHECKED) {
                account.notPosted(wrs, Math.max(index, 0), n);
            }
            throw Refusals.postFailed("ibv_post_send", rc, index, n);
        }
    }

    /**
     * One request that reaches the send queue through a verb other than post_send
     * ({@code ibv_bind_mw}): the gate, checks and accounting of a post of {@code record} (one
     * request standing for it), then {@code call}, whose nonzero result is the provider's errno
     * (nothing posted).
     */
    void postThrough(String verb, SendWorkRequests record, java.util.function.IntSupplier call) {
        Gate g = sendGate;
        if (!g.tryEnter()) {
            throw g.refusal(verb, this, "posting sends to");
        }
        try {
            if (asyncFailure != null) {
                throw AsyncEventDispatcher.failure(verb, asyncFailure);
            }
            if (CHECKED) {
                checkSend(record, 1);
                if (sendCq.overcommitted) {
                    synchronized (sendCq.roomLock) {
                        sendCq.checkRoom(verb, 1);
                        postThroughNow(verb, record, call);
                    }
                    return;
                }
            }
            postThroughNow(verb, record, call);
        } finally {
            g.exit();
        }
    }

    private void postThroughNow(String verb, SendWorkRequests record, java.util.function.IntSupplier call) {
        if (CHECKED) {
            account.posted(record, 1);
        }
        int rc = call.getAsInt();
        if (rc != 0) {
            if (CHECKED) {
                account.notPosted(record, 0, 1);
            }
            throw Refusals.postFailed(verb, rc, -1, 1);
        }
    }

    /** {@code ibv_post_recv} of the whole chain in one call; allocation-free on success. */
    public void postRecv(ReceiveWorkRequests wrs) {
        Gate g = recvGate;
        if (!g.tryEnter()) {
            throw g.refusal("ibv_post_recv", this, "posting receives to");
        }
        try {
            int n = wrs.count;
            if (wrs.closed || n == 0) {
                if (wrs.closed) {
                    throw Refusals.unusable(this, "ibv_post_recv", wrs);
                }
                return;
            }
            if (asyncFailure != null) {
                throw AsyncEventDispatcher.failure("ibv_post_recv", asyncFailure);
            }
            wrs.verifyLive("ibv_post_recv");
            if (CHECKED) {
                checkRecv(wrs, n);
                if (recvCq.overcommitted) {
                    synchronized (recvCq.roomLock) {
                        recvCq.checkRoom("ibv_post_recv", n);
                        postRecvNow(wrs, n);
                    }
                    return;
                }
            }
            postRecvNow(wrs, n);
        } finally {
            g.exit();
            java.lang.ref.Reference.reachabilityFence(wrs);
        }
    }

    private void postRecvNow(ReceiveWorkRequests wrs, int n) {
        if (CHECKED) {
            // counted BEFORE the provider sees them, as sends are: a poller on another thread may
            // reap a receive's completion before post_recv has returned
            account.recvPosted(n);
        }
        int rc = wrs.postTo(critical, postRecvFn, address, badWrAddress, n);
        if (rc != 0) {
            int index = wrs.indexOf(badWr.get(ADDRESS, 0).address());
            if (CHECKED) {
                account.recvPosted(-(n - Math.max(index, 0))); // those not posted after all
            }
            throw Refusals.postFailed("ibv_post_recv", rc, index, n);
        }
    }

    /** Sends that may still produce a completion (or hold a send-queue slot). */
    long sendOutstanding() {
        return account.sendOutstanding();
    }

    /** Receives posted and not yet completed. */
    long recvOutstanding() {
        return account.recvOutstanding();
    }

    private void checkSend(SendWorkRequests wrs, int n) {
        QueuePairState s = state;
        if (s.ordinal() < QueuePairState.RTS.ordinal()
                || s == QueuePairState.UNKNOWN
                || n > maxSendWr
                || account.failedStatus() != 0
                || sendOutstanding() + n > maxSendWr
                || wrs.maxSges > maxSendSge
                || wrs.maxInline > maxInlineData
                || (type == QueuePairType.UD && (wrs.hasNonSendOps() || wrs.withDestination != n))
                || (type == QueuePairType.UC && wrs.hasReadOrAtomicOps())) {
            throw Refusals.sendRefused(this, wrs, n); // the reasons are sorted out off the hot path
        }
    }

    private void checkRecv(ReceiveWorkRequests wrs, int n) {
        if (srq != null
                || state == QueuePairState.RESET
                || n > maxRecvWr
                || account.failedStatus() != 0
                || recvOutstanding() + n > maxRecvWr
                || wrs.maxSges > maxRecvSge) {
            throw Refusals.recvRefused(this, srq, wrs, n); // the reasons are sorted out off the hot path
        }
    }

    @Override
    void beforeRelease() {
        multicast.detachAll(this); // ibv_destroy_qp of an attached queue pair fails with EBUSY
    }

    @Override
    void afterRelease() {
        pd.context().asyncEvents.unregister(this);
    }

    @Override
    String describe() {
        return "QueuePair " + type + " #" + qpNumber + " " + state + " on " + device();
    }
}
