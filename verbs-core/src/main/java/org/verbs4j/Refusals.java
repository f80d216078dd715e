package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * The exceptions of refused data-path calls, built off the hot path: the queue pair, completion
 * queue and shared receive queue test their conditions inline and hand the reasons, the counts
 * and the hints over to these methods only when a call is refused. Stateless; any thread.
 */
final class Refusals {
    private Refusals() {}

    /** A post of a closed chain to {@code r}: closed is reported for {@code r} first. */
    static VerbsException unusable(NativeResource r, String verb, WorkRequestChain wrs) {
        if (!r.isOpenPlain()) {
            return r.closedException(verb);
        }
        return VerbsException.create(
                verb, Errno.EBADF, "the " + wrs.getClass().getSimpleName() + " is closed", "create a new one");
    }

    /** The provider refused a chain of {@code n} with {@code rc}; {@code index} is its first request not posted, or -1. */
    static VerbsException postFailed(String verb, int rc, int index, int n) {
        return VerbsException.of(
                verb,
                rc,
                index >= 0
                        ? "work request #" + index + " of " + n
                                + " was not posted (nor those after it; those before it were)"
                        : "the chain of " + n + " was not posted");
    }

    /** {@code ibv_wr_complete} refused the chain of {@code n} (it posts all of it or nothing). */
    static VerbsException extendedPostFailed(int rc, int n) {
        return VerbsException.create(
                "ibv_wr_complete",
                rc,
                "the provider refused the chain of " + n + " requests; none of them was posted",
                rc == Errno.ENOMEM
                        ? "the send queue is full: poll completions, then post again"
                        : "check each request against what the queue pair was created with (operations, SGEs, inline size)");
    }

    /**
     * An extended post of a chain with a request whose operation the queue pair was not created for
     * ({@code opcodes}: a bit for each one it was), or with inline data the provider has no setter for.
     */
    static VerbsException notCreatedFor(QueuePair qp, SendWorkRequests wrs, int opcodes) {
        for (int i = 0; i < wrs.count; i++) {
            int op = wrs.opcodeAt(i);
            if ((opcodes & 1 << op) == 0) {
                SendOperation missing = null;
                for (SendOperation o : SendOperation.values()) {
                    if (o.opcode() == op) {
                        missing = o;
                    }
                }
                return new InvalidRequestException(
                        "ibv_wr_start",
                        "request #" + i + " is a " + (missing == null ? "request of opcode " + op : missing.name())
                                + ", which " + qp.describe() + " was not created for (its ibv_wr_* builder is NULL)",
                        "create the queue pair with SendOperation." + (missing == null ? "..." : missing.name())
                                + " in createExtendedQueuePair's operations");
            }
        }
        return new InvalidRequestException(
                "ibv_wr_set_inline_data",
                "the chain carries inline data, but the provider's ibv_qp_ex has no inline setters",
                "send the data from a registered region instead");
    }

    /**
     * A chain with an ATOMIC_WRITE that would go through {@code ibv_post_send}: posted with
     * {@link QueuePair#postSend}, or by {@link QueuePair#postSendExtended} on rxe before rdma-core
     * 64 together with a request of SGEs of unequal lengths (which that post sends classically).
     */
    static VerbsException extendedOnly(QueuePair qp, SendWorkRequests wrs, boolean unequalSges) {
        int i = 0;
        while (i < wrs.count && (SendWorkRequests.EXTENDED_ONLY_OPCODES & 1 << wrs.opcodeAt(i)) == 0) {
            i++;
        }
        return unequalSges
                ? new InvalidRequestException(
                        "ibv_wr_atomic_write",
                        "request #" + i + " is an ATOMIC_WRITE in a chain that " + qp.describe()
                                + " must post with ibv_post_send (it also holds SGEs of unequal lengths, which"
                                + " this provider's wr_set_sge_list miscounts); nothing was posted",
                        "post the ATOMIC_WRITE in a chain of its own")
                : new InvalidRequestException(
                        "ibv_post_send",
                        "request #" + i + " is an ATOMIC_WRITE, which only the extended API posts; nothing was posted",
                        "create the queue pair with createExtendedQueuePair(init, EnumSet.of(SendOperation"
                                + ".ATOMIC_WRITE, ...)) and post with postSendExtended");
    }

    /** A post on an XRC_SEND queue pair of a request that names no remote SRQ. */
    static VerbsException noSrqNumber(QueuePair qp, SendWorkRequests wrs) {
        return new InvalidRequestException(
                "ibv_post_send",
                "request #" + wrs.firstWithoutSrqNumber() + " on " + qp.describe()
                        + " names no remote XRC SRQ; nothing was posted",
                "call remoteSrqNumber(n) on each request, with the srqNumber() of the peer's XRC SRQ");
    }

    /**
     * Why a send chain of {@code n} is refused by a queue pair's checks (the first that applies),
     * or a queue-full refusal when none does any more (a poller freed room meanwhile).
     */
    static VerbsException sendRefused(QueuePair qp, SendWorkRequests wrs, int n) {
        QueuePairState s = qp.state();
        if (s.ordinal() < QueuePairState.RTS.ordinal() || s == QueuePairState.UNKNOWN) {
            return VerbsException.create(
                    "ibv_post_send",
                    Errno.EINVAL,
                    "the queue pair is in " + s + "; sends need RTS",
                    "connect it first (RESET->INIT->RTR->RTS)");
        }
        if (n > qp.maxSendWr()) {
            return new QueueFullException(
                    "ibv_post_send",
                    "a chain of " + n + " exceeds the send queue of " + qp.maxSendWr(),
                    "post shorter chains, or create the QP with a larger maxSendWr");
        }
        if (qp.account.failedStatus() != 0) {
            return failed("ibv_post_send", qp.account);
        }
        if (qp.sendOutstanding() + n > qp.maxSendWr()) {
            return new QueueFullException(
                    "ibv_post_send",
                    "the send queue of " + qp.maxSendWr() + " holds " + qp.sendOutstanding() + " outstanding requests; "
                            + n + " more would overrun it",
                    "poll the send completion queue first, and signal at least every maxSendWr-th send so "
                            + "that its completion frees the slots of the unsignaled ones before it");
        }
        if (wrs.maxSges > qp.maxSendSge()) {
            int i = firstSend(wrs, n, j -> wrs.numSgeAt(j) > qp.maxSendSge());
            return VerbsException.create(
                    "ibv_post_send",
                    Errno.EINVAL,
                    "request #" + i + " has " + wrs.numSgeAt(i) + " SGEs; the queue pair takes " + qp.maxSendSge(),
                    "create the QP with a larger maxSendSge");
        }
        if (wrs.maxInline > qp.maxInlineData()) {
            int i = firstSend(
                    wrs,
                    n,
                    j -> (wrs.flagsAt(j) & SendWorkRequests.FLAG_INLINE) != 0 && wrs.payloadAt(j) > qp.maxInlineData());
            return VerbsException.create(
                    "ibv_post_send",
                    Errno.EINVAL,
                    "request #" + i + " has " + wrs.payloadAt(i) + " inline bytes; the queue pair takes "
                            + qp.maxInlineData(),
                    "create the QP with a larger maxInlineData");
        }
        if (qp.type() == QueuePairType.UD) {
            if (wrs.hasNonSendOps()) {
                int i = firstSend(
                        wrs,
                        n,
                        j -> wrs.opcodeAt(j) != SendWorkRequests.OP_SEND
                                && wrs.opcodeAt(j) != SendWorkRequests.OP_SEND_WITH_IMM);
                return VerbsException.create(
                        "ibv_post_send", Errno.EINVAL, "request #" + i + ": a UD queue pair only sends", null);
            }
            if (wrs.withDestination != n) {
                int i = firstSend(wrs, n, j -> wrs.udAhAt(j) == 0);
                return VerbsException.create(
                        "ibv_post_send",
                        Errno.EINVAL,
                        "request #" + i + " has no destination",
                        "call destination(ah, qpn, qkey) on each UD request");
            }
        } else if (qp.type() == QueuePairType.UC && wrs.hasReadOrAtomicOps()) {
            int i = firstSend(wrs, n, j -> (SendWorkRequests.READ_OR_ATOMIC_OPCODES & 1 << wrs.opcodeAt(j)) != 0);
            return VerbsException.create(
                    "ibv_post_send",
                    Errno.EINVAL,
                    "request #" + i + ": UC has no RDMA READ or atomics",
                    "use an RC queue pair");
        }
        // the queue had no room when checked, and a poller on another thread freed some meanwhile
        return new QueueFullException(
                "ibv_post_send",
                "the send queue of " + qp.maxSendWr() + " was full when checked",
                "poll the send completion queue, then post again");
    }

    private static int firstSend(SendWorkRequests wrs, int n, java.util.function.IntPredicate bad) {
        for (int i = 0; i < n; i++) {
            if (bad.test(i)) {
                return i;
            }
        }
        return -1;
    }

    /** A post to a queue pair that a completion put in error. */
    static VerbsException failed(String verb, QueueAccount account) {
        return new InvalidRequestException(
                verb,
                "the queue pair is in error: a completion ended with " + CompletionStatus.text(account.failedStatus())
                        + " (status " + account.failedStatus() + "); outstanding work is flushed",
                "poll the remaining (flushed) completions, then reset() and reconnect the queue pair, or create a new one");
    }

    /**
     * Why a receive chain of {@code n} is refused by a queue pair's checks (the first that
     * applies), or a queue-full refusal when none does any more (a poller freed room meanwhile).
     */
    static VerbsException recvRefused(QueuePair qp, SharedReceiveQueue srq, ReceiveWorkRequests wrs, int n) {
        if (srq != null) {
            return VerbsException.create(
                    "ibv_post_recv",
                    Errno.EINVAL,
                    "the queue pair receives through a shared receive queue",
                    "post receives to the SharedReceiveQueue");
        }
        if (qp.state() == QueuePairState.RESET) {
            return VerbsException.create(
                    "ibv_post_recv", Errno.EINVAL, "the queue pair is in RESET", "move it to INIT first");
        }
        if (n > qp.maxRecvWr()) {
            return new QueueFullException(
                    "ibv_post_recv",
                    "a chain of " + n + " exceeds the receive queue of " + qp.maxRecvWr(),
                    "post shorter chains, or create the QP with a larger maxRecvWr");
        }
        if (qp.account.failedStatus() != 0) {
            return failed("ibv_post_recv", qp.account);
        }
        if (qp.recvOutstanding() + n > qp.maxRecvWr()) {
            return new QueueFullException(
                    "ibv_post_recv",
                    "the receive queue of " + qp.maxRecvWr() + " holds " + qp.recvOutstanding() + " posted receives; "
                            + n + " more would overrun it",
                    "poll receive completions first, or create the QP with a larger maxRecvWr");
        }
        if (wrs.maxSges > qp.maxRecvSge()) {
            for (int i = 0; i < n; i++) {
                if (wrs.numSgeAt(i) > qp.maxRecvSge()) {
                    return VerbsException.create(
                            "ibv_post_recv",
                            Errno.EINVAL,
                            "request #" + i + " has " + wrs.numSgeAt(i) + " SGEs; the queue pair takes "
                                    + qp.maxRecvSge(),
                            "create the QP with a larger maxRecvSge");
                }
            }
        }
        return new QueueFullException(
                "ibv_post_recv",
                "the receive queue of " + qp.maxRecvWr() + " was full when checked",
                "poll receive completions, then post again");
    }

    /** A poll of a completion queue confined to {@code owner} from another thread, or after its close. */
    static VerbsException confinedRefusal(CompletionQueue cq, String verb, Thread owner) {
        if (cq.pollGate.isClosed()) {
            return cq.closedException(verb);
        }
        return new ResourceBusyException(
                verb,
                "this completion queue is confined to thread \"" + owner.getName() + "\" and was used from thread \""
                        + Thread.currentThread().getName() + "\"",
                "poll, arm and close a confined completion queue on the thread that created it; create it with "
                        + "Context.createCompletionQueue to poll it from any thread (one at a time)");
    }

    /** The close of a confined completion queue from another thread while its owner runs. */
    static VerbsException confinedCloseRefusal(Thread owner) {
        return new ResourceBusyException(
                "ibv_destroy_cq",
                "this completion queue is confined to thread \""
                        + owner.getName() + "\", which is still running, and was closed from thread \""
                        + Thread.currentThread().getName() + "\"",
                "close a confined completion queue on its own thread, "
                        + "or from another thread after it has ended (join it first)");
    }

    /** {@code n} more requests could overrun a completion queue of {@code capacity} with {@code outstanding}. */
    static QueueFullException completionQueueFull(String verb, int capacity, long outstanding, int n) {
        return new QueueFullException(
                verb,
                "the completion queue of " + capacity + " entries already has "
                        + outstanding + " completions outstanding on its queues; " + n
                        + " more could overrun it and lose "
                        + "completions",
                "poll the completion queue first, or create it larger (at least the sum of the "
                        + "depths of the queues that complete into it)");
    }

    /** {@code poll_cq} returned the negative {@code n}. */
    static VerbsException pollFailed(int n) {
        return VerbsException.of(
                "ibv_poll_cq", n == -1 ? Errno.EIO : -n, "the provider reported an error polling the CQ");
    }

    /** A post to a shared receive queue of a request with more SGEs than it takes. */
    static VerbsException srqSges(ReceiveWorkRequests wrs, int n, int maxSge) {
        for (int i = 0; i < n; i++) {
            if (wrs.numSgeAt(i) > maxSge) {
                return new InvalidRequestException(
                        "ibv_post_srq_recv",
                        "request #" + i + " has " + wrs.numSgeAt(i) + " SGEs; the SRQ takes " + maxSge,
                        null);
            }
        }
        return null;
    }

    /** A post of {@code n} to a shared receive queue of {@code maxWr} holding {@code outstanding}. */
    static QueueFullException srqFull(int maxWr, long outstanding, int n) {
        return new QueueFullException(
                "ibv_post_srq_recv",
                "the shared receive queue of " + maxWr + " holds " + outstanding + " posted receives; " + n
                        + " more would overrun it",
                "poll receive completions first, or create a larger SRQ");
    }
}
