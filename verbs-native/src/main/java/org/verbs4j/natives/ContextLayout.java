package org.verbs4j.natives;

/**
 * Hand-placed offsets into {@code struct ibv_context} and the {@code struct verbs_context} that
 * ends with it (libibverbs 44, x86_64 / LP64), used to dispatch the {@code static inline} verbs
 * through the provider's function pointers. Checked field by field against gcc's
 * {@code offsetof} by the layout conformance test.
 *
 * <pre>
 * struct verbs_context (648 bytes)            ctx-relative
 *   +0   query_port(ctx, port, attr, size)     -320
 *   +8   advise_mr                             -312
 *   +200 create_cq_ex(ctx, attr)               -120
 *   +216 query_device_ex(ctx, in, attr, size)  -104
 *   +264 create_qp_ex                          -56
 *   +312 size_t sz                             -8
 *   +320 struct ibv_context context  ----------&gt; ctx
 *
 * struct ibv_context (328 bytes)
 *   +0   struct ibv_device *device
 *   +8   struct ibv_context_ops ops (32 pointers)
 *          +64 alloc_mw  +72 bind_mw  +80 dealloc_mw  +96 poll_cq  +104 req_notify_cq
 *          +168 post_srq_recv  +208 post_send  +216 post_recv          (ctx-relative)
 *   +264 int cmd_fd  +268 int async_fd  +272 int num_comp_vectors
 *   +280 pthread_mutex_t mutex
 *   +320 void *abi_compat   (== -1 when the context is a verbs_context)
 * </pre>
 */
public final class ContextLayout {
    private ContextLayout() {}

    public static final long SIZE = 328;
    public static final long DEVICE = 0;
    public static final long OPS = 8;
    public static final long OPS_ALLOC_MW = 64;
    public static final long OPS_BIND_MW = 72;
    public static final long OPS_DEALLOC_MW = 80;
    public static final long OPS_POLL_CQ = 96;
    public static final long OPS_REQ_NOTIFY_CQ = 104;
    public static final long OPS_POST_SRQ_RECV = 168;
    public static final long OPS_POST_SEND = 208;
    public static final long OPS_POST_RECV = 216;
    public static final long CMD_FD = 264;
    public static final long ASYNC_FD = 268;
    public static final long NUM_COMP_VECTORS = 272;
    public static final long ABI_COMPAT = 320;
    /** The value of {@code abi_compat} that marks an extended ({@code verbs_context}) context. */
    public static final long ABI_IS_EXTENDED = -1L;

    /** {@code sizeof(struct verbs_context)}. */
    public static final long VERBS_CONTEXT_SIZE = 648;
    /** {@code offsetof(struct verbs_context, context)}. */
    public static final long VERBS_CONTEXT_CONTEXT = 320;
    /** Offsets inside {@code struct verbs_context} (add {@code -VERBS_CONTEXT_CONTEXT} for ctx-relative). */
    public static final long VCTX_QUERY_PORT = 0;

    public static final long VCTX_ADVISE_MR = 8;
    public static final long VCTX_CREATE_CQ_EX = 200;
    public static final long VCTX_QUERY_DEVICE_EX = 216;
    public static final long VCTX_CREATE_QP_EX = 264;
    public static final long VCTX_SZ = 312;

    /**
     * {@code offsetof(struct verbs_device, ops)}: libibverbs allocates every {@code ibv_device} as
     * the first member of its {@code struct verbs_device} ({@code infiniband/driver.h}), followed by
     * the provider's {@code const struct verbs_device_ops *ops}, whose first member is the
     * provider's name ({@code "rxe"}, {@code "mlx5"}); {@code sizeof(struct ibv_device)} is 664.
     */
    public static final long VERBS_DEVICE_OPS = 664;

    /** {@code sizeof(struct ibv_port_attr)} in libibverbs 44, passed to the query_port op. */
    public static final long PORT_ATTR_SIZE = 52;
    /** Bytes the exported compat {@code ibv_query_port@IBVERBS_1.1} fills. */
    public static final long COMPAT_PORT_ATTR_SIZE = 48;
}
