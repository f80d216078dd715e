package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.generated.ibverbs.ibv_qp_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_qp_cap;
import org.verbs4j.natives.generated.ibverbs.ibv_qp_init_attr;

/**
 * The attribute blocks of a {@link QueuePair}'s state transitions: which fields of
 * {@code struct ibv_qp_attr} each transition sets and the {@code ibv_qp_attr_mask} that names
 * them (RC, UC and UD differ), the RDMA READ/atomic depths clamped to the device's limits, and the
 * decoding of {@code ibv_query_qp}. The modify itself ({@link QueuePair#modify}: pinning, the
 * state, a reset clearing an async failure) stays in the queue pair. Control path: each call
 * allocates its attribute block in a confined arena; called by the queue pair's owner.
 */
final class QueuePairTransitions {
    static final int MASK_STATE = 1,
            MASK_ACCESS_FLAGS = 1 << 3,
            MASK_PKEY_INDEX = 1 << 4,
            MASK_PORT = 1 << 5,
            MASK_QKEY = 1 << 6,
            MASK_AV = 1 << 7,
            MASK_PATH_MTU = 1 << 8,
            MASK_TIMEOUT = 1 << 9,
            MASK_RETRY_CNT = 1 << 10,
            MASK_RNR_RETRY = 1 << 11,
            MASK_RQ_PSN = 1 << 12,
            MASK_MAX_QP_RD_ATOMIC = 1 << 13,
            MASK_MIN_RNR_TIMER = 1 << 15,
            MASK_SQ_PSN = 1 << 16,
            MASK_MAX_DEST_RD_ATOMIC = 1 << 17,
            MASK_CAP = 1 << 19,
            MASK_DEST_QPN = 1 << 20;

    private QueuePairTransitions() {}

    /** See {@link QueuePair#toInit}. */
    static void toInit(QueuePair qp, int port, Set<Access> remoteAccess) {
        if (qp.type() == QueuePairType.UD) {
            throw VerbsException.create(
                    "ibv_modify_qp",
                    Errno.EINVAL,
                    "a UD queue pair takes a Q_Key, not access flags",
                    "use toInitUd(port, qkey)");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ibv_qp_attr.layout());
            ibv_qp_attr.pkey_index(attr, (short) 0);
            ibv_qp_attr.port_num(attr, (byte) port);
            ibv_qp_attr.qp_access_flags(attr, Access.mask(remoteAccess));
            qp.modify(attr, MASK_PKEY_INDEX | MASK_PORT | MASK_ACCESS_FLAGS, QueuePairState.INIT);
            qp.port = port;
        }
    }

    /** See {@link QueuePair#activateUd}. */
    static void activateUd(QueuePair qp, int port, int qkey, int sqPsn) {
        if (qp.type() != QueuePairType.UD) {
            throw VerbsException.create(
                    "ibv_modify_qp", Errno.EINVAL, "activateUd is for UD queue pairs", "use connect()");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ibv_qp_attr.layout());
            ibv_qp_attr.pkey_index(attr, (short) 0);
            ibv_qp_attr.port_num(attr, (byte) port);
            ibv_qp_attr.qkey(attr, qkey);
            qp.modify(attr, MASK_PKEY_INDEX | MASK_PORT | MASK_QKEY, QueuePairState.INIT);
            qp.port = port;
            attr.fill((byte) 0);
            qp.modify(attr, 0, QueuePairState.RTR);
            attr.fill((byte) 0);
            ibv_qp_attr.sq_psn(attr, sqPsn & 0xffffff);
            qp.modify(attr, MASK_SQ_PSN, QueuePairState.RTS);
        }
    }

    static int rdAtomicDepth(Context ctx, ConnectOptions o, boolean initiator) {
        DeviceAttributes d = ctx.queryDevice();
        int max = initiator ? d.maxQpInitRdAtom() : d.maxQpRdAtom();
        int want = o.maxRdAtomic() > 0 ? o.maxRdAtomic() : 16;
        return Math.max(0, Math.min(want, Math.min(max, 255)));
    }

    /** See {@link QueuePair#toRtr}. */
    static void toRtr(QueuePair qp, QueuePairEndpoint remote, ConnectOptions o) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ibv_qp_attr.layout());
            int mask = rtrAttributes(attr, qp.pd.context(), qp.port, remote, o);
            if (qp.type() == QueuePairType.RC) {
                ibv_qp_attr.max_dest_rd_atomic(attr, (byte) rdAtomicDepth(qp.pd.context(), o, false));
                ibv_qp_attr.min_rnr_timer(attr, (byte) o.minRnrTimer());
                mask |= MASK_MAX_DEST_RD_ATOMIC | MASK_MIN_RNR_TIMER;
            }
            qp.modify(attr, mask, QueuePairState.RTR);
        }
    }

    /** The INIT->RTR attributes every connected type sets (address vector, MTU, remote QPN and PSN); their mask. */
    static int rtrAttributes(MemorySegment attr, Context ctx, int port, QueuePairEndpoint remote, ConnectOptions o) {
        Mtu mtu = o.mtu() != null ? o.mtu() : Mtu.min(ctx.queryPort(port).activeMtu(), remote.mtu());
        ibv_qp_attr.path_mtu(attr, mtu.value());
        ibv_qp_attr.dest_qp_num(attr, remote.qpNumber());
        ibv_qp_attr.rq_psn(attr, remote.psn());
        boolean global = remote.gid() != null && o.gidIndex() >= 0;
        new AddressVector(
                        port,
                        remote.lid(),
                        global ? remote.gid() : null,
                        Math.max(0, o.gidIndex()),
                        o.hopLimit(),
                        o.trafficClass(),
                        o.serviceLevel())
                .write(ibv_qp_attr.ah_attr(attr));
        return MASK_AV | MASK_PATH_MTU | MASK_DEST_QPN | MASK_RQ_PSN;
    }

    /** See {@link XrcReceiveQueuePair#connect}: RESET->INIT->RTR of an XRC receiving end. */
    static void connectXrcReceiver(XrcReceiveQueuePair qp, int port, QueuePairEndpoint remote, ConnectOptions o) {
        Context ctx = qp.domain().context();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ibv_qp_attr.layout());
            ibv_qp_attr.qp_state(attr, QueuePairState.INIT.value());
            ibv_qp_attr.pkey_index(attr, (short) 0);
            ibv_qp_attr.port_num(attr, (byte) port);
            qp.modify(attr, MASK_STATE | MASK_PKEY_INDEX | MASK_PORT | MASK_ACCESS_FLAGS, QueuePairState.INIT);
            attr.fill((byte) 0);
            ibv_qp_attr.qp_state(attr, QueuePairState.RTR.value());
            int mask = rtrAttributes(attr, ctx, port, remote, o);
            ibv_qp_attr.max_dest_rd_atomic(attr, (byte) rdAtomicDepth(ctx, o, false));
            ibv_qp_attr.min_rnr_timer(attr, (byte) o.minRnrTimer());
            qp.modify(attr, MASK_STATE | mask | MASK_MAX_DEST_RD_ATOMIC | MASK_MIN_RNR_TIMER, QueuePairState.RTR);
        }
    }

    /** See {@link QueuePair#toRts}. */
    static void toRts(QueuePair qp, int sqPsn, ConnectOptions o) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ibv_qp_attr.layout());
            ibv_qp_attr.sq_psn(attr, sqPsn & 0xffffff);
            int mask = MASK_SQ_PSN;
            if (qp.type() == QueuePairType.RC || qp.type() == QueuePairType.XRC_SEND) {
                ibv_qp_attr.timeout(attr, (byte) o.timeout());
                ibv_qp_attr.retry_cnt(attr, (byte) o.retryCount());
                ibv_qp_attr.rnr_retry(attr, (byte) o.rnrRetry());
                ibv_qp_attr.max_rd_atomic(attr, (byte) rdAtomicDepth(qp.pd.context(), o, true));
                mask |= MASK_TIMEOUT | MASK_RETRY_CNT | MASK_RNR_RETRY | MASK_MAX_QP_RD_ATOMIC;
            }
            qp.modify(attr, mask, QueuePairState.RTS);
        }
    }

    /** A transition that sets nothing but the state (to ERR, or to RESET). */
    static void move(QueuePair qp, QueuePairState to) {
        try (Arena a = Arena.ofConfined()) {
            qp.modify(a.allocate(ibv_qp_attr.layout()), 0, to);
        }
    }

    /** {@code ibv_query_qp} of {@code qp} (an {@code ibv_qp *} the caller keeps pinned), decoded. */
    static QueuePairAttributes query(MemorySegment qp) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ibv_qp_attr.layout());
            MemorySegment init = a.allocate(ibv_qp_init_attr.layout());
            int mask = MASK_STATE
                    | MASK_PATH_MTU
                    | MASK_DEST_QPN
                    | MASK_RQ_PSN
                    | MASK_SQ_PSN
                    | MASK_ACCESS_FLAGS
                    | MASK_PORT
                    | MASK_TIMEOUT
                    | MASK_RETRY_CNT
                    | MASK_RNR_RETRY
                    | MASK_QKEY
                    | MASK_CAP
                    | MASK_MAX_QP_RD_ATOMIC
                    | MASK_MAX_DEST_RD_ATOMIC;
            LibIbverbs.queryQp(qp, attr, mask, init);
            QueuePairState s = QueuePairState.of(ibv_qp_attr.qp_state(attr));
            MemorySegment cap = ibv_qp_attr.cap(attr);
            return new QueuePairAttributes(
                    s,
                    ibv_qp_attr.path_mtu(attr) == 0 ? null : Mtu.of(ibv_qp_attr.path_mtu(attr)),
                    ibv_qp_attr.dest_qp_num(attr),
                    ibv_qp_attr.rq_psn(attr),
                    ibv_qp_attr.sq_psn(attr),
                    ibv_qp_attr.qp_access_flags(attr),
                    Byte.toUnsignedInt(ibv_qp_attr.port_num(attr)),
                    Byte.toUnsignedInt(ibv_qp_attr.timeout(attr)),
                    Byte.toUnsignedInt(ibv_qp_attr.retry_cnt(attr)),
                    Byte.toUnsignedInt(ibv_qp_attr.rnr_retry(attr)),
                    ibv_qp_attr.qkey(attr),
                    Byte.toUnsignedInt(ibv_qp_attr.max_rd_atomic(attr)),
                    Byte.toUnsignedInt(ibv_qp_attr.max_dest_rd_atomic(attr)),
                    ibv_qp_cap.max_send_wr(cap),
                    ibv_qp_cap.max_recv_wr(cap),
                    ibv_qp_cap.max_inline_data(cap));
        }
    }
}
