package org.verbs4j;

/** {@code enum ibv_wc_opcode}: what a completion completed. */
public final class CompletionOpcode {
    public static final int SEND = 0, RDMA_WRITE = 1, RDMA_READ = 2, COMP_SWAP = 3, FETCH_ADD = 4, BIND_MW = 5,
            LOCAL_INV = 6, TSO = 7, RECV = 128, RECV_RDMA_WITH_IMM = 129;

    private CompletionOpcode() {
    }
}
