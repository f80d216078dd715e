package org.verbs4j.natives;

/**
 * Hand-placed offsets of the verbs objects whose fields the Java side reads directly
 * (libibverbs 44, x86_64): {@code ibv_qp}, {@code ibv_cq}, {@code ibv_srq}, {@code ibv_mr},
 * {@code ibv_pd}, {@code ibv_device}. Checked against gcc by the layout conformance test.
 *
 * <pre>
 * ibv_qp  (160): +0 context* +8 qp_context +16 pd* +24 send_cq* +32 recv_cq* +40 srq*
 *                +48 u32 handle +52 u32 qp_num +56 state +60 qp_type
 * ibv_cq  (128): +0 context* +8 channel* +16 cq_context +24 u32 handle +28 int cqe
 * ibv_srq (128): +0 context* +8 srq_context +16 pd* +24 u32 handle
 * ibv_mr  (48):  +0 context* +8 pd* +16 addr* +24 size_t length +32 u32 handle +36 u32 lkey +40 u32 rkey
 * ibv_pd  (16):  +0 context* +8 u32 handle
 * ibv_device (664): +0 _ops +16 node_type +20 transport_type +24 char name[64]
 * ibv_comp_channel (16): +0 context* +8 int fd +12 int refcnt
 * </pre>
 */
public final class ObjectLayout {
    private ObjectLayout() {}

    public static final long QP_SIZE = 160;
    public static final long QP_CONTEXT = 0;
    public static final long QP_QP_NUM = 52;
    public static final long QP_STATE = 56;
    public static final long QP_QP_TYPE = 60;

    public static final long CQ_SIZE = 128;
    public static final long CQ_CONTEXT = 0;
    public static final long CQ_CHANNEL = 8;
    public static final long CQ_CQE = 28;

    public static final long SRQ_CONTEXT = 0;

    public static final long MR_SIZE = 48;
    public static final long MR_ADDR = 16;
    public static final long MR_LENGTH = 24;
    public static final long MR_LKEY = 36;
    public static final long MR_RKEY = 40;

    public static final long PD_CONTEXT = 0;
    public static final long PD_HANDLE = 8;

    public static final long DEVICE_NODE_TYPE = 16;
    public static final long DEVICE_TRANSPORT_TYPE = 20;
    public static final long DEVICE_NAME = 24;

    public static final long COMP_CHANNEL_FD = 8;
}
