package org.verbs4j.cm;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_SHORT_UNALIGNED;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import org.verbs4j.natives.generated.rdmacm.ibv_ah_attr;
import org.verbs4j.natives.generated.rdmacm.ibv_global_route;
import org.verbs4j.natives.generated.rdmacm.rdma_addr;
import org.verbs4j.natives.generated.rdmacm.rdma_addrinfo;
import org.verbs4j.natives.generated.rdmacm.rdma_cm_event;
import org.verbs4j.natives.generated.rdmacm.rdma_cm_id;
import org.verbs4j.natives.generated.rdmacm.rdma_conn_param;
import org.verbs4j.natives.generated.rdmacm.rdma_route;
import org.verbs4j.natives.generated.rdmacm.rdma_ud_param;
import org.verbs4j.natives.generated.rdmacm.rdmacm_h;
import org.verbs4j.natives.generated.rdmacm.sockaddr_in6;
import org.verbs4j.natives.generated.rdmacm.sockaddr_storage;

/**
 * The one place the connection manager reads and writes librdmacm's structs (through the
 * jextract layouts): socket addresses, {@code struct rdma_cm_id}'s fields, the connection
 * parameters of {@code rdma_connect}/{@code rdma_accept}, the copy of an event. Stateless.
 */
final class CmStructs {
    private static final java.lang.foreign.ValueLayout.OfShort BE_SHORT =
            JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private CmStructs() {}

    /** A {@code struct sockaddr_storage} holding {@code a} (IPv4 or IPv6), in {@code arena}. */
    static MemorySegment sockaddr(Arena arena, InetSocketAddress a) {
        MemorySegment s = arena.allocate(sockaddr_storage.layout());
        InetAddress ip = a.getAddress();
        if (ip == null) {
            throw new org.verbs4j.InvalidRequestException(
                    "rdma_resolve_addr",
                    "the address " + a + " is unresolved",
                    "resolve it first (RdmaAddresses.resolve, or InetAddress.getByName)");
        }
        byte[] raw = ip.getAddress();
        if (raw.length == 4) {
            s.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 0, (short) rdmacm_h.AF_INET());
            s.set(BE_SHORT, 2, (short) a.getPort());
            MemorySegment.copy(raw, 0, s, JAVA_BYTE, 4, 4);
        } else {
            s.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 0, (short) rdmacm_h.AF_INET6());
            s.set(BE_SHORT, 2, (short) a.getPort());
            MemorySegment.copy(raw, 0, s, JAVA_BYTE, sockaddr_in6.sin6_addr$offset(), 16);
            if (ip instanceof java.net.Inet6Address v6) {
                sockaddr_in6.sin6_scope_id(s, v6.getScopeId());
            }
        }
        return s;
    }

    /** The address in a {@code struct sockaddr *}, or null for an unset or non-IP one. */
    static InetSocketAddress address(MemorySegment sa) {
        MemorySegment s = sa.reinterpret(sockaddr_storage.layout().byteSize());
        int family = s.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 0);
        int port = Short.toUnsignedInt(s.get(BE_SHORT, 2));
        byte[] raw;
        if (family == rdmacm_h.AF_INET()) {
            raw = new byte[4];
            MemorySegment.copy(s, JAVA_BYTE, 4, raw, 0, 4);
        } else if (family == rdmacm_h.AF_INET6()) {
            raw = new byte[16];
            MemorySegment.copy(s, JAVA_BYTE, sockaddr_in6.sin6_addr$offset(), raw, 0, 16);
        } else {
            return null;
        }
        try {
            return new InetSocketAddress(InetAddress.getByAddress(raw), port);
        } catch (UnknownHostException e) {
            return null; // cannot happen for 4 or 16 bytes
        }
    }

    // ---- struct rdma_cm_id -----------------------------------------------------------------

    static MemorySegment id(MemorySegment id) {
        return id.reinterpret(rdma_cm_id.layout().byteSize());
    }

    /** {@code id->verbs}: the device context librdmacm bound the id to (NULL before address resolution or bind to a device address). */
    static MemorySegment verbs(MemorySegment id) {
        return rdma_cm_id.verbs(id(id));
    }

    static MemorySegment qp(MemorySegment id) {
        return rdma_cm_id.qp(id(id));
    }

    static void setQp(MemorySegment id, MemorySegment qp) {
        rdma_cm_id.qp(id(id), qp);
    }

    static int portNum(MemorySegment id) {
        return Byte.toUnsignedInt(rdma_cm_id.port_num(id(id)));
    }

    private static MemorySegment routeAddr(MemorySegment id) {
        return rdma_route.addr(rdma_cm_id.route(id(id)));
    }

    static InetSocketAddress localAddress(MemorySegment id) {
        return address(rdma_addr.src_addr(routeAddr(id)));
    }

    static InetSocketAddress peerAddress(MemorySegment id) {
        return address(rdma_addr.dst_addr(routeAddr(id)));
    }

    // ---- struct rdma_conn_param ----------------------------------------------------------------

    /** A filled {@code struct rdma_conn_param} in {@code arena}. */
    static MemorySegment connParam(
            Arena arena,
            byte[] privateData,
            int responderResources,
            int initiatorDepth,
            int retryCount,
            int rnrRetry,
            int qpNum) {
        MemorySegment p = arena.allocate(rdma_conn_param.layout());
        if (privateData != null && privateData.length > 0) {
            MemorySegment data = arena.allocate(privateData.length);
            MemorySegment.copy(privateData, 0, data, JAVA_BYTE, 0, privateData.length);
            rdma_conn_param.private_data(p, data);
            rdma_conn_param.private_data_len(p, (byte) privateData.length);
        }
        rdma_conn_param.responder_resources(p, (byte) responderResources);
        rdma_conn_param.initiator_depth(p, (byte) initiatorDepth);
        rdma_conn_param.flow_control(p, (byte) 1);
        rdma_conn_param.retry_count(p, (byte) retryCount);
        rdma_conn_param.rnr_retry_count(p, (byte) rnrRetry);
        rdma_conn_param.qp_num(p, qpNum);
        return p;
    }

    // ---- struct rdma_cm_event ----------------------------------------------------------------

    /** A Java copy of everything an event says, taken before it is acknowledged. */
    record Copied(
            long id,
            long listenId,
            int event,
            int status,
            byte[] privateData,
            int responderResources,
            int initiatorDepth,
            UdParams ud) {}

    /** The UD parameters of an event ({@code struct rdma_ud_param}: meaningful only for a UD id's ESTABLISHED and MULTICAST_JOIN). */
    record UdParams(org.verbs4j.AddressVector vector, int qpNumber, int qkey) {}

    private static UdParams udParams(MemorySegment ud) {
        MemorySegment ah = rdma_ud_param.ah_attr(ud);
        org.verbs4j.Gid dgid = null;
        int sgidIndex = 0, hop = 0, tclass = 0;
        if (ibv_ah_attr.is_global(ah) != 0) {
            MemorySegment grh = ibv_ah_attr.grh(ah);
            dgid = org.verbs4j.Gid.of(ibv_global_route.dgid(grh).toArray(JAVA_BYTE));
            sgidIndex = Byte.toUnsignedInt(ibv_global_route.sgid_index(grh));
            hop = Byte.toUnsignedInt(ibv_global_route.hop_limit(grh));
            tclass = Byte.toUnsignedInt(ibv_global_route.traffic_class(grh));
        }
        return new UdParams(
                new org.verbs4j.AddressVector(
                        Byte.toUnsignedInt(ibv_ah_attr.port_num(ah)),
                        Short.toUnsignedInt(ibv_ah_attr.dlid(ah)),
                        dgid,
                        sgidIndex,
                        hop,
                        tclass,
                        Byte.toUnsignedInt(ibv_ah_attr.sl(ah))),
                rdma_ud_param.qp_num(ud),
                rdma_ud_param.qkey(ud));
    }

    /** The Q_Key librdmacm (the kernel's CM) gives a UD id's queue pair: {@code rdma_init_qp_attr} for INIT. */
    static int udQkey(MemorySegment id) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = qpAttr(a);
            MemorySegment mask = a.allocate(java.lang.foreign.ValueLayout.JAVA_INT);
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.qp_state(attr, 1); // IBV_QPS_INIT
            org.verbs4j.natives.LibRdmacm.initQpAttr(id, attr, mask);
            return org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.qkey(attr);
        }
    }

    static Copied copy(MemorySegment event) {
        MemorySegment e = event.reinterpret(rdma_cm_event.layout().byteSize());
        MemorySegment conn = rdma_cm_event.param.conn(rdma_cm_event.param(e));
        int type = rdma_cm_event.event(e);
        byte[] data = new byte[0];
        MemorySegment pd = rdma_conn_param.private_data(conn);
        int len = Byte.toUnsignedInt(rdma_conn_param.private_data_len(conn));
        if (pd.address() != 0 && len > 0) {
            data = pd.reinterpret(len).toArray(JAVA_BYTE);
        }
        return new Copied(
                rdma_cm_event.id(e).address(),
                rdma_cm_event.listen_id(e).address(),
                type,
                rdma_cm_event.status(e),
                data,
                Byte.toUnsignedInt(rdma_conn_param.responder_resources(conn)),
                Byte.toUnsignedInt(rdma_conn_param.initiator_depth(conn)),
                type == rdmacm_h.RDMA_CM_EVENT_ESTABLISHED() || type == rdmacm_h.RDMA_CM_EVENT_MULTICAST_JOIN()
                        ? udParams(rdma_cm_event.param.ud(rdma_cm_event.param(e)))
                        : null);
    }

    // ---- struct ibv_qp_attr from rdma_init_qp_attr ----------------------------------------------

    private static final int MASK_TIMEOUT = 1 << 9,
            MASK_RETRY_CNT = 1 << 10,
            MASK_RNR_RETRY = 1 << 11,
            MASK_MAX_QP_RD_ATOMIC = 1 << 13,
            MASK_MAX_DEST_RD_ATOMIC = 1 << 17;

    /**
     * The attributes of the transition to RTR ({@code rts == false}) or RTS that librdmacm computes
     * for {@code id} ({@code rdma_init_qp_attr}: path, QP numbers, PSNs, MTU), with this library's
     * own choices laid over them: the RDMA READ depths, and for RTS the ACK timeout and bounded
     * retry counts (librdmacm would take the peer's request, 7 = forever from rping). Returns the
     * attribute mask; {@code attr} is filled.
     */
    static int transitionAttributes(
            Arena arena, MemorySegment id, MemorySegment attr, boolean rts, int depth, org.verbs4j.ConnectOptions o) {
        MemorySegment mask = arena.allocate(java.lang.foreign.ValueLayout.JAVA_INT);
        org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.qp_state(attr, rts ? 3 : 2);
        org.verbs4j.natives.LibRdmacm.initQpAttr(id, attr, mask);
        int m = mask.get(java.lang.foreign.ValueLayout.JAVA_INT, 0);
        if (rts) {
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.timeout(attr, (byte) o.timeout());
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.retry_cnt(attr, (byte) o.retryCount());
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.rnr_retry(attr, (byte) o.rnrRetry());
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.max_rd_atomic(attr, (byte) depth);
            m |= MASK_TIMEOUT | MASK_RETRY_CNT | MASK_RNR_RETRY | MASK_MAX_QP_RD_ATOMIC;
        } else {
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.max_dest_rd_atomic(attr, (byte) depth);
            org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.min_rnr_timer(attr, (byte) o.minRnrTimer());
            m |= MASK_MAX_DEST_RD_ATOMIC;
        }
        return m;
    }

    static MemorySegment qpAttr(Arena arena) {
        return arena.allocate(org.verbs4j.natives.generated.ibverbs.ibv_qp_attr.layout());
    }

    // ---- struct rdma_addrinfo ----------------------------------------------------------------

    static MemorySegment hints(Arena arena, boolean passive, boolean numeric, int portSpace) {
        MemorySegment h = arena.allocate(rdma_addrinfo.layout());
        rdma_addrinfo.ai_flags(h, (passive ? rdmacm_h.RAI_PASSIVE() : 0) | (numeric ? rdmacm_h.RAI_NUMERICHOST() : 0));
        rdma_addrinfo.ai_port_space(h, portSpace);
        return h;
    }

    /** The addresses of a {@code struct rdma_addrinfo} list: the source ones if passive, else the destinations. */
    static java.util.List<InetSocketAddress> addresses(MemorySegment list, boolean passive) {
        java.util.List<InetSocketAddress> out = new java.util.ArrayList<>();
        MemorySegment p = list;
        while (p.address() != 0) {
            MemorySegment ai = p.reinterpret(rdma_addrinfo.layout().byteSize());
            MemorySegment sa = passive ? rdma_addrinfo.ai_src_addr(ai) : rdma_addrinfo.ai_dst_addr(ai);
            if (sa.address() != 0) {
                InetSocketAddress a = address(sa);
                if (a != null && !out.contains(a)) {
                    out.add(a);
                }
            }
            p = rdma_addrinfo.ai_next(ai);
        }
        return out;
    }

    static MemorySegment pointerSlot(Arena arena) {
        return arena.allocate(ADDRESS);
    }
}
