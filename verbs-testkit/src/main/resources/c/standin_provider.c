/*
 * A stand-in libibverbs provider for host tests and benchmarks (no RDMA device needed).
 *
 * It builds fake verbs objects (a struct verbs_context-backed struct ibv_context, ibv_qp,
 * ibv_cq, ibv_srq) whose provider op slots point at the stand-in functions below, so code that
 * dispatches the static inline verbs through ctx->ops (or the verbs_context ops before ctx)
 * reaches them with the caller's arguments. Every op records its last arguments, readable
 * through the exported standin_last_* getters.
 *
 * post_send walks the WR chain; for each WR it copies a 64-byte "WQE" into a ring and, for a
 * signaled WR, queues a successful completion (wr_id, the IBV_WC_* opcode of the IBV_WR_*
 * opcode, byte_len = sum of the SGE lengths). poll_cq dequeues up to num_entries of them.
 * post_recv / post_srq_recv queue the receive WRs; standin_deliver_recv() turns the oldest into
 * an IBV_WC_RECV completion.
 *
 * standin_reg_dmabuf_mr / standin_reg_device_mr stand for a provider's reg_dmabuf_mr and for
 * ibv_reg_mr of device memory (nvidia-peermem): they hand out fake struct ibv_mr with keys, or
 * refuse with a chosen errno, and record whether a dma-buf fd was still open at deregistration.
 *
 * State is process-global and not thread-safe: one test (or one benchmark thread) at a time.
 *
 * Build: gcc -O2 -fPIC -shared -o libstandin_provider.so standin_provider.c
 * (needs only the libibverbs headers; it does not link against libibverbs).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the WQE ring -------------------------------------------------------------------- */

struct standin_wqe {            /* 64 bytes */
    uint64_t wr_id;             /*  0 */
    uint64_t addr;              /*  8  first SGE */
    uint32_t length;            /* 16  first SGE */
    uint32_t lkey;              /* 20  first SGE */
    uint32_t opcode;            /* 24  IBV_WR_* */
    uint32_t send_flags;        /* 28 */
    uint64_t remote_addr;       /* 32  wr.rdma.remote_addr */
    uint32_t rkey;              /* 40  wr.rdma.rkey */
    uint32_t imm;               /* 44  imm_data (as stored, big-endian) */
    uint32_t num_sge;           /* 48 */
    uint32_t total_length;      /* 52  sum of SGE lengths */
    uint64_t reserved;          /* 56 */
};
_Static_assert(sizeof(struct standin_wqe) == 64, "WQE must be 64 bytes");

#define RING_ENTRIES 1024u
#define CQ_CAPACITY 4096u
#define RQ_CAPACITY 4096u
/* The raw completion clock of completion #seq (ticks of a 1 MHz clock: hca_core_clock = 1000 kHz). */
#define STANDIN_TS(seq) (5000u + 3u * (uint64_t)(seq))
#define STANDIN_HCA_CORE_CLOCK_KHZ 1000u


struct standin_cqe {
    uint64_t wr_id;
    uint32_t status;
    uint32_t opcode;
    uint32_t byte_len;
    uint32_t imm;
    uint32_t qp_num;
    uint32_t wc_flags;
};

struct standin_rqe {
    uint64_t wr_id;
    uint64_t addr;
    uint32_t length;
    uint32_t num_sge;
    uint32_t qp_num;
};

static struct standin_wqe ring[RING_ENTRIES];
static uint64_t ring_count;                /* WQEs written since reset */
static struct standin_cqe cq_q[CQ_CAPACITY];
static uint64_t cq_head, cq_tail;           /* tail - head = completions pending */
static struct standin_rqe rq_q[RQ_CAPACITY];
static uint64_t rq_head, rq_tail;

/* failure modes */
static int fail_post_index = -1, fail_post_errno;
static int fail_poll_rc;
static int control_rc;
static uint64_t odp_general_caps;   /* odp_caps.general_caps query_device_ex reports (0: no ODP) */
#define STANDIN_MAX_DM_SIZE 0x10000u
static uint64_t max_dm_size = STANDIN_MAX_DM_SIZE; /* what query_device_ex reports as max_dm_size */

/* last arguments */
enum {
    OP_POST_SEND, OP_POST_RECV, OP_POST_SRQ_RECV, OP_POLL_CQ, OP_REQ_NOTIFY_CQ,
    OP_QUERY_PORT, OP_QUERY_DEVICE_EX, OP_CREATE_CQ_EX, OP_COUNT
};
static long long calls[OP_COUNT];
static void *last_qp, *last_wr, *last_bad_wr_ptr;
static void *last_recv_qp, *last_recv_wr, *last_recv_bad_wr_ptr;
static void *last_srq, *last_srq_wr, *last_srq_bad_wr_ptr;
static void *last_cq, *last_wc_ptr;
static int last_num_entries;
static void *last_notify_cq;
static int last_solicited;
static void *last_port_ctx, *last_port_attr_ptr;
static int last_port_num;
static size_t last_port_attr_size;
static void *last_qdx_ctx, *last_qdx_input, *last_qdx_attr;
static size_t last_qdx_attr_size;
static void *last_ccx_ctx, *last_ccx_attr;

static uint32_t wc_opcode_of(enum ibv_wr_opcode op)
{
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_SEND_WITH_INV: return IBV_WC_SEND;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    case IBV_WR_TSO: return IBV_WC_TSO;
    case IBV_WR_ATOMIC_WRITE: return IBV_WC_ATOMIC_WRITE;
    default: return IBV_WC_DRIVER1;
    }
}

static int push_cqe(uint64_t wr_id, uint32_t status, uint32_t opcode, uint32_t byte_len,
                    uint32_t imm, uint32_t qp_num, uint32_t wc_flags)
{
    if (cq_tail - cq_head >= CQ_CAPACITY)
        return ENOMEM;
    struct standin_cqe *e = &cq_q[cq_tail++ % CQ_CAPACITY];
    e->wr_id = wr_id;
    e->status = status;
    e->opcode = opcode;
    e->byte_len = byte_len;
    e->imm = imm;
    e->qp_num = qp_num;
    e->wc_flags = wc_flags;
    return 0;
}

/* Atomics, binds and invalidations recorded alike by post_send and the ibv_wr_* builders:
 * atomics: rkey = wr.atomic.rkey, reserved = compare_add (a CAS's swap in standin_last_swap); bind:
 * remote_addr = bind addr, total_length = bind length, rkey = the new rkey, lkey = the region's
 * lkey, imm = access flags, reserved = the ibv_mw pointer; LOCAL_INV / SEND_WITH_INV: imm = the
 * rkey invalidated. */
static uint64_t last_swap;

static void record_special(struct standin_wqe *w, const struct ibv_send_wr *wr)
{
    switch (wr->opcode) {
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        w->remote_addr = wr->wr.atomic.remote_addr;
        w->rkey = wr->wr.atomic.rkey;
        w->reserved = wr->wr.atomic.compare_add;
        if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
            last_swap = wr->wr.atomic.swap;
        break;
    case IBV_WR_BIND_MW:
        w->remote_addr = wr->bind_mw.bind_info.addr;
        w->total_length = (uint32_t)wr->bind_mw.bind_info.length;
        w->rkey = wr->bind_mw.rkey;
        w->lkey = wr->bind_mw.bind_info.mr ? wr->bind_mw.bind_info.mr->lkey : 0;
        w->imm = wr->bind_mw.bind_info.mw_access_flags;
        w->reserved = (uintptr_t)wr->bind_mw.mw;
        break;
    case IBV_WR_LOCAL_INV:
    case IBV_WR_SEND_WITH_INV:
        w->imm = wr->invalidate_rkey;
        break;
    default:
        break;
    }
}

/* ---- provider ops ---------------------------------------------------------------------- */

EXPORT int standin_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
    calls[OP_POST_SEND]++;
    last_qp = qp;
    last_wr = wr;
    last_bad_wr_ptr = bad_wr;
    int index = 0;
    for (; wr; wr = wr->next, index++) {
        if (index == fail_post_index) {
            *bad_wr = wr;
            return fail_post_errno;
        }
        uint32_t total = 0;
        for (int i = 0; i < wr->num_sge; i++)
            total += wr->sg_list[i].length;
        if ((wr->send_flags & IBV_SEND_SIGNALED) && cq_tail - cq_head >= CQ_CAPACITY) {
            *bad_wr = wr;
            return ENOMEM;
        }
        struct standin_wqe *w = &ring[ring_count++ % RING_ENTRIES];
        w->wr_id = wr->wr_id;
        if (wr->num_sge > 0) {
            w->addr = wr->sg_list[0].addr;
            w->length = wr->sg_list[0].length;
            w->lkey = wr->sg_list[0].lkey;
        } else {
            w->addr = 0;
            w->length = 0;
            w->lkey = 0;
        }
        w->opcode = wr->opcode;
        w->send_flags = wr->send_flags;
        w->remote_addr = wr->wr.rdma.remote_addr;
        w->rkey = wr->wr.rdma.rkey;
        w->imm = wr->imm_data;
        w->num_sge = (uint32_t)wr->num_sge;
        w->total_length = total;
        w->reserved = 0;
        record_special(w, wr);
        if (qp && qp->qp_type == IBV_QPT_XRC_SEND)
            w->reserved = wr->qp_type.xrc.remote_srqn;
        if (wr->send_flags & IBV_SEND_SIGNALED)
            push_cqe(wr->wr_id, IBV_WC_SUCCESS, wc_opcode_of(wr->opcode), total, 0,
                     qp ? qp->qp_num : 0, 0);
    }
    return 0;
}

static int queue_recv(struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr, uint32_t qp_num)
{
    int index = 0;
    for (; wr; wr = wr->next, index++) {
        if (index == fail_post_index) {
            *bad_wr = wr;
            return fail_post_errno;
        }
        if (rq_tail - rq_head >= RQ_CAPACITY) {
            *bad_wr = wr;
            return ENOMEM;
        }
        struct standin_rqe *r = &rq_q[rq_tail++ % RQ_CAPACITY];
        r->wr_id = wr->wr_id;
        r->addr = wr->num_sge > 0 ? wr->sg_list[0].addr : 0;
        r->length = wr->num_sge > 0 ? wr->sg_list[0].length : 0;
        r->num_sge = (uint32_t)wr->num_sge;
        r->qp_num = qp_num;
    }
    return 0;
}

EXPORT int standin_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    calls[OP_POST_RECV]++;
    last_recv_qp = qp;
    last_recv_wr = wr;
    last_recv_bad_wr_ptr = bad_wr;
    return queue_recv(wr, bad_wr, qp ? qp->qp_num : 0);
}

EXPORT int standin_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    calls[OP_POST_SRQ_RECV]++;
    last_srq = srq;
    last_srq_wr = wr;
    last_srq_bad_wr_ptr = bad_wr;
    return queue_recv(wr, bad_wr, 0);
}

EXPORT int standin_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    calls[OP_POLL_CQ]++;
    last_cq = cq;
    last_num_entries = num_entries;
    last_wc_ptr = wc;
    if (fail_poll_rc != 0)
        return fail_poll_rc;
    int n = 0;
    while (n < num_entries && cq_head != cq_tail) {
        struct standin_cqe *e = &cq_q[cq_head++ % CQ_CAPACITY];
        struct ibv_wc *w = &wc[n++];
        memset(w, 0, sizeof(*w));
        w->wr_id = e->wr_id;
        w->status = (enum ibv_wc_status)e->status;
        w->opcode = (enum ibv_wc_opcode)e->opcode;
        w->byte_len = e->byte_len;
        w->imm_data = e->imm;
        w->qp_num = e->qp_num;
        w->wc_flags = e->wc_flags;
    }
    return n;
}

EXPORT int standin_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    calls[OP_REQ_NOTIFY_CQ]++;
    last_notify_cq = cq;
    last_solicited = solicited_only;
    return control_rc;
}

EXPORT int standin_query_port(struct ibv_context *context, uint8_t port_num,
                              struct ibv_port_attr *port_attr, size_t port_attr_len)
{
    calls[OP_QUERY_PORT]++;
    last_port_ctx = context;
    last_port_num = port_num;
    last_port_attr_ptr = port_attr;
    last_port_attr_size = port_attr_len;
    if (control_rc != 0)
        return control_rc;
    struct ibv_port_attr a;
    memset(&a, 0, sizeof(a));
    a.state = IBV_PORT_ACTIVE;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = IBV_MTU_1024;
    a.gid_tbl_len = 16;
    a.lid = 0x1234;
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    a.port_cap_flags2 = 0xBEEF; /* only visible when the caller passed the full size */
    size_t n = port_attr_len < sizeof(a) ? port_attr_len : sizeof(a);
    memcpy(port_attr, &a, n);
    return 0;
}

EXPORT int standin_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
                                   struct ibv_device_attr_ex *attr, size_t attr_size)
{
    calls[OP_QUERY_DEVICE_EX]++;
    last_qdx_ctx = context;
    last_qdx_input = (void *)input;
    last_qdx_attr = attr;
    last_qdx_attr_size = attr_size;
    if (control_rc != 0)
        return control_rc;
    struct ibv_device_attr_ex a;
    memset(&a, 0, sizeof(a));
    strcpy(a.orig_attr.fw_ver, "standin-fw 1.0");
    a.orig_attr.max_qp = 4242;
    a.orig_attr.max_cqe = 65535;
    a.orig_attr.max_sge = 30;
    a.orig_attr.phys_port_cnt = 1;
    a.completion_timestamp_mask = 0xABCDEF;
    a.hca_core_clock = STANDIN_HCA_CORE_CLOCK_KHZ;
    a.max_dm_size = max_dm_size;
    a.odp_caps.general_caps = odp_general_caps;
    if (odp_general_caps) {
        a.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE
                                                    | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC;
    }
    size_t n = attr_size < sizeof(a) ? attr_size : sizeof(a);
    memcpy(attr, &a, n);
    return 0;
}

/* ---- the extended CQ: start_poll / next_poll / end_poll and the field readers -------------- */

static const struct standin_cqe *cur_cqe;  /* the current completion between start and end */
static uint64_t cur_seq;
static int in_poll;                         /* 1 between a successful start_poll and end_poll */
static long long protocol_errors;           /* calls out of the start/next/end order */
static uint64_t last_ccx_wc_flags;

static void set_current(struct ibv_cq_ex *cq)
{
    cur_seq = cq_head;
    cur_cqe = &cq_q[cq_head++ % CQ_CAPACITY];
    cq->status = (enum ibv_wc_status)cur_cqe->status;
    cq->wr_id = cur_cqe->wr_id;
}

EXPORT int standin_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
    calls[OP_POLL_CQ]++;
    last_cq = cq;
    if (in_poll || attr == NULL)
        protocol_errors++;
    if (fail_poll_rc != 0)
        return -fail_poll_rc;
    if (cq_head == cq_tail)
        return ENOENT;
    in_poll = 1;
    set_current(cq);
    return 0;
}

EXPORT int standin_next_poll(struct ibv_cq_ex *cq)
{
    if (!in_poll)
        protocol_errors++;
    if (cq_head == cq_tail)
        return ENOENT;
    set_current(cq);
    return 0;
}

EXPORT void standin_end_poll(struct ibv_cq_ex *cq)
{
    (void)cq;
    if (!in_poll)
        protocol_errors++;
    in_poll = 0;
    cur_cqe = NULL;
}

#define CUR(field) (in_poll && cur_cqe ? cur_cqe->field : (protocol_errors++, 0u))
static enum ibv_wc_opcode standin_read_opcode(struct ibv_cq_ex *cq) { (void)cq; return (enum ibv_wc_opcode)CUR(opcode); }
static uint32_t standin_read_vendor_err(struct ibv_cq_ex *cq) { (void)cq; return CUR(status) ? 0x5a : 0; }
static uint32_t standin_read_byte_len(struct ibv_cq_ex *cq) { (void)cq; return CUR(byte_len); }
static __be32 standin_read_imm_data(struct ibv_cq_ex *cq) { (void)cq; return CUR(imm); }
static uint32_t standin_read_qp_num(struct ibv_cq_ex *cq) { (void)cq; return CUR(qp_num); }
static uint32_t standin_read_src_qp(struct ibv_cq_ex *cq) { (void)cq; return CUR(qp_num) + 1000u; }
static unsigned int standin_read_wc_flags(struct ibv_cq_ex *cq) { (void)cq; return CUR(wc_flags); }
static uint32_t standin_read_slid(struct ibv_cq_ex *cq) { (void)cq; return CUR(qp_num) & 0xffffu; }
static uint8_t standin_read_sl(struct ibv_cq_ex *cq) { (void)cq; return (uint8_t)(CUR(qp_num) & 0xfu); }
static uint8_t standin_read_dlid_path_bits(struct ibv_cq_ex *cq) { (void)cq; return (uint8_t)(CUR(qp_num) & 0x7fu); }
static uint64_t standin_read_completion_ts(struct ibv_cq_ex *cq) { (void)cq; return in_poll ? STANDIN_TS(cur_seq) : (protocol_errors++, 0u); }
static uint16_t standin_read_cvlan(struct ibv_cq_ex *cq) { (void)cq; return (uint16_t)(CUR(qp_num) & 0xfffu); }
static uint32_t standin_read_flow_tag(struct ibv_cq_ex *cq) { (void)cq; return CUR(qp_num) ^ 0xf00du; }
static uint64_t standin_read_completion_wallclock_ns(struct ibv_cq_ex *cq)
{
    (void)cq;
    return in_poll ? STANDIN_TS(cur_seq) * (1000000u / STANDIN_HCA_CORE_CLOCK_KHZ) : (protocol_errors++, 0u);
}

/* Calls out of the start_poll / next_poll / end_poll protocol since reset (0 when the caller keeps it). */
EXPORT long long standin_poll_protocol_errors(void) { return protocol_errors; }
/* 1 between a successful start_poll and its end_poll. */
EXPORT long long standin_in_poll(void) { return in_poll; }
static void *last_ccx_parent;
/* parent_domain of the last create_cq_ex (NULL without IBV_CQ_INIT_ATTR_MASK_PD). */
EXPORT void *standin_last_create_cq_ex_parent(void) { return last_ccx_parent; }
/* wc_flags of the last create_cq_ex. */
EXPORT unsigned long long standin_last_create_cq_ex_wc_flags(void) { return last_ccx_wc_flags; }
/* The raw completion timestamp the stand-in gives completion #seq (counted from reset). */
EXPORT unsigned long long standin_completion_ts(unsigned long long seq) { return STANDIN_TS(seq); }

EXPORT struct ibv_cq_ex *standin_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *init_attr)
{
    calls[OP_CREATE_CQ_EX]++;
    last_ccx_ctx = context;
    last_ccx_attr = init_attr;
    if (control_rc != 0) {
        errno = control_rc;
        return NULL;
    }
    if (init_attr && (init_attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && !init_attr->parent_domain) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_cq_ex *cq = calloc(1, sizeof(*cq));
    if (!cq) {
        errno = ENOMEM;
        return NULL;
    }
    cq->context = context;
    cq->cqe = init_attr ? (int)init_attr->cqe : 0;
    cq->cq_context = init_attr ? init_attr->cq_context : NULL;
    cq->channel = init_attr ? init_attr->channel : NULL;
    last_ccx_wc_flags = init_attr ? init_attr->wc_flags : 0;
    last_ccx_parent = init_attr && (init_attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ? init_attr->parent_domain : NULL;
    cq->start_poll = standin_start_poll;
    cq->next_poll = standin_next_poll;
    cq->end_poll = standin_end_poll;
    cq->read_opcode = standin_read_opcode;
    cq->read_vendor_err = standin_read_vendor_err;
    cq->read_byte_len = standin_read_byte_len;
    cq->read_imm_data = standin_read_imm_data;
    cq->read_qp_num = standin_read_qp_num;
    cq->read_src_qp = standin_read_src_qp;
    cq->read_wc_flags = standin_read_wc_flags;
    cq->read_slid = standin_read_slid;
    cq->read_sl = standin_read_sl;
    cq->read_dlid_path_bits = standin_read_dlid_path_bits;
    cq->read_completion_ts = standin_read_completion_ts;
    cq->read_cvlan = standin_read_cvlan;
    cq->read_flow_tag = standin_read_flow_tag;
    cq->read_completion_wallclock_ns = standin_read_completion_wallclock_ns;
    return cq;
}

EXPORT int standin_query_rt_values(struct ibv_context *context, struct ibv_values_ex *values)
{
    (void)context;
    if (control_rc != 0)
        return control_rc;
    if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
        values->raw_clock.tv_sec = 0;
        values->raw_clock.tv_nsec = (long)STANDIN_TS(cq_tail);
    }
    return 0;
}

/* ---- device memory registration ---------------------------------------------------------- */

struct standin_dev_mr {
    struct ibv_mr mr;
    int fd;                     /* the dma-buf fd, or -1 (device pointer) */
};

static int dmabuf_errno;        /* 0: accept; else refuse with it (EOPNOTSUPP: no dma-buf support) */
static int devmr_errno;         /* 0: accept; else refuse with it (EFAULT: no peermem) */
static int dev_mr_live;
static int dev_mr_serial;
static int dmabuf_fd_open_at_dereg = -1;
static int last_dev_reg_errno;
#define DEV_REG_FAIL(e) do { errno = last_dev_reg_errno = (e); return NULL; } while (0)

/* reg_dmabuf_mr(pd, offset, length, iova, fd, access): NULL + errno, or a fake MR (addr = iova). */
EXPORT struct ibv_mr *standin_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                            int fd, int access)
{
    if (dmabuf_errno)
        DEV_REG_FAIL(dmabuf_errno);
    if (fd < 0 || fcntl(fd, F_GETFD) == -1)
        DEV_REG_FAIL(EBADF);
    if (length == 0)
        DEV_REG_FAIL(EINVAL);
    struct standin_dev_mr *m = calloc(1, sizeof(*m));
    if (!m)
        DEV_REG_FAIL(ENOMEM);
    m->mr.pd = pd;
    m->mr.addr = (void *)(uintptr_t)iova;
    m->mr.length = length;
    m->mr.lkey = 0x7000u + (uint32_t)dev_mr_serial;
    m->mr.rkey = 0x9000u + (uint32_t)dev_mr_serial++;
    m->fd = fd;
    (void)offset;
    (void)access;
    dev_mr_live++;
    return &m->mr;
}

/* ibv_reg_mr of a device pointer (what nvidia-peermem makes possible). */
EXPORT struct ibv_mr *standin_reg_device_mr(struct ibv_pd *pd, uint64_t addr, size_t length, int access)
{
    if (devmr_errno)
        DEV_REG_FAIL(devmr_errno);
    struct standin_dev_mr *m = calloc(1, sizeof(*m));
    if (!m)
        DEV_REG_FAIL(ENOMEM);
    m->mr.pd = pd;
    m->mr.addr = (void *)(uintptr_t)addr;
    m->mr.length = length;
    m->mr.lkey = 0x7000u + (uint32_t)dev_mr_serial;
    m->mr.rkey = 0x9000u + (uint32_t)dev_mr_serial++;
    m->fd = -1;
    (void)access;
    dev_mr_live++;
    return &m->mr;
}

EXPORT int standin_dereg_device_mr(struct ibv_mr *mr)
{
    struct standin_dev_mr *m = (struct standin_dev_mr *)mr;
    if (m->fd >= 0)
        dmabuf_fd_open_at_dereg = fcntl(m->fd, F_GETFD) != -1;
    dev_mr_live--;
    free(m);
    return 0;
}

/* what the next dma-buf / device-pointer registration answers: 0 accepts, else that errno */
EXPORT void standin_set_device_reg_errno(int dmabuf, int devptr)
{
    dmabuf_errno = dmabuf;
    devmr_errno = devptr;
}

EXPORT int standin_device_mr_live(void) { return dev_mr_live; }
/* the errno of the last refused device-memory registration */
EXPORT int standin_last_device_reg_errno(void) { return last_dev_reg_errno; }
/* 1: the last deregistered dma-buf MR's fd was still open; 0: already closed; -1: none yet */
EXPORT int standin_dmabuf_fd_open_at_dereg(void) { return dmabuf_fd_open_at_dereg; }

/* ---- the extended QP: ibv_wr_start / builders / setters / ibv_wr_complete / ibv_wr_abort ---- */

/* libibverbs' struct verbs_qp (driver.h): ibv_qp_to_qp_ex reads comp_mask after the ibv_qp_ex. */
struct standin_qpx {
    struct ibv_qp_ex qpx;
    uint32_t comp_mask;         /* VERBS_QP_EX = 1 << 1 */
    void *xrcd;
};
#define STANDIN_VERBS_QP_EX (1u << 1)

static int in_wr;                   /* 1 between wr_start and wr_complete / wr_abort */
static uint64_t wr_first;           /* ring_count at wr_start */
static long long wr_protocol_errors;/* builders or setters outside start..complete, a start inside */
static long long wr_completes, wr_aborts;
static uint64_t wr_extended_wqes;   /* WQEs written by the builders since reset */
static uint8_t last_inline[256];
static uint32_t last_inline_len;
static uint64_t last_create_qp_ex_ops;
static int last_create_qp_ex_mask;
static int last_create_qp_ex_type;
static void *last_create_qp_ex_xrcd, *last_create_qp_ex_recv_cq;

/* ---- XRC: open_xrcd, close_xrcd, create_srq_ex (IBV_SRQT_XRC), get_srq_num --------------- */

struct standin_xrcd {
    struct ibv_xrcd xrcd;
    int users;                  /* XRC SRQs and XRC_RECV QPs on it, not yet destroyed */
};

struct standin_xsrq {
    struct ibv_srq srq;
    struct standin_xrcd *xrcd;
    uint32_t srq_num;
};

static int xrcd_live, xsrq_live;
static int xrc_errno;           /* 0: accept; else open_xrcd / create_srq_ex refuse with it */
static int last_xrcd_fd, last_xrcd_oflags, last_xrcd_mask;
static void *last_xsrq_pd, *last_xsrq_xrcd, *last_xsrq_cq;
static uint32_t last_xsrq_max_wr;

static void xrcd_user(struct ibv_xrcd *x, int delta)
{
    if (x)
        ((struct standin_xrcd *)x)->users += delta;
}

/* open_xrcd: fd -1 needs O_CREAT (an anonymous domain), as the kernel answers; EINVAL else. */
static struct ibv_xrcd *standin_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
    last_xrcd_mask = (int)attr->comp_mask;
    last_xrcd_fd = attr->fd;
    last_xrcd_oflags = attr->oflags;
    if (xrc_errno) {
        errno = xrc_errno;
        return NULL;
    }
    if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || (attr->fd < 0 && !(attr->oflags & O_CREAT))) {
        errno = EINVAL;
        return NULL;
    }
    struct standin_xrcd *x = calloc(1, sizeof(*x));
    if (!x) {
        errno = ENOMEM;
        return NULL;
    }
    x->xrcd.context = context;
    xrcd_live++;
    return &x->xrcd;
}

/* close_xrcd: EBUSY while an XRC SRQ or XRC_RECV QP uses it, as the kernel answers. */
static int standin_close_xrcd(struct ibv_xrcd *xrcd)
{
    struct standin_xrcd *x = (struct standin_xrcd *)xrcd;
    if (x->users)
        return EBUSY;
    xrcd_live--;
    free(x);
    return 0;
}

/* create_srq_ex: an XRC SRQ (type, pd, xrcd and cq all given), else EINVAL; numbered from 0x700. */
static struct ibv_srq *standin_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr)
{
    uint32_t need = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    if (xrc_errno) {
        errno = xrc_errno;
        return NULL;
    }
    if ((attr->comp_mask & need) != need || attr->srq_type != IBV_SRQT_XRC || !attr->pd || !attr->xrcd
        || !attr->cq || attr->attr.max_wr == 0) {
        errno = EINVAL;
        return NULL;
    }
    struct standin_xsrq *x = calloc(1, sizeof(*x));
    if (!x) {
        errno = ENOMEM;
        return NULL;
    }
    x->srq.context = context;
    x->srq.pd = attr->pd;
    x->xrcd = (struct standin_xrcd *)attr->xrcd;
    x->srq_num = 0x700u + (uint32_t)xsrq_live;
    x->xrcd->users++;
    last_xsrq_pd = attr->pd;
    last_xsrq_xrcd = attr->xrcd;
    last_xsrq_cq = attr->cq;
    last_xsrq_max_wr = attr->attr.max_wr;
    xsrq_live++;
    return &x->srq;
}

static int standin_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
    *srq_num = ((struct standin_xsrq *)srq)->srq_num;
    return 0;
}

/* What ibv_destroy_srq does with an XRC SRQ of create_srq_ex. */
EXPORT int standin_destroy_xrc_srq(struct ibv_srq *srq)
{
    struct standin_xsrq *x = (struct standin_xsrq *)srq;
    x->xrcd->users--;
    xsrq_live--;
    free(x);
    return 0;
}

EXPORT void standin_set_xrc_errno(int e) { xrc_errno = e; }
EXPORT int standin_xrcd_live(void) { return xrcd_live; }
EXPORT int standin_xrc_srq_live(void) { return xsrq_live; }
/* Field of the last open_xrcd: 0 comp_mask, 1 fd, 2 oflags. */
EXPORT int standin_last_xrcd(int field)
{
    return field == 0 ? last_xrcd_mask : field == 1 ? last_xrcd_fd : last_xrcd_oflags;
}
/* Of the last accepted XRC create_srq_ex: 0 pd, 1 xrcd, 2 cq, 3 max_wr. */
EXPORT unsigned long long standin_last_xrc_srq(int field)
{
    return field == 0 ? (uintptr_t)last_xsrq_pd : field == 1 ? (uintptr_t)last_xsrq_xrcd
         : field == 2 ? (uintptr_t)last_xsrq_cq : last_xsrq_max_wr;
}
/* Of the last create_qp_ex: 0 qp_type, 1 xrcd (when the mask has IBV_QP_INIT_ATTR_XRCD), 2 recv_cq. */
EXPORT unsigned long long standin_last_create_qp_ex(int field)
{
    return field == 0 ? (unsigned long long)last_create_qp_ex_type
         : field == 1 ? (uintptr_t)last_create_qp_ex_xrcd : (uintptr_t)last_create_qp_ex_recv_cq;
}
/* open_qp: a handle on the XRC_RECV QP of a domain by its number (0x5151, the number create_qp_ex
 * gives), holding the domain as a created one does; EINVAL for another number or a mask lacking
 * NUM, XRCD or TYPE, as the kernel answers. */
static uint32_t last_open_qp_mask, last_open_qp_num;
static void *last_open_qp_xrcd;
static struct ibv_qp *standin_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
    uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    last_open_qp_mask = attr->comp_mask;
    last_open_qp_num = attr->qp_num;
    last_open_qp_xrcd = attr->xrcd;
    if ((attr->comp_mask & need) != need || !attr->xrcd || attr->qp_type != IBV_QPT_XRC_RECV
        || attr->qp_num != 0x5151) {
        errno = EINVAL;
        return NULL;
    }
    struct standin_qpx *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    s->qpx.qp_base.context = context;
    s->qpx.qp_base.qp_num = attr->qp_num;
    s->qpx.qp_base.qp_type = IBV_QPT_XRC_RECV;
    s->qpx.qp_base.qp_context = attr->xrcd; /* the domain it releases when destroyed */
    xrcd_user(attr->xrcd, 1);
    return &s->qpx.qp_base;
}
/* Field of the last open_qp: 0 comp_mask, 1 qp_num, 2 xrcd. */
EXPORT unsigned long long standin_last_open_qp(int field)
{
    return field == 0 ? last_open_qp_mask : field == 1 ? last_open_qp_num : (uintptr_t)last_open_qp_xrcd;
}
/* What ibv_destroy_qp does with a qp of create_qp_ex (an XRC_RECV one releases its domain). */
EXPORT int standin_destroy_qp_ex(struct ibv_qp *qp)
{
    if (qp->qp_type == IBV_QPT_XRC_RECV)
        xrcd_user((struct ibv_xrcd *)qp->qp_context, -1);
    free(qp);
    return 0;
}

static struct standin_wqe *wr_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
    if (!in_wr)
        wr_protocol_errors++;
    struct standin_wqe *w = &ring[ring_count++ % RING_ENTRIES];
    memset(w, 0, sizeof(*w));
    w->wr_id = q->wr_id;
    w->opcode = op;
    w->send_flags = q->wr_flags;
    wr_extended_wqes++;
    return w;
}

static struct standin_wqe *wr_cur(void)
{
    if (!in_wr || ring_count == wr_first) {
        wr_protocol_errors++;
        static struct standin_wqe scratch;
        return &scratch;
    }
    return &ring[(ring_count - 1) % RING_ENTRIES];
}

static void x_start(struct ibv_qp_ex *q)
{
    (void)q;
    if (in_wr)
        wr_protocol_errors++;
    in_wr = 1;
    wr_first = ring_count;
}

static int x_complete(struct ibv_qp_ex *q)
{
    if (!in_wr)
        wr_protocol_errors++;
    in_wr = 0;
    wr_completes++;
    uint64_t n = ring_count - wr_first;
    if (fail_post_index >= 0 && (uint64_t)fail_post_index < n) {
        ring_count = wr_first;   /* all or nothing, as wr_complete is */
        return fail_post_errno;
    }
    uint64_t signaled = 0;
    for (uint64_t i = wr_first; i < ring_count; i++)
        signaled += (ring[i % RING_ENTRIES].send_flags & IBV_SEND_SIGNALED) != 0;
    if (cq_tail - cq_head + signaled > CQ_CAPACITY) {
        ring_count = wr_first;
        return ENOMEM;
    }
    for (uint64_t i = wr_first; i < ring_count; i++) {
        struct standin_wqe *w = &ring[i % RING_ENTRIES];
        if (w->send_flags & IBV_SEND_SIGNALED)
            push_cqe(w->wr_id, IBV_WC_SUCCESS, wc_opcode_of((enum ibv_wr_opcode)w->opcode),
                     w->opcode == IBV_WR_BIND_MW ? 0 : w->total_length, 0, q->qp_base.qp_num, 0);
    }
    return 0;
}

static void x_abort(struct ibv_qp_ex *q)
{
    (void)q;
    if (!in_wr)
        wr_protocol_errors++;
    in_wr = 0;
    wr_aborts++;
    ring_count = wr_first;
}

static void x_send(struct ibv_qp_ex *q) { wr_new(q, IBV_WR_SEND); }
static void x_send_imm(struct ibv_qp_ex *q, __be32 imm) { wr_new(q, IBV_WR_SEND_WITH_IMM)->imm = imm; }
static void x_send_inv(struct ibv_qp_ex *q, uint32_t rkey) { wr_new(q, IBV_WR_SEND_WITH_INV)->imm = rkey; }
static void x_local_inv(struct ibv_qp_ex *q, uint32_t rkey) { wr_new(q, IBV_WR_LOCAL_INV)->imm = rkey; }

static void x_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t remote_addr, __be32 imm)
{
    struct standin_wqe *w = wr_new(q, op);
    w->rkey = rkey;
    w->remote_addr = remote_addr;
    w->imm = imm;
}
static void x_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a) { x_rdma(q, IBV_WR_RDMA_WRITE, rkey, a, 0); }
static void x_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a, __be32 imm)
{
    x_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, a, imm);
}
static void x_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a) { x_rdma(q, IBV_WR_RDMA_READ, rkey, a, 0); }
static void x_cas(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a, uint64_t compare, uint64_t swap)
{
    x_rdma(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, a, 0);
    wr_cur()->reserved = compare;
    last_swap = swap;
}
static void x_faa(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a, uint64_t add)
{
    x_rdma(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, a, 0);
    wr_cur()->reserved = add;
}
static void x_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
    struct standin_wqe *w = wr_new(q, IBV_WR_BIND_MW);
    w->remote_addr = info->addr;
    w->total_length = (uint32_t)info->length;
    w->rkey = rkey;
    w->lkey = info->mr ? info->mr->lkey : 0;
    w->imm = info->mw_access_flags;
    w->reserved = (uintptr_t)mw;
}

static void x_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t length)
{
    (void)q;
    struct standin_wqe *w = wr_cur();
    w->addr = addr;
    w->length = length;
    w->lkey = lkey;
    w->num_sge = 1;
    w->total_length = length;
}

static void x_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *sg)
{
    (void)q;
    struct standin_wqe *w = wr_cur();
    w->num_sge = (uint32_t)n;
    w->total_length = 0;
    if (n > 0) {
        w->addr = sg[0].addr;
        w->length = sg[0].length;
        w->lkey = sg[0].lkey;
    }
    for (size_t i = 0; i < n; i++)
        w->total_length += sg[i].length;
}

static void inline_append(struct standin_wqe *w, const void *addr, size_t length)
{
    if (w->num_sge == 0)
        last_inline_len = 0;
    if (w->num_sge == 0)
        w->addr = (uintptr_t)addr;
    w->num_sge++;
    w->total_length += (uint32_t)length;
    w->length = w->total_length;
    size_t room = sizeof(last_inline) - last_inline_len;
    memcpy(last_inline + last_inline_len, addr, length < room ? length : room);
    last_inline_len += (uint32_t)(length < room ? length : room);
}

static void x_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
    (void)q;
    inline_append(wr_cur(), addr, length);
}

static void x_set_inline_data_list(struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *bufs)
{
    (void)q;
    struct standin_wqe *w = wr_cur();
    for (size_t i = 0; i < n; i++)
        inline_append(w, bufs[i].addr, bufs[i].length);
}

static void x_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
    (void)q;
    struct standin_wqe *w = wr_cur();
    w->remote_addr = (uintptr_t)ah;
    w->rkey = remote_qpn;
    w->imm = remote_qkey;
}

/* The remote XRC SRQ number of the request being built, where the classic path records it too. */
static void x_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t remote_srqn)
{
    (void)q;
    wr_cur()->reserved = remote_srqn;
}

/* create_qp_ex: a struct verbs_qp-shaped QP whose builders are set for the send_ops_flags asked
 * (all others NULL, as a provider leaves the ops it lacks). */
EXPORT struct ibv_qp *standin_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
    last_create_qp_ex_mask = (int)attr->comp_mask;
    last_create_qp_ex_ops = attr->send_ops_flags;
    if (control_rc != 0) {
        errno = control_rc;
        return NULL;
    }
    struct standin_qpx *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    struct ibv_qp_ex *q = &s->qpx;
    if (attr->qp_type == IBV_QPT_XRC_RECV && !(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD && attr->xrcd)) {
        free(s);
        errno = EINVAL;
        return NULL;
    }
    q->qp_base.context = context;
    q->qp_base.qp_num = attr->qp_type == IBV_QPT_XRC_RECV ? 0x5151 : 0x4343;
    q->qp_base.qp_type = attr->qp_type;
    q->qp_base.state = IBV_QPS_RESET;
    q->qp_base.pd = attr->qp_type == IBV_QPT_XRC_RECV ? NULL : attr->pd;
    if (attr->qp_type == IBV_QPT_XRC_RECV) {
        q->qp_base.qp_context = attr->xrcd; /* the domain it releases when destroyed */
        xrcd_user(attr->xrcd, 1);
    }
    last_create_qp_ex_type = attr->qp_type;
    last_create_qp_ex_xrcd = (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? attr->xrcd : NULL;
    last_create_qp_ex_recv_cq = attr->recv_cq;
    q->qp_base.send_cq = attr->send_cq;
    q->qp_base.recv_cq = attr->recv_cq;
    s->comp_mask = STANDIN_VERBS_QP_EX;
    uint64_t f = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? attr->send_ops_flags : 0;
    if (f & IBV_QP_EX_WITH_RDMA_WRITE) q->wr_rdma_write = x_write;
    if (f & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) q->wr_rdma_write_imm = x_write_imm;
    if (f & IBV_QP_EX_WITH_SEND) q->wr_send = x_send;
    if (f & IBV_QP_EX_WITH_SEND_WITH_IMM) q->wr_send_imm = x_send_imm;
    if (f & IBV_QP_EX_WITH_RDMA_READ) q->wr_rdma_read = x_read;
    if (f & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) q->wr_atomic_cmp_swp = x_cas;
    if (f & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) q->wr_atomic_fetch_add = x_faa;
    if (f & IBV_QP_EX_WITH_LOCAL_INV) q->wr_local_inv = x_local_inv;
    if (f & IBV_QP_EX_WITH_BIND_MW) q->wr_bind_mw = x_bind_mw;
    if (f & IBV_QP_EX_WITH_SEND_WITH_INV) q->wr_send_inv = x_send_inv;
    q->wr_set_sge = x_set_sge;
    q->wr_set_sge_list = x_set_sge_list;
    q->wr_set_inline_data = x_set_inline_data;
    q->wr_set_inline_data_list = x_set_inline_data_list;
    q->wr_set_ud_addr = x_set_ud_addr;
    if (attr->qp_type == IBV_QPT_XRC_SEND)
        q->wr_set_xrc_srqn = x_set_xrc_srqn; /* as providers do: only an XRC_SEND QP has it */
    q->wr_start = x_start;
    q->wr_complete = x_complete;
    q->wr_abort = x_abort;
    return &q->qp_base;
}

/* Builder or setter calls outside wr_start..wr_complete/wr_abort since reset (0 when kept). */
EXPORT long long standin_wr_protocol_errors(void) { return wr_protocol_errors; }
/* 1 between wr_start and wr_complete / wr_abort. */
EXPORT int standin_in_wr(void) { return in_wr; }
EXPORT long long standin_wr_completes(void) { return wr_completes; }
EXPORT long long standin_wr_aborts(void) { return wr_aborts; }
/* WQEs written by the ibv_wr_* builders since reset (the rest came through post_send). */
EXPORT unsigned long long standin_wr_extended_wqes(void) { return wr_extended_wqes; }
/* The inline bytes of the last inline request built through ibv_wr_set_inline_data(_list). */
EXPORT int standin_last_inline(void *out, int max)
{
    int n = (int)last_inline_len < max ? (int)last_inline_len : max;
    memcpy(out, last_inline, (size_t)n);
    return (int)last_inline_len;
}
EXPORT unsigned long long standin_last_swap(void) { return last_swap; }
EXPORT unsigned long long standin_last_create_qp_ex_ops(void) { return last_create_qp_ex_ops; }
EXPORT int standin_last_create_qp_ex_mask(void) { return last_create_qp_ex_mask; }

/* Polls cq (verbs.h's inline ibv_poll_cq) until the completion of wr_id `want` was reaped,
 * counting every completion into *seen; 0, or the negative poll error. */
static int reap_until(struct ibv_cq *cq, uint64_t want, long long *seen)
{
    struct ibv_wc wc[16];
    for (;;) {
        int n = ibv_poll_cq(cq, 16, wc);
        if (n < 0)
            return n;
        int done = 0;
        for (int k = 0; k < n; k++) {
            (*seen)++;
            if (wc[k].wr_id == want)
                done = 1;
        }
        if (done)
            return 0;
    }
}

/* The extended-API twin of standin_c_loop, for a qp made by standin_create_qp_ex with
 * IBV_QP_EX_WITH_RDMA_WRITE: per iteration ibv_wr_start, `chain` times ibv_wr_rdma_write +
 * ibv_wr_set_sge (verbs.h's inlines: qp_ex->wr_*; only the last signaled), ibv_wr_complete, then
 * ibv_poll_cq until that completion is reaped. Returns the completions seen (== iterations), or
 * a negative errno / poll error. */
EXPORT long long standin_c_loop_ex(struct ibv_qp *qp, struct ibv_cq *cq, int iterations, int chain,
                                   void *buf, uint32_t lkey)
{
    struct ibv_qp_ex *qx = (struct ibv_qp_ex *)qp; /* qp_base is its first member */
    long long seen = 0;
    if (chain < 1 || chain > 64 || !qx->wr_rdma_write)
        return -EINVAL;
    for (int it = 0; it < iterations; it++) {
        uint64_t base = (uint64_t)it * (uint64_t)chain;
        ibv_wr_start(qx);
        for (int i = 0; i < chain; i++) {
            qx->wr_id = base + (uint64_t)i;
            qx->wr_flags = i + 1 == chain ? IBV_SEND_SIGNALED : 0;
            ibv_wr_rdma_write(qx, lkey, (uintptr_t)buf);
            ibv_wr_set_sge(qx, lkey, (uintptr_t)buf, 64);
        }
        int rc = ibv_wr_complete(qx);
        if (rc)
            return -rc;
        int n = reap_until(cq, base + (uint64_t)chain - 1, &seen);
        if (n < 0)
            return n;
    }
    return seen;
}

/* An extended RC qp on ctx through standin_create_qp_ex, asking for send_ops (IBV_QP_EX_WITH_*);
 * free with standin_free. */
EXPORT struct ibv_qp *standin_make_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
                                         unsigned long long send_ops)
{
    struct ibv_qp_init_attr_ex a;
    memset(&a, 0, sizeof(a));
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = pd;
    a.send_ops_flags = send_ops;
    return standin_create_qp_ex(ctx, &a);
}

/* ---- memory windows ------------------------------------------------------------------------ */

static int mw_live;
static uint32_t mw_serial;

static struct ibv_mw *standin_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
    if (control_rc != 0) {
        errno = control_rc;
        return NULL;
    }
    struct ibv_mw *mw = calloc(1, sizeof(*mw));
    if (!mw) {
        errno = ENOMEM;
        return NULL;
    }
    mw->context = pd->context;
    mw->pd = pd;
    mw->rkey = 0x5500u + (++mw_serial << 8);
    mw->handle = mw_serial;
    mw->type = type;
    mw_live++;
    return mw;
}

static int standin_dealloc_mw(struct ibv_mw *mw)
{
    mw_live--;
    free(mw);
    return 0;
}

/* Windows allocated and not yet deallocated. */
EXPORT int standin_mw_live(void) { return mw_live; }

/* ibv_bind_mw of a type 1 window, as rxe does it: one IBV_WR_BIND_MW request through post_send
 * (recorded in the ring, completing when signaled) under the next rkey, which it then stores in
 * mw->rkey. A zero-length bind (the unbind) still names a region, as rxe requires. */
static int standin_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
    if (!bind->bind_info.mr || mw->type != IBV_MW_TYPE_1)
        return EINVAL;
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_BIND_MW;
    wr.wr_id = bind->wr_id;
    wr.send_flags = bind->send_flags;
    wr.bind_mw.bind_info = bind->bind_info;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    int rc = standin_post_send(qp, &wr, &bad);
    if (rc == 0)
        mw->rkey = wr.bind_mw.rkey;
    return rc;
}

/* ---- on-demand paging: the caps query_device_ex reports, reg_mr with ON_DEMAND, advise_mr --- */

static int odp_mr_live;
static int odp_mr_serial;
static int last_odp_access;
static uint64_t last_odp_addr, last_odp_length;
static int advise_calls, last_advice, last_advise_flags, last_advise_num_sge;
static struct ibv_sge last_advise_sge[4];

/* What query_device_ex reports as odp_caps.general_caps (the per-transport caps: all, when set). */
EXPORT void standin_set_odp_caps(uint64_t general_caps) { odp_general_caps = general_caps; }

/* reg_mr with IBV_ACCESS_ON_DEMAND: a fake MR over [addr, addr + length) (implicit: addr 0,
 * length SIZE_MAX), refused with EOPNOTSUPP unless the caps say ODP (implicit: IMPLICIT too)
 * and with EINVAL without ON_DEMAND. */
EXPORT struct ibv_mr *standin_reg_odp_mr(struct ibv_pd *pd, uint64_t addr, size_t length, int access)
{
    int implicit = addr == 0 && length == SIZE_MAX;
    if (!(access & IBV_ACCESS_ON_DEMAND)) {
        errno = EINVAL;
        return NULL;
    }
    if (!(odp_general_caps & IBV_ODP_SUPPORT) || (implicit && !(odp_general_caps & IBV_ODP_SUPPORT_IMPLICIT))) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct ibv_mr *mr = calloc(1, sizeof(*mr));
    if (!mr) {
        errno = ENOMEM;
        return NULL;
    }
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = (void *)(uintptr_t)addr;
    mr->length = length;
    mr->lkey = 0x0d00u + (uint32_t)odp_mr_serial;
    mr->rkey = 0x0e00u + (uint32_t)odp_mr_serial++;
    last_odp_access = access;
    last_odp_addr = addr;
    last_odp_length = length;
    odp_mr_live++;
    return mr;
}

EXPORT int standin_dereg_odp_mr(struct ibv_mr *mr)
{
    odp_mr_live--;
    free(mr);
    return 0;
}

EXPORT int standin_odp_mr_live(void) { return odp_mr_live; }
EXPORT int standin_last_odp_access(void) { return last_odp_access; }
EXPORT unsigned long long standin_last_odp_addr(void) { return last_odp_addr; }
EXPORT unsigned long long standin_last_odp_length(void) { return last_odp_length; }

/* verbs_context.advise_mr: records its arguments (up to 4 SGEs); EINVAL for no SGEs, an advice
 * above PREFETCH_NO_FAULT or unknown flags, as the kernel answers. */
static int standin_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
                             struct ibv_sge *sg_list, uint32_t num_sge)
{
    (void)pd;
    advise_calls++;
    if (num_sge == 0 || advice > IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT || (flags & ~IBV_ADVISE_MR_FLAG_FLUSH))
        return EINVAL;
    last_advice = advice;
    last_advise_flags = (int)flags;
    last_advise_num_sge = (int)num_sge;
    for (uint32_t i = 0; i < num_sge && i < 4; i++)
        last_advise_sge[i] = sg_list[i];
    return 0;
}

EXPORT int standin_advise_calls(void) { return advise_calls; }
EXPORT int standin_last_advice(void) { return last_advice; }
EXPORT int standin_last_advise_flags(void) { return last_advise_flags; }
EXPORT int standin_last_advise_num_sge(void) { return last_advise_num_sge; }
/* SGE #i of the last advise_mr: its addr, length (field 1) or lkey (field 2). */
EXPORT unsigned long long standin_last_advise_sge(int i, int field)
{
    if (i < 0 || i >= 4)
        return 0;
    return field == 0 ? last_advise_sge[i].addr : field == 1 ? last_advise_sge[i].length : last_advise_sge[i].lkey;
}

/* ---- thread domains and parent domains: alloc_td, dealloc_td, alloc_parent_domain ---------- */

struct standin_td {
    struct ibv_td td;
    int users;                  /* parent domains made with it and not yet deallocated */
};

struct standin_parent {
    struct ibv_pd pd;
    struct ibv_pd *protection_domain;
    struct standin_td *td;
};

static int td_live, parent_live;
static int domain_errno;        /* 0: accept; else alloc_td / alloc_parent_domain refuse with it */
static void *last_parent_pd, *last_parent_td;

/* alloc_td: EINVAL for a comp_mask it does not know (all, as mlx5 answers). */
static struct ibv_td *standin_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *attr)
{
    if (attr->comp_mask) {
        errno = EINVAL;
        return NULL;
    }
    if (domain_errno) {
        errno = domain_errno;
        return NULL;
    }
    struct standin_td *t = calloc(1, sizeof(*t));
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    t->td.context = context;
    td_live++;
    return &t->td;
}

/* dealloc_td: EBUSY while a parent domain uses it, as mlx5 answers. */
static int standin_dealloc_td(struct ibv_td *td)
{
    struct standin_td *t = (struct standin_td *)td;
    if (t->users)
        return EBUSY;
    td_live--;
    free(t);
    return 0;
}

/* alloc_parent_domain: a fake ibv_pd standing for attr->pd with attr->td (NULL allowed); EINVAL
 * without a pd or with comp_mask bits (allocators, pd_context) it does not implement. */
static struct ibv_pd *standin_alloc_parent_domain(struct ibv_context *context, struct ibv_parent_domain_init_attr *attr)
{
    if (!attr->pd || attr->comp_mask) {
        errno = EINVAL;
        return NULL;
    }
    if (domain_errno) {
        errno = domain_errno;
        return NULL;
    }
    struct standin_parent *p = calloc(1, sizeof(*p));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    p->pd.context = context;
    p->protection_domain = attr->pd;
    p->td = (struct standin_td *)attr->td;
    if (p->td)
        p->td->users++;
    last_parent_pd = attr->pd;
    last_parent_td = attr->td;
    parent_live++;
    return &p->pd;
}

/* What ibv_dealloc_pd does with a parent domain of this provider. */
EXPORT int standin_dealloc_parent_domain(struct ibv_pd *pd)
{
    struct standin_parent *p = (struct standin_parent *)pd;
    if (p->td)
        p->td->users--;
    parent_live--;
    free(p);
    return 0;
}

EXPORT void standin_set_domain_errno(int e) { domain_errno = e; }
EXPORT int standin_td_live(void) { return td_live; }
EXPORT int standin_parent_domain_live(void) { return parent_live; }
EXPORT void *standin_last_parent_pd(void) { return last_parent_pd; }
EXPORT void *standin_last_parent_td(void) { return last_parent_td; }

/* ---- device memory: alloc_dm, free_dm, reg_dm_mr and the ibv_dm copy ops -------------------- */

struct standin_dm {
    struct ibv_dm dm;
    size_t length;
    int mrs;                    /* reg_dm_mr regions not yet deregistered */
    unsigned char *bytes;
};

struct standin_dm_mr {
    struct ibv_mr mr;
    struct standin_dm *dm;
};

static int dm_live, dm_mr_live, dm_copies, dm_mr_serial;
static uint64_t last_dm_mr_offset, last_dm_mr_length;
static int last_dm_mr_access;

/* The copies check the range themselves (EINVAL outside), so that an overrun the caller let
 * through shows as an error, never as a write past the buffer. */
static int standin_memcpy_to_dm(struct ibv_dm *dm, uint64_t dm_offset, const void *host_addr, size_t length)
{
    struct standin_dm *d = (struct standin_dm *)dm;
    dm_copies++;
    if (dm_offset > d->length || length > d->length - dm_offset)
        return EINVAL;
    memcpy(d->bytes + dm_offset, host_addr, length);
    return 0;
}

static int standin_memcpy_from_dm(void *host_addr, struct ibv_dm *dm, uint64_t dm_offset, size_t length)
{
    struct standin_dm *d = (struct standin_dm *)dm;
    dm_copies++;
    if (dm_offset > d->length || length > d->length - dm_offset)
        return EINVAL;
    memcpy(host_addr, d->bytes + dm_offset, length);
    return 0;
}

/* alloc_dm: ENOMEM above max_dm_size, EINVAL for a comp_mask or a zero length. */
static struct ibv_dm *standin_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
    if (attr->comp_mask || attr->length == 0) {
        errno = EINVAL;
        return NULL;
    }
    if (attr->length > max_dm_size) {
        errno = ENOMEM;
        return NULL;
    }
    struct standin_dm *d = calloc(1, sizeof(*d));
    unsigned char *bytes = calloc(1, attr->length);
    if (!d || !bytes) {
        free(d);
        free(bytes);
        errno = ENOMEM;
        return NULL;
    }
    d->dm.context = context;
    d->dm.memcpy_to_dm = standin_memcpy_to_dm;
    d->dm.memcpy_from_dm = standin_memcpy_from_dm;
    d->length = attr->length;
    d->bytes = bytes;
    dm_live++;
    return &d->dm;
}

/* free_dm: EBUSY while a region is registered on it. */
static int standin_free_dm(struct ibv_dm *dm)
{
    struct standin_dm *d = (struct standin_dm *)dm;
    if (d->mrs)
        return EBUSY;
    dm_live--;
    free(d->bytes);
    free(d);
    return 0;
}

/* reg_dm_mr: EINVAL without IBV_ACCESS_ZERO_BASED (as mlx5) or outside the allocation. */
static struct ibv_mr *standin_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t dm_offset, size_t length,
                                        unsigned int access)
{
    struct standin_dm *d = (struct standin_dm *)dm;
    if (!(access & IBV_ACCESS_ZERO_BASED) || dm_offset > d->length || length > d->length - dm_offset) {
        errno = EINVAL;
        return NULL;
    }
    struct standin_dm_mr *m = calloc(1, sizeof(*m));
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = NULL;
    m->mr.length = length;
    m->mr.lkey = 0x0a00u + (uint32_t)dm_mr_serial;
    m->mr.rkey = 0x0b00u + (uint32_t)dm_mr_serial++;
    m->dm = d;
    d->mrs++;
    last_dm_mr_offset = dm_offset;
    last_dm_mr_length = length;
    last_dm_mr_access = (int)access;
    dm_mr_live++;
    return &m->mr;
}

/* What ibv_dereg_mr does with a region of reg_dm_mr. */
EXPORT int standin_dereg_dm_mr(struct ibv_mr *mr)
{
    struct standin_dm_mr *m = (struct standin_dm_mr *)mr;
    m->dm->mrs--;
    dm_mr_live--;
    free(m);
    return 0;
}

EXPORT void standin_set_max_dm_size(unsigned long long size) { max_dm_size = size; }
EXPORT int standin_dm_live(void) { return dm_live; }
EXPORT int standin_dm_mr_live(void) { return dm_mr_live; }
/* Calls of memcpy_to_dm and memcpy_from_dm since reset. */
EXPORT int standin_dm_copies(void) { return dm_copies; }
/* The offset, length and access flags of the last accepted reg_dm_mr. */
EXPORT unsigned long long standin_last_dm_mr(int field)
{
    return field == 0 ? last_dm_mr_offset : field == 1 ? last_dm_mr_length : (unsigned long long)last_dm_mr_access;
}

/* ---- controls and getters ---------------------------------------------------------------- */

EXPORT void standin_reset(void)
{
    memset(ring, 0, sizeof(ring));
    ring_count = 0;
    cq_head = cq_tail = 0;
    rq_head = rq_tail = 0;
    fail_post_index = -1;
    fail_post_errno = 0;
    fail_poll_rc = 0;
    control_rc = 0;
    memset(calls, 0, sizeof(calls));
    last_qp = last_wr = last_bad_wr_ptr = NULL;
    last_recv_qp = last_recv_wr = last_recv_bad_wr_ptr = NULL;
    last_srq = last_srq_wr = last_srq_bad_wr_ptr = NULL;
    last_cq = last_wc_ptr = NULL;
    last_num_entries = 0;
    last_notify_cq = NULL;
    last_solicited = -1;
    last_port_ctx = last_port_attr_ptr = NULL;
    last_port_num = -1;
    last_port_attr_size = 0;
    last_qdx_ctx = last_qdx_input = last_qdx_attr = NULL;
    last_qdx_attr_size = 0;
    last_ccx_ctx = last_ccx_attr = NULL;
    last_ccx_wc_flags = 0;
    last_ccx_parent = NULL;
    cur_cqe = NULL;
    in_poll = 0;
    protocol_errors = 0;
    dmabuf_errno = devmr_errno = 0;
    dmabuf_fd_open_at_dereg = -1;
    last_swap = 0;
    in_wr = 0;
    wr_first = 0;
    wr_protocol_errors = wr_completes = wr_aborts = 0;
    wr_extended_wqes = 0;
    last_inline_len = 0;
    last_create_qp_ex_ops = 0;
    last_create_qp_ex_mask = 0;
    odp_general_caps = 0;
    advise_calls = last_advice = last_advise_flags = last_advise_num_sge = 0;
    last_odp_access = 0;
    domain_errno = 0;
    max_dm_size = STANDIN_MAX_DM_SIZE;
    dm_copies = 0;
    last_dm_mr_offset = last_dm_mr_length = 0;
    last_dm_mr_access = 0;
    last_parent_pd = last_parent_td = NULL;
    xrc_errno = 0;
    xrcd_live = xsrq_live = 0;
    last_xrcd_fd = last_xrcd_oflags = last_xrcd_mask = 0;
    last_xsrq_pd = last_xsrq_xrcd = last_xsrq_cq = NULL;
    last_xsrq_max_wr = 0;
    last_create_qp_ex_type = 0;
    last_create_qp_ex_xrcd = last_create_qp_ex_recv_cq = NULL;
}

/* post_send / post_recv / post_srq_recv stop at WR #index (0-based), set *bad_wr to it and
 * return err; index < 0 turns it off. */
EXPORT void standin_fail_post_at(int index, int err)
{
    fail_post_index = index;
    fail_post_errno = err;
}

/* poll_cq returns rc (negative) instead of polling; 0 turns it off. */
EXPORT void standin_fail_poll(int rc) { fail_poll_rc = rc; }

/* query_port / query_device_ex / req_notify_cq return rc; create_cq_ex sets errno = rc and
 * returns NULL; 0 turns it off. */
EXPORT void standin_set_control_rc(int rc) { control_rc = rc; }

EXPORT long long standin_calls(int op) { return op >= 0 && op < OP_COUNT ? calls[op] : -1; }
EXPORT void *standin_last_qp(void) { return last_qp; }
EXPORT void *standin_last_wr(void) { return last_wr; }
EXPORT void *standin_last_bad_wr_ptr(void) { return last_bad_wr_ptr; }
EXPORT void *standin_last_recv_qp(void) { return last_recv_qp; }
EXPORT void *standin_last_recv_wr(void) { return last_recv_wr; }
EXPORT void *standin_last_recv_bad_wr_ptr(void) { return last_recv_bad_wr_ptr; }
EXPORT void *standin_last_srq(void) { return last_srq; }
EXPORT void *standin_last_srq_wr(void) { return last_srq_wr; }
EXPORT void *standin_last_srq_bad_wr_ptr(void) { return last_srq_bad_wr_ptr; }
EXPORT void *standin_last_cq(void) { return last_cq; }
EXPORT int standin_last_num_entries(void) { return last_num_entries; }
EXPORT void *standin_last_wc_ptr(void) { return last_wc_ptr; }
EXPORT void *standin_last_notify_cq(void) { return last_notify_cq; }
EXPORT int standin_last_solicited(void) { return last_solicited; }
EXPORT void *standin_last_port_ctx(void) { return last_port_ctx; }
EXPORT int standin_last_port_num(void) { return last_port_num; }
EXPORT void *standin_last_port_attr_ptr(void) { return last_port_attr_ptr; }
EXPORT size_t standin_last_port_attr_size(void) { return last_port_attr_size; }
EXPORT void *standin_last_query_device_ex_ctx(void) { return last_qdx_ctx; }
EXPORT void *standin_last_query_device_ex_input(void) { return last_qdx_input; }
EXPORT void *standin_last_query_device_ex_attr(void) { return last_qdx_attr; }
EXPORT size_t standin_last_query_device_ex_attr_size(void) { return last_qdx_attr_size; }
EXPORT void *standin_last_create_cq_ex_ctx(void) { return last_ccx_ctx; }
EXPORT void *standin_last_create_cq_ex_attr(void) { return last_ccx_attr; }

/* Number of WQEs written since reset; standin_wqe(i) is WQE #i (the ring keeps the last 1024). */
EXPORT unsigned long long standin_wqe_count(void) { return ring_count; }
EXPORT const struct standin_wqe *standin_wqe(unsigned long long index)
{
    return &ring[index % RING_ENTRIES];
}
EXPORT int standin_wqe_size(void) { return (int)sizeof(struct standin_wqe); }
EXPORT int standin_ring_entries(void) { return (int)RING_ENTRIES; }

/* Completions waiting to be polled. */
EXPORT int standin_pending_completions(void) { return (int)(cq_tail - cq_head); }
/* Receive WRs posted and not yet delivered. */
EXPORT int standin_pending_recvs(void) { return (int)(rq_tail - rq_head); }

/* Queues an arbitrary completion (e.g. an error status); 0, or ENOMEM when the CQ is full. */
EXPORT int standin_queue_completion(unsigned long long wr_id, int status, int opcode,
                                    unsigned int byte_len, unsigned int qp_num)
{
    return push_cqe(wr_id, (uint32_t)status, (uint32_t)opcode, byte_len, 0, qp_num, 0);
}

/* Completes the oldest posted receive WR as IBV_WC_RECV (IBV_WC_RECV_RDMA_WITH_IMM with
 * with_imm, imm_data = imm, wc_flags IBV_WC_WITH_IMM); returns its wr_id, or -1 if none. */
EXPORT long long standin_deliver_recv(unsigned int byte_len, int with_imm, unsigned int imm)
{
    if (rq_head == rq_tail)
        return -1;
    struct standin_rqe *r = &rq_q[rq_head++ % RQ_CAPACITY];
    if (push_cqe(r->wr_id, IBV_WC_SUCCESS, with_imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
                 byte_len, with_imm ? imm : 0, r->qp_num, with_imm ? IBV_WC_WITH_IMM : 0) != 0)
        return -1;
    return (long long)r->wr_id;
}

/* ---- fake objects -------------------------------------------------------------------------- */

struct standin_ctx_node {
    struct verbs_context *vctx;
    struct standin_ctx_node *next;
};
static struct standin_ctx_node *contexts;

/* A calloc'ed struct verbs_context; returns &vctx->context with the data-path ops set to the
 * stand-ins. extended: abi_compat = __VERBS_ABI_IS_EXTENDED, sz = sizeof(struct verbs_context)
 * and query_port / query_device_ex / create_cq_ex set; else abi_compat = NULL. Free with
 * standin_free. */
EXPORT struct ibv_context *standin_make_context(int extended)
{
    struct verbs_context *vctx = calloc(1, sizeof(*vctx));
    struct standin_ctx_node *node = calloc(1, sizeof(*node));
    if (!vctx || !node) {
        free(vctx);
        free(node);
        return NULL;
    }
    node->vctx = vctx;
    node->next = contexts;
    contexts = node;
    struct ibv_context *ctx = &vctx->context;
    ctx->ops.post_send = standin_post_send;
    ctx->ops.post_recv = standin_post_recv;
    ctx->ops.post_srq_recv = standin_post_srq_recv;
    ctx->ops.poll_cq = standin_poll_cq;
    ctx->ops.req_notify_cq = standin_req_notify_cq;
    ctx->ops.alloc_mw = standin_alloc_mw;
    ctx->ops.dealloc_mw = standin_dealloc_mw;
    ctx->ops.bind_mw = standin_bind_mw;
    ctx->cmd_fd = -1;
    ctx->async_fd = -1;
    ctx->num_comp_vectors = 1;
    vctx->sz = sizeof(*vctx);
    if (extended) {
        ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
        vctx->query_port = standin_query_port;
        vctx->query_device_ex = standin_query_device_ex;
        vctx->create_cq_ex = standin_create_cq_ex;
        vctx->query_rt_values = standin_query_rt_values;
        vctx->create_qp_ex = standin_create_qp_ex;
        vctx->advise_mr = standin_advise_mr;
        vctx->alloc_td = standin_alloc_td;
        vctx->dealloc_td = standin_dealloc_td;
        vctx->alloc_parent_domain = standin_alloc_parent_domain;
        vctx->alloc_dm = standin_alloc_dm;
        vctx->free_dm = standin_free_dm;
        vctx->reg_dm_mr = standin_reg_dm_mr;
        vctx->open_xrcd = standin_open_xrcd;
        vctx->open_qp = standin_open_qp;
        vctx->close_xrcd = standin_close_xrcd;
        vctx->create_srq_ex = standin_create_srq_ex;
        vctx->get_srq_num = standin_get_srq_num;
    } else {
        ctx->abi_compat = NULL;
    }
    return ctx;
}

/* Sets verbs_context.sz of a context made by standin_make_context (to test the size check). */
EXPORT void standin_set_vctx_sz(struct ibv_context *ctx, size_t sz)
{
    ((struct verbs_context *)((char *)ctx - offsetof(struct verbs_context, context)))->sz = sz;
}

/* The reference, computed with verbs.h's own macros: the op's function pointer when
 * verbs_get_ctx_op(ctx, op) (which yields the verbs_context, or NULL) accepts the context, else
 * NULL; op 0 = query_port, 1 = query_device_ex, 2 = create_cq_ex; op -1: verbs_get_ctx(ctx). */
EXPORT void *standin_ref_ctx_op(struct ibv_context *ctx, int op)
{
    switch (op) {
    case -1: return verbs_get_ctx(ctx);
    case 0: { struct verbs_context *v = verbs_get_ctx_op(ctx, query_port); return v ? (void *)v->query_port : NULL; }
    case 1: { struct verbs_context *v = verbs_get_ctx_op(ctx, query_device_ex); return v ? (void *)v->query_device_ex : NULL; }
    case 2: { struct verbs_context *v = verbs_get_ctx_op(ctx, create_cq_ex); return v ? (void *)v->create_cq_ex : NULL; }
    default: return NULL;
    }
}

EXPORT struct ibv_qp *standin_make_qp(struct ibv_context *ctx, uint32_t qp_num, int qp_type)
{
    struct ibv_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        return NULL;
    qp->context = ctx;
    qp->qp_num = qp_num;
    qp->qp_type = (enum ibv_qp_type)qp_type;
    qp->state = IBV_QPS_RTS;
    return qp;
}

EXPORT struct ibv_cq *standin_make_cq(struct ibv_context *ctx, int cqe)
{
    struct ibv_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return NULL;
    cq->context = ctx;
    cq->cqe = cqe;
    return cq;
}

EXPORT struct ibv_pd *standin_make_pd(struct ibv_context *ctx)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));
    if (!pd)
        return NULL;
    pd->context = ctx;
    return pd;
}

/* sizeof the objects made above, as this header lays them out: 0 = struct ibv_context,
 * 1 = struct ibv_qp, 2 = struct ibv_cq, 3 = struct ibv_srq, 4 = struct ibv_pd; 0 otherwise. */
EXPORT size_t standin_sizeof(int what)
{
    switch (what) {
    case 0: return sizeof(struct ibv_context);
    case 1: return sizeof(struct ibv_qp);
    case 2: return sizeof(struct ibv_cq);
    case 3: return sizeof(struct ibv_srq);
    case 4: return sizeof(struct ibv_pd);
    default: return 0;
    }
}

EXPORT struct ibv_srq *standin_make_srq(struct ibv_context *ctx)
{
    struct ibv_srq *srq = calloc(1, sizeof(*srq));
    if (!srq)
        return NULL;
    srq->context = ctx;
    return srq;
}

/* Frees anything made above (a context: its enclosing verbs_context). */
EXPORT void standin_free(void *p)
{
    if (!p)
        return;
    for (struct standin_ctx_node **n = &contexts; *n; n = &(*n)->next) {
        if (&(*n)->vctx->context == p) {
            struct standin_ctx_node *dead = *n;
            *n = dead->next;
            free(dead->vctx);
            free(dead);
            return;
        }
    }
    free(p);
}

/* ---- the C baseline for the benchmark --------------------------------------------------------- */

/* Per iteration: `chain` RDMA_WRITE WRs (one 64-byte SGE each, only the last signaled) in a
 * stack array, one ibv_post_send (verbs.h's inline: qp->context->ops.post_send), then
 * ibv_poll_cq until that completion is reaped. Returns the completions seen (== iterations),
 * or a negative errno / poll error. */
EXPORT long long standin_c_loop(struct ibv_qp *qp, struct ibv_cq *cq, int iterations, int chain,
                                void *buf, uint32_t lkey)
{
    enum { MAX_CHAIN = 64 };
    struct ibv_send_wr wr[MAX_CHAIN];
    struct ibv_sge sge[MAX_CHAIN];
    struct ibv_send_wr *bad = NULL;
    long long seen = 0;
    if (chain < 1 || chain > MAX_CHAIN)
        return -EINVAL;
    for (int it = 0; it < iterations; it++) {
        for (int i = 0; i < chain; i++) {
            sge[i].addr = (uintptr_t)buf;
            sge[i].length = 64;
            sge[i].lkey = lkey;
            wr[i].wr_id = (uint64_t)it * (uint64_t)chain + (uint64_t)i;
            wr[i].next = i + 1 < chain ? &wr[i + 1] : NULL;
            wr[i].sg_list = &sge[i];
            wr[i].num_sge = 1;
            wr[i].opcode = IBV_WR_RDMA_WRITE;
            wr[i].send_flags = i + 1 == chain ? IBV_SEND_SIGNALED : 0;
            wr[i].wr.rdma.remote_addr = (uintptr_t)buf;
            wr[i].wr.rdma.rkey = lkey;
        }
        int rc = ibv_post_send(qp, wr, &bad);
        if (rc)
            return -rc;
        int n = reap_until(cq, wr[chain - 1].wr_id, &seen);
        if (n < 0)
            return n;
    }
    return seen;
}
