package org.verbs4j;

import java.util.Objects;

/**
 * What a queue pair is created with ({@code struct ibv_qp_init_attr}); a mutable builder, used
 * by one thread. Defaults: 128 send and 128 receive work requests, one SGE each, no inline data,
 * only explicitly signaled sends complete.
 */
public final class QueuePairInit {
    final QueuePairType type;
    final CompletionQueue sendCq;
    final CompletionQueue recvCq;
    SharedReceiveQueue srq;
    int maxSendWr = 128;
    int maxRecvWr = 128;
    int maxSendSge = 1;
    int maxRecvSge = 1;
    int maxInlineData = 0;
    boolean signalAll = false;

    private QueuePairInit(QueuePairType type, CompletionQueue sendCq, CompletionQueue recvCq) {
        this.type = Objects.requireNonNull(type, "type");
        this.sendCq = Objects.requireNonNull(sendCq, "sendCq");
        this.recvCq = Objects.requireNonNull(recvCq, "recvCq");
    }

    /** A queue pair of {@code type} whose sends and receives complete on {@code cq}. */
    public static QueuePairInit of(QueuePairType type, CompletionQueue cq) {
        return new QueuePairInit(type, cq, cq);
    }

    /** A queue pair of {@code type} with separate send and receive completion queues. */
    public static QueuePairInit of(QueuePairType type, CompletionQueue sendCq, CompletionQueue recvCq) {
        return new QueuePairInit(type, sendCq, recvCq);
    }

    /** Receives come from this shared receive queue (the QP then has no receive queue of its own). */
    public QueuePairInit sharedReceiveQueue(SharedReceiveQueue srq) {
        this.srq = srq;
        return this;
    }

    /** The send queue depth to ask for. */
    public QueuePairInit maxSendWr(int n) {
        this.maxSendWr = n;
        return this;
    }

    /** The receive queue depth to ask for. */
    public QueuePairInit maxRecvWr(int n) {
        this.maxRecvWr = n;
        return this;
    }

    /** The SGEs per send request to ask for. */
    public QueuePairInit maxSendSge(int n) {
        this.maxSendSge = n;
        return this;
    }

    /** The SGEs per receive request to ask for. */
    public QueuePairInit maxRecvSge(int n) {
        this.maxRecvSge = n;
        return this;
    }

    /** Bytes that may be posted inline (copied into the WQE at post time, no lkey needed). */
    public QueuePairInit maxInlineData(int n) {
        this.maxInlineData = n;
        return this;
    }

    /** Every send work request completes ({@code sq_sig_all}); otherwise only those marked signaled. */
    public QueuePairInit signalAll(boolean all) {
        this.signalAll = all;
        return this;
    }
}
