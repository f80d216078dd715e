package org.verbs4j.natives;

/**
 * Hand-placed offsets of {@code struct ibv_wc} (48 bytes; libibverbs 44, x86_64), the
 * completion entry {@code poll_cq} writes. Checked against gcc by the layout conformance test.
 *
 * <pre>
 *   +0  u64 wr_id      +8  status     +12 opcode     +16 u32 vendor_err  +20 u32 byte_len
 *   +24 imm_data (be32) | invalidated_rkey            +28 u32 qp_num      +32 u32 src_qp
 *   +36 u32 wc_flags   +40 u16 pkey_index +42 u16 slid +44 u8 sl  +45 u8 dlid_path_bits
 * </pre>
 */
public final class CompletionLayout {
    private CompletionLayout() {}

    public static final long WC_SIZE = 48;
    public static final long WR_ID = 0;
    public static final long STATUS = 8;
    public static final long OPCODE = 12;
    public static final long VENDOR_ERR = 16;
    public static final long BYTE_LEN = 20;
    public static final long IMM_DATA = 24;
    public static final long QP_NUM = 28;
    public static final long SRC_QP = 32;
    public static final long WC_FLAGS = 36;
    public static final long PKEY_INDEX = 40;
    public static final long SLID = 42;
    public static final long SL = 44;
    public static final long DLID_PATH_BITS = 45;
}
