package org.verbs4j.natives;

/**
 * Hand-placed offsets of the extended completion queue ({@code struct ibv_cq_ex}, 288 bytes,
 * which begins with the members of {@code struct ibv_cq}), its creation attributes
 * ({@code struct ibv_cq_init_attr_ex}), {@code struct ibv_values_ex} and the
 * {@code struct ibv_device_attr_ex} members the timestamp conversion needs (libibverbs 44,
 * x86_64 / LP64), with the {@code IBV_WC_EX_WITH_*} flags. Checked against gcc's
 * {@code offsetof} by the layout conformance test.
 *
 * <pre>
 * struct ibv_cq_ex
 *   +132 enum ibv_wc_status status   +136 uint64_t wr_id      (set by start_poll / next_poll)
 *   +144 start_poll(cq, attr)  +152 next_poll(cq)  +160 end_poll(cq)
 *   +168 read_opcode ... +248 read_completion_ts ... +280 read_completion_wallclock_ns
 * </pre>
 */
public final class CompletionExLayout {
    private CompletionExLayout() {}

    public static final long CQ_EX_SIZE = 288;
    public static final long STATUS = 132;
    public static final long WR_ID = 136;
    public static final long START_POLL = 144;
    public static final long NEXT_POLL = 152;
    public static final long END_POLL = 160;
    public static final long READ_OPCODE = 168;
    public static final long READ_VENDOR_ERR = 176;
    public static final long READ_BYTE_LEN = 184;
    public static final long READ_IMM_DATA = 192;
    public static final long READ_QP_NUM = 200;
    public static final long READ_SRC_QP = 208;
    public static final long READ_WC_FLAGS = 216;
    public static final long READ_SLID = 224;
    public static final long READ_SL = 232;
    public static final long READ_DLID_PATH_BITS = 240;
    public static final long READ_COMPLETION_TS = 248;
    public static final long READ_CVLAN = 256;
    public static final long READ_FLOW_TAG = 264;
    public static final long READ_COMPLETION_WALLCLOCK_NS = 280;

    /** {@code sizeof(struct ibv_cq_init_attr_ex)}. */
    public static final long INIT_SIZE = 56;

    public static final long INIT_CQE = 0;
    public static final long INIT_CQ_CONTEXT = 8;
    public static final long INIT_CHANNEL = 16;
    public static final long INIT_COMP_VECTOR = 24;
    public static final long INIT_WC_FLAGS = 32;
    public static final long INIT_COMP_MASK = 40;
    public static final long INIT_FLAGS = 44;
    public static final long INIT_PARENT_DOMAIN = 48;
    /** {@code IBV_CQ_INIT_ATTR_MASK_PD}: {@code parent_domain} is set. */
    public static final int INIT_ATTR_MASK_PD = 2;

    /** {@code sizeof(struct ibv_poll_cq_attr)} (one {@code uint32_t comp_mask}). */
    public static final long POLL_ATTR_SIZE = 4;

    /** {@code sizeof(struct ibv_values_ex)}; {@code raw_clock} is a {@code struct timespec}. */
    public static final long VALUES_SIZE = 24;

    public static final long VALUES_COMP_MASK = 0;
    public static final long VALUES_RAW_CLOCK_SEC = 8;
    public static final long VALUES_RAW_CLOCK_NSEC = 16;
    /** {@code IBV_VALUES_MASK_RAW_CLOCK}. */
    public static final int VALUES_MASK_RAW_CLOCK = 1;

    /** {@code offsetof(struct verbs_context, query_rt_values)}. */
    public static final long VCTX_QUERY_RT_VALUES = 192;

    /** {@code sizeof(struct ibv_device_attr_ex)}. */
    public static final long DEVICE_ATTR_EX_SIZE = 400;

    public static final long DEVICE_ATTR_EX_COMPLETION_TIMESTAMP_MASK = 264;
    /** {@code hca_core_clock}, in kHz. */
    public static final long DEVICE_ATTR_EX_HCA_CORE_CLOCK = 272;

    public static final int WC_EX_WITH_BYTE_LEN = 1;
    public static final int WC_EX_WITH_IMM = 1 << 1;
    public static final int WC_EX_WITH_QP_NUM = 1 << 2;
    public static final int WC_EX_WITH_SRC_QP = 1 << 3;
    public static final int WC_EX_WITH_SLID = 1 << 4;
    public static final int WC_EX_WITH_SL = 1 << 5;
    public static final int WC_EX_WITH_DLID_PATH_BITS = 1 << 6;
    public static final int WC_EX_WITH_COMPLETION_TIMESTAMP = 1 << 7;
    public static final int WC_EX_WITH_CVLAN = 1 << 8;
    public static final int WC_EX_WITH_FLOW_TAG = 1 << 9;
    public static final int WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11;
    /** {@code IBV_CQ_INIT_ATTR_MASK_FLAGS}. */
    public static final int CQ_INIT_ATTR_MASK_FLAGS = 1;
}
