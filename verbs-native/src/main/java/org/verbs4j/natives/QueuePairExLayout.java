package org.verbs4j.natives;

/**
 * Hand-placed offsets of the extended queue pair ({@code struct ibv_qp_ex}, 352 bytes, which
 * begins with the {@code struct ibv_qp}), its creation attributes
 * ({@code struct ibv_qp_init_attr_ex}, whose first 64 bytes are those of
 * {@code struct ibv_qp_init_attr}), the memory window ({@code struct ibv_mw}) and the bind
 * descriptor of {@code struct ibv_send_wr} (libibverbs 44, x86_64 / LP64), with the
 * {@code IBV_QP_EX_WITH_*} send-ops flags. Checked against gcc's {@code offsetof} by the layout
 * conformance test.
 *
 * <pre>
 * struct ibv_qp_ex
 *   +168 u64 wr_id   +176 unsigned int wr_flags
 *   +184 wr_atomic_cmp_swp ... +240 wr_send ... +304 wr_set_sge +312 wr_set_sge_list
 *   +320 wr_start    +328 wr_complete    +336 wr_abort    +344 wr_atomic_write (rdma-core 44)
 * struct ibv_send_wr +80 bind_mw { +80 ibv_mw *mw, +88 u32 rkey, +96 struct ibv_mw_bind_info
 *   { +96 ibv_mr *mr, +104 u64 addr, +112 u64 length, +120 unsigned int mw_access_flags } }
 * </pre>
 */
public final class QueuePairExLayout {
    private QueuePairExLayout() {}

    public static final long QP_EX_SIZE = 352;
    public static final long WR_ID = 168;
    public static final long WR_FLAGS = 176;
    public static final long WR_ATOMIC_CMP_SWP = 184;
    public static final long WR_ATOMIC_FETCH_ADD = 192;
    public static final long WR_BIND_MW = 200;
    public static final long WR_LOCAL_INV = 208;
    public static final long WR_RDMA_READ = 216;
    public static final long WR_RDMA_WRITE = 224;
    public static final long WR_RDMA_WRITE_IMM = 232;
    public static final long WR_SEND = 240;
    public static final long WR_SEND_IMM = 248;
    public static final long WR_SEND_INV = 256;
    public static final long WR_SET_UD_ADDR = 272;
    public static final long WR_SET_XRC_SRQN = 280;
    public static final long WR_SET_INLINE_DATA = 288;
    public static final long WR_SET_INLINE_DATA_LIST = 296;
    public static final long WR_SET_SGE = 304;
    public static final long WR_SET_SGE_LIST = 312;
    public static final long WR_START = 320;
    public static final long WR_COMPLETE = 328;
    public static final long WR_ABORT = 336;
    /**
     * Last in the struct since rdma-core 44: read only from a queue pair created with
     * {@link #WITH_ATOMIC_WRITE} (a provider that took the flag has the member).
     */
    public static final long WR_ATOMIC_WRITE = 344;

    /** {@code sizeof(struct ibv_qp_init_attr_ex)}. */
    public static final long INIT_EX_SIZE = 136;

    public static final long INIT_COMP_MASK = 60;
    public static final long INIT_PD = 64;
    public static final long INIT_SEND_OPS_FLAGS = 128;
    /** {@code IBV_QP_INIT_ATTR_PD}. */
    public static final int INIT_ATTR_PD = 1;
    /** {@code IBV_QP_INIT_ATTR_SEND_OPS_FLAGS}. */
    public static final int INIT_ATTR_SEND_OPS_FLAGS = 1 << 6;

    /** {@code sizeof(struct ibv_mw)}. */
    public static final long MW_SIZE = 32;

    public static final long MW_RKEY = 16;
    public static final long MW_TYPE = 24;

    public static final long SEND_BIND_MW = 80;
    public static final long SEND_BIND_RKEY = 88;
    public static final long SEND_BIND_INFO = 96;
    public static final long SEND_BIND_MR = 96;
    public static final long SEND_BIND_ADDR = 104;
    public static final long SEND_BIND_LENGTH = 112;
    public static final long SEND_BIND_ACCESS = 120;
    /** {@code offsetof(struct ibv_send_wr, invalidate_rkey)} (shares imm_data's place). */
    public static final long SEND_INVALIDATE_RKEY = 36;

    /** {@code sizeof(struct ibv_data_buf)}. */
    public static final long DATA_BUF_SIZE = 16;

    public static final int WITH_RDMA_WRITE = 1;
    public static final int WITH_RDMA_WRITE_WITH_IMM = 1 << 1;
    public static final int WITH_SEND = 1 << 2;
    public static final int WITH_SEND_WITH_IMM = 1 << 3;
    public static final int WITH_RDMA_READ = 1 << 4;
    public static final int WITH_ATOMIC_CMP_AND_SWP = 1 << 5;
    public static final int WITH_ATOMIC_FETCH_AND_ADD = 1 << 6;
    public static final int WITH_LOCAL_INV = 1 << 7;
    public static final int WITH_BIND_MW = 1 << 8;
    public static final int WITH_SEND_WITH_INV = 1 << 9;
    public static final int WITH_ATOMIC_WRITE = 1 << 12;

    /** {@code IBV_MW_TYPE_1}, {@code IBV_MW_TYPE_2}. */
    public static final int MW_TYPE_1 = 1, MW_TYPE_2 = 2;
}
