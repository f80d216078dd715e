package org.verbs4j;

/** {@code enum ibv_wc_opcode}: what a completion completed. */
public final class CompletionOpcode {
    /** {@code IBV_WC_SEND}. */
    public static final int SEND = 0;
    /** {@code IBV_WC_RDMA_WRITE}. */
    public static final int RDMA_WRITE = 1;
    /** {@code IBV_WC_RDMA_READ}. */
    public static final int RDMA_READ = 2;
    /** {@code IBV_WC_COMP_SWAP}. */
    public static final int COMP_SWAP = 3;
    /** {@code IBV_WC_FETCH_ADD}. */
    public static final int FETCH_ADD = 4;
    /** {@code IBV_WC_BIND_MW}. */
    public static final int BIND_MW = 5;
    /** {@code IBV_WC_LOCAL_INV}. */
    public static final int LOCAL_INV = 6;
    /** {@code IBV_WC_TSO}. */
    public static final int TSO = 7;
    /** {@code IBV_WC_ATOMIC_WRITE}: an ATOMIC_WRITE ({@link SendWorkRequests#atomicWrite}). */
    public static final int ATOMIC_WRITE = 9;
    /** {@code IBV_WC_RECV}: a receive (of a SEND). */
    public static final int RECV = 128;
    /** {@code IBV_WC_RECV_RDMA_WITH_IMM}: a receive consumed by an RDMA WRITE with immediate. */
    public static final int RECV_RDMA_WITH_IMM = 129;

    private CompletionOpcode() {}
}
