package org.verbs4j.natives;

/**
 * Hand-placed offsets of the work request descriptors written on the data path
 * (libibverbs 44, x86_64 / LP64). Checked against gcc's {@code offsetof} and against the
 * jextract-generated layouts by the layout conformance test.
 *
 * <pre>
 * struct ibv_send_wr (128 bytes)
 *   +0  u64 wr_id     +8  next*     +16 sg_list*   +24 int num_sge
 *   +28 opcode        +32 send_flags +36 imm_data (be32) | invalidate_rkey
 *   +40 union wr {
 *         rdma   { +40 u64 remote_addr, +48 u32 rkey }
 *         atomic { +40 u64 remote_addr, +48 u64 compare_add, +56 u64 swap, +64 u32 rkey }
 *         ud     { +40 ibv_ah*, +48 u32 remote_qpn, +52 u32 remote_qkey } }
 *   +72 union qp_type { xrc { u32 remote_srqn } }
 *   +80 union { bind_mw {...}, tso {...} } (48 bytes)
 *
 * struct ibv_recv_wr (32 bytes): +0 wr_id  +8 next*  +16 sg_list*  +24 int num_sge
 * struct ibv_sge     (16 bytes): +0 u64 addr  +8 u32 length  +12 u32 lkey
 * </pre>
 */
public final class WorkRequestLayout {
    private WorkRequestLayout() {}

    public static final long SEND_WR_SIZE = 128;
    public static final long SEND_WR_ID = 0;
    public static final long SEND_NEXT = 8;
    public static final long SEND_SG_LIST = 16;
    public static final long SEND_NUM_SGE = 24;
    public static final long SEND_OPCODE = 28;
    public static final long SEND_FLAGS = 32;
    public static final long SEND_IMM_DATA = 36;
    public static final long SEND_RDMA_REMOTE_ADDR = 40;
    public static final long SEND_RDMA_RKEY = 48;
    public static final long SEND_ATOMIC_REMOTE_ADDR = 40;
    public static final long SEND_ATOMIC_COMPARE_ADD = 48;
    public static final long SEND_ATOMIC_SWAP = 56;
    public static final long SEND_ATOMIC_RKEY = 64;
    public static final long SEND_UD_AH = 40;
    public static final long SEND_UD_REMOTE_QPN = 48;
    public static final long SEND_UD_REMOTE_QKEY = 52;
    public static final long SEND_XRC_REMOTE_SRQN = 72;

    public static final long RECV_WR_SIZE = 32;
    public static final long RECV_WR_ID = 0;
    public static final long RECV_NEXT = 8;
    public static final long RECV_SG_LIST = 16;
    public static final long RECV_NUM_SGE = 24;

    public static final long SGE_SIZE = 16;
    public static final long SGE_ADDR = 0;
    public static final long SGE_LENGTH = 8;
    public static final long SGE_LKEY = 12;
}
