package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.CompletionLayout;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;

/**
 * A completion queue ({@code struct ibv_cq}). {@link #poll} reaps completions into a reusable
 * native {@link WorkCompletions} array through the provider's {@code poll_cq}, with no
 * allocation and no lock.
 *
 * <p>Owned by its {@link Context}; refuses to close while queue pairs use it. Polling and
 * {@link #requestNotify} are single-threaded: one thread polls a CQ at a time (as in C). A second
 * thread polling at the same moment gets a {@link ResourceBusyException}, and a {@link #close()}
 * racing a poll waits for it to leave the provider (see {@link Gate}): each poll enters and
 * leaves a gate, one uncontended compare-and-set.
 *
 * <p>A <em>confined</em> CQ ({@link Context#createConfinedCompletionQueue}) belongs to the thread
 * that created it, as a confined {@link java.lang.foreign.Arena} does: only that thread may poll
 * it, arm it and close it, so a poll needs no gate (a thread check and a plain read instead of the
 * compare-and-set). Another thread's poll gets a {@link ResourceBusyException}; another thread's
 * {@link #close()} too, until the owner thread has ended (then no poll can be inside the provider,
 * and any thread may close it).
 *
 * <p>In checked mode each poll also credits the completions to the queue pairs (and shared
 * receive queues) they belong to, which is how a post knows how much room is left; and if the
 * queues attached to this CQ could together hold more work than it has entries
 * ({@link #isOvercommitted()}), posts to them are refused when their outstanding work could
 * overrun it.
 */
public final class CompletionQueue extends NativeResource {
    private static final int ACK_BATCH = 16;

    final long address;
    private final MemorySegment pollFn;
    private final MemorySegment notifyFn;
    /** Poll through critical downcalls (see Context.criticalDataPath). */
    private final boolean critical;

    private final int capacity;
    private final CompletionChannel channel;
    private int unackedEvents;
    private static final boolean CHECKED = Verbs.CHECKED;
    final Gate pollGate = new Gate();
    /** The only thread that may poll, arm and close this CQ, or null (any thread, one at a time, through the gate). */
    private final Thread confinedTo;

    private final Gate[] gates = {pollGate};
    /** The queue pairs whose completions come here, by QP number (copy-on-write). */
    private volatile QpTable table = QpTable.EMPTY;
    /** True when its queue pairs and SRQs could together hold more work than it has entries. */
    volatile boolean overcommitted;
    /**
     * Serialises the table's changes and, on an over-committed CQ, each post's room check with its
     * post. A private lock: code that holds this public object's monitor cannot block the library.
     */
    final Object roomLock = new Object();

    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel) {
        this(context, cq, channel, LibIbverbs::destroyCq);
    }

    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel, Destroyer destroy) {
        this(context, cq, channel, destroy, null);
    }

    CompletionQueue(
            Context context, MemorySegment cq, CompletionChannel channel, Destroyer destroy, Thread confinedTo) {
        this(context, cq, channel, destroy, confinedTo, null);
    }

    /** A CQ created on {@code parentDomain} (null: none), which refuses to close while it is open. */
    CompletionQueue(
            Context context,
            MemorySegment cq,
            CompletionChannel channel,
            Destroyer destroy,
            Thread confinedTo,
            ProtectionDomain parentDomain) {
        super(
                context,
                new NativeResource[] {channel, parentDomain},
                "completion queue",
                "ibv_destroy_cq",
                cq.reinterpret(ObjectLayout.CQ_SIZE),
                destroy,
                null);
        this.address = cq.address();
        MemorySegment ctx = context.handle;
        this.pollFn = InlineVerbs.contextOp(ctx, ContextLayout.OPS_POLL_CQ);
        this.notifyFn = InlineVerbs.contextOp(ctx, ContextLayout.OPS_REQ_NOTIFY_CQ);
        this.critical = context.criticalDataPath;
        this.capacity = handle.get(JAVA_INT, ObjectLayout.CQ_CQE);
        this.channel = channel;
        this.confinedTo = confinedTo;
        this.parentDomain = parentDomain;
        if (channel != null) {
            channel.attach(this);
        }
        context.asyncEvents.register(this);
    }

    private final ProtectionDomain parentDomain;

    /** The parent domain it was created on ({@link Context#createExtendedCompletionQueue}), or null. */
    public ProtectionDomain parentDomain() {
        return parentDomain;
    }

    /** The number of entries the provider granted (at least what was asked). */
    public int capacity() {
        return capacity;
    }

    /**
     * The raw {@code struct ibv_cq *}: restricted to modules with native access; the view stops
     * working when the CQ closes.
     */
    public MemorySegment handle() {
        return rawHandle("CompletionQueue.handle");
    }

    @Override
    Gate[] gates() {
        return gates;
    }

    /** True when only {@link #ownerThread()} may poll, arm and close it (no gate on its poll). */
    public boolean isConfined() {
        return confinedTo != null;
    }

    /** The thread a confined CQ belongs to (the one that created it), or null when it is not confined. */
    public Thread ownerThread() {
        return confinedTo;
    }

    /**
     * Enters the poll side for {@code verb} (poll, arm): through the gate, or for a confined CQ
     * only on its owner thread and only while open (program order on the one thread that polls
     * and closes it is all the ordering needed). Pair with {@link #leavePoll} in a finally block.
     */
    void enterPoll(String verb) {
        Thread owner = confinedTo;
        if (owner != null) {
            if (Thread.currentThread() != owner || pollGate.isClosed()) {
                throw Refusals.confinedRefusal(this, verb, owner);
            }
        } else if (!pollGate.tryEnter()) {
            throw pollGate.refusal(verb, this, "polling");
        }
    }

    void leavePoll() {
        if (confinedTo == null) {
            pollGate.exit();
        }
    }

    @Override
    VerbsException closeRefusal() {
        Thread owner = confinedTo;
        if (owner == null || owner == Thread.currentThread() || !owner.isAlive()) {
            return null; // a thread that has ended is not inside a poll (its end happens-before isAlive's false)
        }
        return Refusals.confinedCloseRefusal(owner);
    }

    /** True when the queues that complete here could together hold more work than its capacity. */
    public boolean isOvercommitted() {
        return overcommitted;
    }

    void attach(QueueAccount qp) {
        synchronized (roomLock) {
            table = table.with(qp);
            recompute();
        }
    }

    void detach(QueueAccount qp) {
        synchronized (roomLock) {
            table = table.without(qp);
            recompute();
        }
    }

    /**
     * The XRC SRQ whose receives complete here, or null. Its completions name the XRC_RECV queue
     * pair that received (no SRQ number), so one CQ serves at most one XRC SRQ: checked mode
     * credits it every receive (and every error) of a queue pair it does not know.
     */
    private volatile SharedReceiveQueue xrcSrq;

    private boolean xrcClaimed; // under roomLock

    /** Reserves this CQ for an XRC SRQ about to be created; refused while another one uses it. */
    void claimXrc(String verb) {
        synchronized (roomLock) {
            if (xrcClaimed) {
                throw new InvalidRequestException(
                        verb,
                        describe() + " already serves an XRC SRQ",
                        "give each XRC SRQ a completion queue of its own (XRC completions do not name the SRQ)");
            }
            xrcClaimed = true;
        }
    }

    void attachXrc(SharedReceiveQueue srq) {
        synchronized (roomLock) {
            xrcSrq = srq;
            recompute();
        }
    }

    /** Releases the claim (the XRC SRQ was destroyed, or its creation failed). */
    void detachXrc() {
        synchronized (roomLock) {
            xrcSrq = null;
            xrcClaimed = false;
            recompute();
        }
    }

    private void recompute() {
        long committed = 0;
        java.util.Set<SharedReceiveQueue> srqs = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (QueueAccount q : table.all()) {
            if (q.sendCq == this) {
                committed += q.maxSendWr;
            }
            if (q.recvCq == this) {
                if (q.srq == null) {
                    committed += q.maxRecvWr;
                } else if (srqs.add(q.srq)) {
                    committed += q.srq.maxWr();
                }
            }
        }
        SharedReceiveQueue x = xrcSrq;
        if (x != null) {
            committed += x.maxWr();
        }
        overcommitted = committed > capacity;
    }

    /**
     * Checked mode, over-committed CQ, with {@link #roomLock} held: refuses {@code n} more work
     * requests when the work outstanding on its queues could then overrun it.
     */
    void checkRoom(String verb, int n) {
        long outstanding = 0;
        java.util.Set<SharedReceiveQueue> srqs = null;
        for (QueueAccount q : table.all()) {
            if (q.sendCq == this) {
                outstanding += q.sendOutstanding();
            }
            if (q.recvCq == this) {
                if (q.srq == null) {
                    outstanding += q.recvOutstanding();
                } else {
                    if (srqs == null) {
                        srqs = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
                    }
                    if (srqs.add(q.srq)) {
                        outstanding += q.srq.outstanding();
                    }
                }
            }
        }
        SharedReceiveQueue x = xrcSrq;
        if (x != null) {
            outstanding += x.outstanding();
        }
        if (outstanding + n > capacity) {
            throw Refusals.completionQueueFull(verb, capacity, outstanding, n);
        }
    }

    /**
     * {@code ibv_poll_cq}: reaps up to {@code wcs.capacity()} completions into {@code wcs}
     * (overwriting what it held) and returns how many. Allocation-free.
     */
    public int poll(WorkCompletions wcs) {
        enterPoll("ibv_poll_cq");
        try {
            if (asyncFailure != null) {
                throw AsyncEventDispatcher.failure("ibv_poll_cq", asyncFailure);
            }
            wcs.ensureUsable("ibv_poll_cq");
            int n = InlineVerbs.pollCq(critical, pollFn, address, wcs.capacity, wcs.address);
            if (n < 0) {
                throw Refusals.pollFailed(n);
            }
            wcs.count = n;
            if (CHECKED && n > 0) {
                credit(wcs, 0, n);
            }
            return n;
        } finally {
            leavePoll();
            java.lang.ref.Reference.reachabilityFence(wcs);
        }
    }

    /**
     * The last account {@link #credit} found, and the table it was found in: polls reap one QP's
     * completions again and again, so most polls skip the table; a new table (a QP attached or
     * detached) makes it stale. Written and read only by the thread inside the poll gate (or the
     * owner thread of a confined CQ).
     */
    private QpTable lastTable;

    private QueueAccount lastAccount;

    private QueueAccount account(QpTable t, int qpn) {
        QueueAccount q = lastAccount;
        if (t == lastTable && q != null && q.qpNumber == qpn) {
            return q;
        }
        q = t.get(qpn);
        if (q != null) {
            lastTable = t;
            lastAccount = q;
        }
        return q;
    }

    /** Credits completions {@code [from, to)} of {@code wcs} to their queue pairs (checked mode). */
    void credit(Reaped wcs, int from, int to) {
        QpTable t = table;
        QueueAccount q = null;
        int qpn = 0;
        int sends = 0; // successful send completions of q not yet credited (a run of them is credited at once)
        for (int i = from; i < to; i++) {
            int n = wcs.rawQpNumber(i);
            if (q == null || n != qpn) { // consecutive completions of one QP: one lookup
                if (sends != 0) {
                    q.sendsCompleted(sends);
                    sends = 0;
                }
                q = account(t, n);
                qpn = n;
                if (q == null) {
                    creditXrc(wcs, i); // an XRC receiving end, a queue pair not created through verbs4j, or closed
                    continue;
                }
            }
            long statusAndOpcode = wcs.rawStatusAndOpcode(i); // one read for both
            int status = WorkCompletions.statusOf(statusAndOpcode);
            boolean recvOpcode = (WorkCompletions.opcodeOf(statusAndOpcode) & CompletionOpcode.RECV) != 0;
            if (status == WorkCompletions.SUCCESS && !recvOpcode) {
                sends++;
                continue;
            }
            if (sends != 0) { // keep the order: the run before this completion first
                q.sendsCompleted(sends);
                sends = 0;
            }
            boolean recv;
            if (status == WorkCompletions.SUCCESS || q.sendCq != q.recvCq) {
                recv = status == WorkCompletions.SUCCESS ? recvOpcode : q.recvCq == this;
            } else {
                recv = recvOpcode; // error on a shared CQ: the opcode is a hint
            }
            q.completed(status, recv);
            if (recv && q.srq != null) {
                q.srq.completed();
            }
        }
        if (sends != 0) {
            q.sendsCompleted(sends);
        }
    }

    /** Completion {@code i} of a queue pair without an account: its XRC SRQ's, if this CQ has one and it received. */
    private void creditXrc(Reaped wcs, int i) {
        SharedReceiveQueue x = xrcSrq;
        if (x != null) {
            long statusAndOpcode = wcs.rawStatusAndOpcode(i);
            if (WorkCompletions.statusOf(statusAndOpcode) != WorkCompletions.SUCCESS
                    || (WorkCompletions.opcodeOf(statusAndOpcode) & CompletionOpcode.RECV) != 0) {
                x.completed();
            }
        }
    }

    /**
     * Busy-polls until at least {@code min} completions were reaped into {@code wcs} (appended
     * after one another) or {@code timeout} passed; returns how many it holds. For tests and
     * setup, where a wait must never hang; on the hot path, {@link CompletionWaiter} spins and
     * then blocks on the completion channel, allocation-free.
     */
    public int poll(WorkCompletions wcs, int min, Duration timeout) {
        checkMin(wcs, min);
        long deadline = Timeouts.deadline("ibv_poll_cq", timeout);
        int have = 0;
        wcs.count = 0;
        while (have < min) {
            int n = pollAppend(wcs, have);
            have += n;
            if (n == 0) {
                if (System.nanoTime() - deadline > 0) {
                    break;
                }
                Thread.onSpinWait();
            }
        }
        wcs.count = have;
        return have;
    }

    /** Refuses a wait for more completions than {@code wcs} holds (and a closed CQ or array). */
    void checkMin(WorkCompletions wcs, int min) {
        ensureOpen("ibv_poll_cq");
        wcs.ensureUsable("ibv_poll_cq");
        if (min > wcs.capacity) {
            throw VerbsException.create(
                    "ibv_poll_cq", Errno.EINVAL, "min " + min + " exceeds the array's capacity " + wcs.capacity, null);
        }
    }

    /**
     * One {@code ibv_poll_cq} into {@code wcs} after the {@code have} completions it already
     * holds; returns how many it reaped (its count is {@code have} plus those). Allocation-free.
     */
    int pollAppend(WorkCompletions wcs, int have) {
        enterPoll("ibv_poll_cq");
        int n;
        try {
            if (asyncFailure != null) {
                throw AsyncEventDispatcher.failure("ibv_poll_cq", asyncFailure);
            }
            wcs.ensureUsable("ibv_poll_cq");
            n = InlineVerbs.pollCq(
                    critical,
                    pollFn,
                    address,
                    wcs.capacity - have,
                    wcs.address + (long) have * CompletionLayout.WC_SIZE);
            if (n < 0) {
                throw Refusals.pollFailed(n);
            }
            wcs.count = have + n;
            if (CHECKED && n > 0) {
                credit(wcs, have, have + n);
            }
        } finally {
            leavePoll();
            java.lang.ref.Reference.reachabilityFence(wcs);
        }
        return n;
    }

    /**
     * {@code ibv_req_notify_cq}: arm the CQ so its next completion (or next solicited one)
     * raises an event on its completion channel.
     */
    public void requestNotify(boolean solicitedOnly) {
        enterPoll("ibv_req_notify_cq");
        try {
            requestNotifyNow(solicitedOnly);
        } finally {
            leavePoll();
        }
    }

    private void requestNotifyNow(boolean solicitedOnly) {
        if (channel == null) {
            throw VerbsException.create(
                    "ibv_req_notify_cq",
                    Errno.EINVAL,
                    "the CQ has no completion channel",
                    "create it with Context.createCompletionQueue(n, channel, vector)");
        }
        int rc = InlineVerbs.reqNotifyCq(notifyFn, address, solicitedOnly ? 1 : 0);
        if (rc != 0) {
            throw VerbsException.of("ibv_req_notify_cq", rc);
        }
    }

    /** The completion channel it reports to, or null. */
    public CompletionChannel channel() {
        return channel;
    }

    void eventReceived() {
        if (++unackedEvents >= ACK_BATCH) {
            LibIbverbs.ackCqEvents(handle, unackedEvents);
            unackedEvents = 0;
        }
    }

    @Override
    void beforeRelease() {
        if (channel != null) {
            channel.detach(this); // first: no waiter counts an event for it after this
        }
        if (unackedEvents > 0) {
            LibIbverbs.ackCqEvents(handle, unackedEvents);
            unackedEvents = 0;
        }
        ((Context) owner).asyncEvents.unregister(this);
    }

    @Override
    String describe() {
        return "CompletionQueue on " + device() + ", capacity " + capacity
                + (channel != null ? ", with a completion channel" : "")
                + (confinedTo != null ? ", confined to thread \"" + confinedTo.getName() + "\"" : "");
    }
}
