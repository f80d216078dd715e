package org.verbs4j;

import java.util.Set;

/**
 * The send operations an extended queue pair is created for ({@code enum
 * ibv_qp_create_send_ops_flags}, {@code IBV_QP_EX_WITH_*}): the provider sets up the
 * {@code ibv_wr_*} builder of each one asked for, and only those may be posted through
 * {@link QueuePair#postSendExtended}.
 */
public enum SendOperation {
    /** {@code IBV_QP_EX_WITH_RDMA_WRITE}: {@code ibv_wr_rdma_write}. */
    RDMA_WRITE(1, SendWorkRequests.OP_RDMA_WRITE),
    /** {@code IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM}: {@code ibv_wr_rdma_write_imm}. */
    RDMA_WRITE_WITH_IMM(1 << 1, SendWorkRequests.OP_RDMA_WRITE_WITH_IMM),
    /** {@code IBV_QP_EX_WITH_SEND}: {@code ibv_wr_send}. */
    SEND(1 << 2, SendWorkRequests.OP_SEND),
    /** {@code IBV_QP_EX_WITH_SEND_WITH_IMM}: {@code ibv_wr_send_imm}. */
    SEND_WITH_IMM(1 << 3, SendWorkRequests.OP_SEND_WITH_IMM),
    /** {@code IBV_QP_EX_WITH_RDMA_READ}: {@code ibv_wr_rdma_read}. */
    RDMA_READ(1 << 4, SendWorkRequests.OP_RDMA_READ),
    /** {@code IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP}: {@code ibv_wr_atomic_cmp_swp}. */
    ATOMIC_CMP_AND_SWP(1 << 5, SendWorkRequests.OP_ATOMIC_CMP_AND_SWP),
    /** {@code IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD}: {@code ibv_wr_atomic_fetch_add}. */
    ATOMIC_FETCH_AND_ADD(1 << 6, SendWorkRequests.OP_ATOMIC_FETCH_AND_ADD),
    /** {@code IBV_QP_EX_WITH_LOCAL_INV}: {@code ibv_wr_local_inv}. */
    LOCAL_INV(1 << 7, SendWorkRequests.OP_LOCAL_INV),
    /** {@code IBV_QP_EX_WITH_BIND_MW}: {@code ibv_wr_bind_mw} (type 2 memory windows). */
    BIND_MW(1 << 8, SendWorkRequests.OP_BIND_MW),
    /** {@code IBV_QP_EX_WITH_SEND_WITH_INV}: {@code ibv_wr_send_inv}. */
    SEND_WITH_INV(1 << 9, SendWorkRequests.OP_SEND_WITH_INV),
    /**
     * {@code IBV_QP_EX_WITH_ATOMIC_WRITE}: {@code ibv_wr_atomic_write} (rdma-core 44); refused at
     * creation on a device whose {@code device_cap_flags_ex} lacks
     * {@code IB_UVERBS_DEVICE_ATOMIC_WRITE} (rxe before Linux 6.2).
     */
    ATOMIC_WRITE(1 << 12, SendWorkRequests.OP_ATOMIC_WRITE);

    private final int flag;
    private final int opcode;

    SendOperation(int flag, int opcode) {
        this.flag = flag;
        this.opcode = opcode;
    }

    /** The {@code IBV_QP_EX_WITH_*} flag. */
    public int bit() {
        return flag;
    }

    /** The {@code IBV_WR_*} opcode of {@link SendWorkRequests} it posts. */
    int opcode() {
        return opcode;
    }

    /** The C flag mask of a set of operations. */
    public static long mask(Set<SendOperation> ops) {
        long m = 0;
        for (SendOperation o : ops) {
            m |= o.flag;
        }
        return m;
    }
}
