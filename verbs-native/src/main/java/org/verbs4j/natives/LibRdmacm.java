package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * The librdmacm functions verbs4j's connection manager uses, each resolved once into a
 * {@code static final} downcall handle (linked through {@link NativeBinding}) that captures errno at
 * the call; the first argument of every handle is the capture segment.
 *
 * <p>librdmacm reports a failure as {@code -1} with errno set (its {@code ERR()} macro); the thin
 * methods below turn that into a {@link VerbsFailure} naming the function and the errno captured by
 * the same call. Touching this class loads librdmacm: check {@link NativeLibraries#rdmacm()} first.
 * Stateless; any thread may call it (librdmacm's own locking applies; verbs-core serialises the
 * calls on the ids of one event channel).
 */
public final class LibRdmacm {
    private static final SymbolLookup LIB = NativeLibraries.rdmacmOrThrow();

    private LibRdmacm() {}

    private static MethodHandle bind(String name, MemoryLayout ret, MemoryLayout... args) {
        return NativeBinding.symbol(
                LIB, name, ret == null ? FunctionDescriptor.ofVoid(args) : FunctionDescriptor.of(ret, args));
    }

    public static final MethodHandle RDMA_CREATE_EVENT_CHANNEL = bind("rdma_create_event_channel", ADDRESS);
    public static final MethodHandle RDMA_DESTROY_EVENT_CHANNEL = bind("rdma_destroy_event_channel", null, ADDRESS);
    public static final MethodHandle RDMA_CREATE_ID =
            bind("rdma_create_id", JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT);
    public static final MethodHandle RDMA_DESTROY_ID = bind("rdma_destroy_id", JAVA_INT, ADDRESS);
    public static final MethodHandle RDMA_BIND_ADDR = bind("rdma_bind_addr", JAVA_INT, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_RESOLVE_ADDR =
            bind("rdma_resolve_addr", JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT);
    public static final MethodHandle RDMA_RESOLVE_ROUTE = bind("rdma_resolve_route", JAVA_INT, ADDRESS, JAVA_INT);
    public static final MethodHandle RDMA_CREATE_QP = bind("rdma_create_qp", JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_ESTABLISH = bind("rdma_establish", JAVA_INT, ADDRESS);
    public static final MethodHandle RDMA_CONNECT = bind("rdma_connect", JAVA_INT, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_LISTEN = bind("rdma_listen", JAVA_INT, ADDRESS, JAVA_INT);
    public static final MethodHandle RDMA_ACCEPT = bind("rdma_accept", JAVA_INT, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_REJECT = bind("rdma_reject", JAVA_INT, ADDRESS, ADDRESS, JAVA_BYTE);
    public static final MethodHandle RDMA_DISCONNECT = bind("rdma_disconnect", JAVA_INT, ADDRESS);
    public static final MethodHandle RDMA_GET_CM_EVENT = bind("rdma_get_cm_event", JAVA_INT, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_ACK_CM_EVENT = bind("rdma_ack_cm_event", JAVA_INT, ADDRESS);
    public static final MethodHandle RDMA_EVENT_STR = bind("rdma_event_str", ADDRESS, JAVA_INT);
    public static final MethodHandle RDMA_SET_OPTION =
            bind("rdma_set_option", JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG);
    public static final MethodHandle RDMA_INIT_QP_ATTR = bind("rdma_init_qp_attr", JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_GETADDRINFO =
            bind("rdma_getaddrinfo", JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_FREEADDRINFO = bind("rdma_freeaddrinfo", null, ADDRESS);
    public static final MethodHandle RDMA_JOIN_MULTICAST =
            bind("rdma_join_multicast", JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
    public static final MethodHandle RDMA_LEAVE_MULTICAST = bind("rdma_leave_multicast", JAVA_INT, ADDRESS, ADDRESS);

    /** {@code rdma_port_space} values (rdma_cma.h). */
    public static final int RDMA_PS_TCP = 0x0106, RDMA_PS_UDP = 0x0111;
    /** {@code rdma_set_option} levels and names (rdma_cma.h). */
    public static final int RDMA_OPTION_ID = 0, RDMA_OPTION_ID_REUSEADDR = 1, RDMA_OPTION_ID_ACK_TIMEOUT = 3;
    /** {@code rdma_addrinfo.ai_flags} (rdma_cma.h). */
    public static final int RAI_PASSIVE = 1, RAI_NUMERICHOST = 2;

    /** Shape "0, or -1 with errno": returns on 0, else a {@link VerbsFailure}. */
    public static void check(String verb, int rc, MemorySegment capture) {
        if (rc != 0) {
            int e = Errno.captured(capture);
            throw Failures.of(verb, e != 0 ? e : (rc > 0 ? rc : Errno.EINVAL), e != 0 ? null : "returned " + rc);
        }
    }

    public static MemorySegment createEventChannel() {
        MemorySegment cap = Errno.captureSegment();
        MemorySegment ch;
        try {
            ch = (MemorySegment) RDMA_CREATE_EVENT_CHANNEL.invokeExact(cap);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return LibIbverbs.checkPtr("rdma_create_event_channel", ch, cap);
    }

    public static void destroyEventChannel(MemorySegment channel) {
        try {
            RDMA_DESTROY_EVENT_CHANNEL.invokeExact(Errno.captureSegment(), channel);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code rdma_create_id(channel, &id, NULL, ps)}: the new {@code struct rdma_cm_id *}. */
    public static MemorySegment createId(MemorySegment channel, MemorySegment idOut, int ps) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_CREATE_ID.invokeExact(cap, channel, idOut, MemorySegment.NULL, ps);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_create_id", rc, cap);
        return idOut.get(ADDRESS, 0);
    }

    /** The shape {@code int f(id)}. */
    private static void idCall(String verb, MethodHandle h, MemorySegment id) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, id);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check(verb, rc, cap);
    }

    /** The shape {@code int f(id, pointer)}. */
    private static void idCall(String verb, MethodHandle h, MemorySegment id, MemorySegment p) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, id, p);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check(verb, rc, cap);
    }

    /** The shape {@code int f(id, int)}. */
    private static void idCall(String verb, MethodHandle h, MemorySegment id, int v) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, id, v);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check(verb, rc, cap);
    }

    public static void destroyId(MemorySegment id) {
        idCall("rdma_destroy_id", RDMA_DESTROY_ID, id);
    }

    public static void bindAddr(MemorySegment id, MemorySegment sockaddr) {
        idCall("rdma_bind_addr", RDMA_BIND_ADDR, id, sockaddr);
    }

    public static void resolveAddr(MemorySegment id, MemorySegment src, MemorySegment dst, int timeoutMs) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_RESOLVE_ADDR.invokeExact(cap, id, src, dst, timeoutMs);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_resolve_addr", rc, cap);
    }

    public static void resolveRoute(MemorySegment id, int timeoutMs) {
        idCall("rdma_resolve_route", RDMA_RESOLVE_ROUTE, id, timeoutMs);
    }

    public static void createQp(MemorySegment id, MemorySegment pd, MemorySegment initAttr) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_CREATE_QP.invokeExact(cap, id, pd, initAttr);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_create_qp", rc, cap);
    }

    public static void connect(MemorySegment id, MemorySegment connParam) {
        idCall("rdma_connect", RDMA_CONNECT, id, connParam);
    }

    public static void listen(MemorySegment id, int backlog) {
        idCall("rdma_listen", RDMA_LISTEN, id, backlog);
    }

    public static void accept(MemorySegment id, MemorySegment connParam) {
        idCall("rdma_accept", RDMA_ACCEPT, id, connParam);
    }

    public static void reject(MemorySegment id, MemorySegment privateData, int length) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_REJECT.invokeExact(cap, id, privateData, (byte) length);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_reject", rc, cap);
    }

    /** {@code rdma_join_multicast(id, addr, NULL)}: the join completes with MULTICAST_JOIN (or MULTICAST_ERROR). */
    public static void joinMulticast(MemorySegment id, MemorySegment sockaddr) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_JOIN_MULTICAST.invokeExact(cap, id, sockaddr, MemorySegment.NULL);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_join_multicast", rc, cap);
    }

    public static void leaveMulticast(MemorySegment id, MemorySegment sockaddr) {
        idCall("rdma_leave_multicast", RDMA_LEAVE_MULTICAST, id, sockaddr);
    }

    public static void establish(MemorySegment id) {
        idCall("rdma_establish", RDMA_ESTABLISH, id);
    }

    public static void disconnect(MemorySegment id) {
        idCall("rdma_disconnect", RDMA_DISCONNECT, id);
    }

    /**
     * {@code rdma_get_cm_event} on a channel whose fd is non-blocking: the event, or
     * {@code MemorySegment.NULL} when none is queued (EAGAIN).
     */
    public static MemorySegment tryGetCmEvent(MemorySegment channel, MemorySegment eventOut) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_GET_CM_EVENT.invokeExact(cap, channel, eventOut);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        if (rc != 0) {
            int e = Errno.captured(cap);
            if (e == Errno.EAGAIN || e == Errno.EINTR) {
                return MemorySegment.NULL;
            }
            check("rdma_get_cm_event", rc, cap);
        }
        return eventOut.get(ADDRESS, 0);
    }

    public static void ackCmEvent(MemorySegment event) {
        idCall("rdma_ack_cm_event", RDMA_ACK_CM_EVENT, event);
    }

    /** {@code rdma_event_str}: the event's name, e.g. {@code RDMA_CM_EVENT_REJECTED}. */
    public static String eventStr(int event) {
        MemorySegment s;
        try {
            s = (MemorySegment) RDMA_EVENT_STR.invokeExact(Errno.captureSegment(), event);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return s.address() == 0L ? "UNKNOWN EVENT " + event : s.reinterpret(256).getString(0);
    }

    /** {@code rdma_set_option(id, level, name, &value, sizeof(int|uint8))}. */
    public static void setOption(MemorySegment id, int level, int name, MemorySegment value) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_SET_OPTION.invokeExact(cap, id, level, name, value, value.byteSize());
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_set_option", rc, cap);
    }

    public static void initQpAttr(MemorySegment id, MemorySegment qpAttr, MemorySegment maskOut) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_INIT_QP_ATTR.invokeExact(cap, id, qpAttr, maskOut);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        check("rdma_init_qp_attr", rc, cap);
    }

    /**
     * {@code rdma_getaddrinfo}: 0, or the failure. librdmacm returns -1 with errno, or
     * passes on getaddrinfo's negative EAI_ code (then errno says nothing: ENOENT is reported
     * with the code in the detail).
     */
    public static void getAddrInfo(
            MemorySegment node, MemorySegment service, MemorySegment hints, MemorySegment resOut, String what) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) RDMA_GETADDRINFO.invokeExact(cap, node, service, hints, resOut);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        if (rc == 0) {
            return;
        }
        int e = Errno.captured(cap);
        if (rc == -1 && e != 0) {
            throw Failures.create("rdma_getaddrinfo", e, what + " did not resolve", null);
        }
        throw Failures.create(
                "rdma_getaddrinfo",
                Errno.ENOENT,
                what + " did not resolve (getaddrinfo error " + rc + ")",
                "check the name, or pass a numeric address");
    }

    public static void freeAddrInfo(MemorySegment res) {
        try {
            RDMA_FREEADDRINFO.invokeExact(Errno.captureSegment(), res);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }
}
