package org.verbs4j;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Checked mode's count of the outstanding work of one queue pair: what its send and receive
 * queues hold, so that a post that would overrun them (or the completion queues their completions
 * go to) is refused instead of losing completions. The posting threads write the posted counts,
 * the polling thread the completed ones (single writer each, published with release stores): no
 * lock and no atomic read-modify-write.
 *
 * <p>A send's slot comes back when its completion or that of a later signaled send of the same QP
 * is polled (completions come in order), which is what the ring of signaled sequence numbers
 * tracks. An error completion stands for exactly one request and puts the QP in ERR; from then on
 * checked mode refuses posts until {@link QueuePair#reset()}.
 *
 * <p>Held by the queue pair and by the tables of its completion queues, never the other way round,
 * so that a queue pair dropped without close can still be collected and released.
 */
final class QueueAccount {
    private static final VarHandle SEND_COMPLETED, RECV_COMPLETED, RING_HEAD, RECV_POSTED, SEND_POSTED;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            SEND_COMPLETED = l.findVarHandle(QueueAccount.class, "sendCompleted", long.class);
            RECV_COMPLETED = l.findVarHandle(QueueAccount.class, "recvCompleted", long.class);
            RING_HEAD = l.findVarHandle(QueueAccount.class, "ringHead", long.class);
            RECV_POSTED = l.findVarHandle(QueueAccount.class, "recvPosted", long.class);
            SEND_POSTED = l.findVarHandle(QueueAccount.class, "sendPosted", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final int qpNumber;
    final CompletionQueue sendCq, recvCq;
    final SharedReceiveQueue srq;
    final int maxSendWr, maxRecvWr;
    private final boolean signalAll;
    private final long[] signaledRing; // sequence number of each outstanding signaled send, in order
    private final int ringMask;
    // poster-owned
    @SuppressWarnings("unused")
    private long sendPosted, recvPosted, ringHead;
    // poller-owned
    @SuppressWarnings("unused")
    private long sendCompleted, recvCompleted;
    private long ringTail;
    private volatile int failedStatus;

    QueueAccount(
            int qpNumber,
            CompletionQueue sendCq,
            CompletionQueue recvCq,
            SharedReceiveQueue srq,
            int maxSendWr,
            int maxRecvWr,
            boolean signalAll) {
        this.qpNumber = qpNumber;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.srq = srq;
        this.maxSendWr = maxSendWr;
        this.maxRecvWr = maxRecvWr;
        this.signalAll = signalAll;
        this.signaledRing = new long[Integer.highestOneBit(Math.max(1, maxSendWr) * 2 - 1)];
        this.ringMask = signaledRing.length - 1;
    }

    void attach() {
        sendCq.attach(this);
        if (recvCq != sendCq) {
            recvCq.attach(this);
        }
    }

    void detach() {
        sendCq.detach(this);
        if (recvCq != sendCq) {
            recvCq.detach(this);
        }
    }

    int failedStatus() {
        return failedStatus;
    }

    long sendOutstanding() {
        return (long) SEND_POSTED.getAcquire(this) - (long) SEND_COMPLETED.getAcquire(this);
    }

    long recvOutstanding() {
        return (long) RECV_POSTED.getAcquire(this) - (long) RECV_COMPLETED.getAcquire(this);
    }

    /** The first {@code n} requests of {@code wrs} are being handed to the provider (posting thread). */
    void posted(SendWorkRequests wrs, int n) {
        long first = (long) SEND_POSTED.get(this) + 1; // the sequence number of request #0
        long head = (long) RING_HEAD.get(this);
        if (signalAll) {
            for (int i = 0; i < n; i++) {
                signaledRing[(int) head++ & ringMask] = first + i;
            }
        } else {
            // the chain's own list of its signaled requests (in order): no pass over the n requests
            int[] at = wrs.signaledIndexes;
            for (int k = 0, m = wrs.signaledCount; k < m && at[k] < n; k++) {
                signaledRing[(int) head++ & ringMask] = first + at[k];
            }
        }
        RING_HEAD.setRelease(this, head);
        SEND_POSTED.setRelease(this, first - 1 + n);
    }

    /** Requests {@code [from, n)} of {@code wrs}, counted by {@link #posted}, were not posted after all. */
    void notPosted(SendWorkRequests wrs, int from, int n) {
        long head = (long) RING_HEAD.get(this);
        if (signalAll) {
            head -= n - from;
        } else {
            int[] at = wrs.signaledIndexes; // as posted() counted them
            for (int k = 0, m = wrs.signaledCount; k < m && at[k] < n; k++) {
                if (at[k] >= from) {
                    head--;
                }
            }
        }
        RING_HEAD.setRelease(this, head);
        SEND_POSTED.setRelease(this, (long) SEND_POSTED.get(this) - (n - from));
    }

    /**
     * {@code n} receives are being handed to the provider (posting thread), before the call: a
     * negative {@code n} takes back those the provider refused.
     */
    void recvPosted(int n) {
        RECV_POSTED.setRelease(this, (long) RECV_POSTED.get(this) + n);
    }

    /** A completion of this QP was polled (polling thread); {@code recv} tells the side. */
    void completed(int status, boolean recv) {
        if (status != WorkCompletions.SUCCESS && failedStatus == 0) {
            failedStatus = status;
        }
        if (recv) {
            if (srq == null) {
                RECV_COMPLETED.setRelease(this, (long) RECV_COMPLETED.get(this) + 1);
            }
            return;
        }
        long head = (long) RING_HEAD.getAcquire(this);
        if (status == WorkCompletions.SUCCESS) {
            if (ringTail < head) {
                SEND_COMPLETED.setRelease(this, signaledRing[(int) ringTail++ & ringMask]);
            }
            return;
        }
        // an error completion stands for exactly one request (signaled or not)
        long done = Math.min((long) SEND_COMPLETED.get(this) + 1, (long) SEND_POSTED.getAcquire(this));
        while (ringTail < head && signaledRing[(int) ringTail & ringMask] <= done) {
            ringTail++;
        }
        SEND_COMPLETED.setRelease(this, done);
    }

    /**
     * {@code k} successful send completions of this QP were polled, in a row (polling thread): the
     * same as {@code k} calls of {@code completed(SUCCESS, false)}, with one release store. Every
     * one of them has its ring entry already (posted() publishes it before the provider sees the
     * request), so one read of the ring's head suffices.
     */
    void sendsCompleted(int k) {
        long head = (long) RING_HEAD.getAcquire(this);
        long tail = ringTail;
        long take = Math.min(k, head - tail);
        if (take > 0) {
            ringTail = tail + take;
            SEND_COMPLETED.setRelease(this, signaledRing[(int) (tail + take - 1) & ringMask]);
        }
    }

    /** After a reset to RESET: nothing is outstanding any more (no thread posts or polls). */
    void reset() {
        SEND_COMPLETED.setRelease(this, (long) SEND_POSTED.getAcquire(this));
        RECV_COMPLETED.setRelease(this, (long) RECV_POSTED.getAcquire(this));
        ringTail = (long) RING_HEAD.getAcquire(this);
        failedStatus = 0;
    }
}
