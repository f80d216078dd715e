package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * The exported (non-inline) libibverbs functions, each a {@code static final} downcall handle,
 * linked on its first call ({@link NativeBinding}), that captures errno at the call; the first
 * argument of every handle is the capture segment ({@link Errno#captureSegment()}).
 *
 * <p>The thin static methods below call a handle, turn a {@code NULL} pointer or a non-zero
 * return into a {@link VerbsFailure} naming the verb and the errno, and are the raw escape
 * hatch for code that needs a verb the public API does not wrap. Touching this class loads
 * libibverbs: check {@link NativeLibraries#ibverbs()} first (the public API does), else the class
 * initialiser throws the {@link VerbsFailure} that says what to install.
 * Stateless; any thread may call it.
 */
public final class LibIbverbs {
    private static final SymbolLookup LIB = NativeLibraries.ibverbsOrThrow();

    private LibIbverbs() {}

    private static MethodHandle bind(String name, FunctionDescriptor fd) {
        return NativeBinding.symbol(LIB, name, fd);
    }

    private static MethodHandle bindOptional(String name, FunctionDescriptor fd) {
        return NativeBinding.optionalSymbol(LIB, name, fd);
    }

    private static FunctionDescriptor fn(java.lang.foreign.MemoryLayout ret, java.lang.foreign.MemoryLayout... args) {
        return FunctionDescriptor.of(ret, args);
    }

    private static FunctionDescriptor proc(java.lang.foreign.MemoryLayout... args) {
        return FunctionDescriptor.ofVoid(args);
    }

    // Every handle: (MemorySegment errnoCapture, args...) -> result.
    public static final MethodHandle IBV_GET_DEVICE_LIST = bind("ibv_get_device_list", fn(ADDRESS, ADDRESS));
    public static final MethodHandle IBV_FREE_DEVICE_LIST = bind("ibv_free_device_list", proc(ADDRESS));
    public static final MethodHandle IBV_GET_DEVICE_NAME = bind("ibv_get_device_name", fn(ADDRESS, ADDRESS));
    public static final MethodHandle IBV_GET_DEVICE_GUID = bind("ibv_get_device_guid", fn(JAVA_LONG, ADDRESS));
    public static final MethodHandle IBV_OPEN_DEVICE = bind("ibv_open_device", fn(ADDRESS, ADDRESS));
    public static final MethodHandle IBV_CLOSE_DEVICE = bind("ibv_close_device", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_QUERY_DEVICE = bind("ibv_query_device", fn(JAVA_INT, ADDRESS, ADDRESS));
    /** The exported compat {@code ibv_query_port@IBVERBS_1.1} (48-byte attr); prefer {@link InlineVerbs#queryPort}. */
    public static final MethodHandle IBV_QUERY_PORT_COMPAT =
            bind("ibv_query_port", fn(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS));

    public static final MethodHandle IBV_QUERY_GID =
            bind("ibv_query_gid", fn(JAVA_INT, ADDRESS, JAVA_BYTE, JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_QUERY_PKEY =
            bind("ibv_query_pkey", fn(JAVA_INT, ADDRESS, JAVA_BYTE, JAVA_INT, ADDRESS));
    /** {@code _ibv_query_gid_ex(ctx, port, index, entry, flags, entry_size)} (IBVERBS_1.11), or null. */
    public static final MethodHandle IBV_QUERY_GID_EX =
            bindOptional("_ibv_query_gid_ex", fn(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG));
    /** {@code _ibv_query_gid_table(ctx, entries, max, flags, entry_size)} (IBVERBS_1.11), or null. */
    public static final MethodHandle IBV_QUERY_GID_TABLE =
            bindOptional("_ibv_query_gid_table", fn(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_LONG));

    public static final MethodHandle IBV_ALLOC_PD = bind("ibv_alloc_pd", fn(ADDRESS, ADDRESS));
    public static final MethodHandle IBV_DEALLOC_PD = bind("ibv_dealloc_pd", fn(JAVA_INT, ADDRESS));
    /** {@code ibv_reg_mr(pd, addr, length, access)}; the address travels as a {@code long}. */
    public static final MethodHandle IBV_REG_MR =
            bind("ibv_reg_mr", fn(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT));
    /** {@code ibv_reg_mr_iova2} (IBVERBS_1.8), or null. */
    public static final MethodHandle IBV_REG_MR_IOVA2 =
            bindOptional("ibv_reg_mr_iova2", fn(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT));
    /** {@code ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access)} (IBVERBS_1.12), or null. */
    public static final MethodHandle IBV_REG_DMABUF_MR = bindOptional(
            "ibv_reg_dmabuf_mr", fn(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT));

    public static final MethodHandle IBV_DEREG_MR = bind("ibv_dereg_mr", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_CREATE_COMP_CHANNEL = bind("ibv_create_comp_channel", fn(ADDRESS, ADDRESS));
    public static final MethodHandle IBV_DESTROY_COMP_CHANNEL = bind("ibv_destroy_comp_channel", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_CREATE_CQ =
            bind("ibv_create_cq", fn(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_RESIZE_CQ = bind("ibv_resize_cq", fn(JAVA_INT, ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_DESTROY_CQ = bind("ibv_destroy_cq", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_GET_CQ_EVENT =
            bind("ibv_get_cq_event", fn(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_ACK_CQ_EVENTS = bind("ibv_ack_cq_events", proc(ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_CREATE_QP = bind("ibv_create_qp", fn(ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_MODIFY_QP = bind("ibv_modify_qp", fn(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_QUERY_QP =
            bind("ibv_query_qp", fn(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_DESTROY_QP = bind("ibv_destroy_qp", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_CREATE_SRQ = bind("ibv_create_srq", fn(ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_MODIFY_SRQ = bind("ibv_modify_srq", fn(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_QUERY_SRQ = bind("ibv_query_srq", fn(JAVA_INT, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_DESTROY_SRQ = bind("ibv_destroy_srq", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_CREATE_AH = bind("ibv_create_ah", fn(ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_DESTROY_AH = bind("ibv_destroy_ah", fn(JAVA_INT, ADDRESS));
    public static final MethodHandle IBV_ATTACH_MCAST =
            bind("ibv_attach_mcast", fn(JAVA_INT, ADDRESS, ADDRESS, JAVA_SHORT));
    public static final MethodHandle IBV_DETACH_MCAST =
            bind("ibv_detach_mcast", fn(JAVA_INT, ADDRESS, ADDRESS, JAVA_SHORT));
    public static final MethodHandle IBV_INIT_AH_FROM_WC =
            bind("ibv_init_ah_from_wc", fn(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_GET_ASYNC_EVENT = bind("ibv_get_async_event", fn(JAVA_INT, ADDRESS, ADDRESS));
    public static final MethodHandle IBV_ACK_ASYNC_EVENT = bind("ibv_ack_async_event", proc(ADDRESS));
    public static final MethodHandle IBV_FORK_INIT = bind("ibv_fork_init", fn(JAVA_INT));
    public static final MethodHandle IBV_WC_STATUS_STR = bind("ibv_wc_status_str", fn(ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_EVENT_TYPE_STR = bind("ibv_event_type_str", fn(ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_NODE_TYPE_STR = bind("ibv_node_type_str", fn(ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_PORT_STATE_STR = bind("ibv_port_state_str", fn(ADDRESS, JAVA_INT));
    public static final MethodHandle IBV_RATE_TO_MBPS = bind("ibv_rate_to_mbps", fn(JAVA_INT, JAVA_INT));
    /** {@code ibv_qp_to_qp_ex} (IBVERBS_1.6), or null. */
    public static final MethodHandle IBV_QP_TO_QP_EX = bindOptional("ibv_qp_to_qp_ex", fn(ADDRESS, ADDRESS));

    // ---- checks ---------------------------------------------------------------------------

    /** Returns {@code p}, or throws naming the verb and the errno captured by the same call. */
    public static MemorySegment checkPtr(String verb, MemorySegment p, MemorySegment capture) {
        if (p.address() == 0L) {
            int e = Errno.captured(capture);
            throw Failures.of(verb, e == 0 ? Errno.EINVAL : e, e == 0 ? "returned NULL without setting errno" : null);
        }
        return p;
    }

    /**
     * For verbs that return 0 or an errno: returns normally on 0, else throws. A positive return is
     * the errno itself (libibverbs' convention); a negative one falls back to the captured errno.
     */
    public static void checkRc(String verb, int rc, MemorySegment capture) {
        if (rc != 0) {
            int e = rc > 0 ? rc : Errno.captured(capture);
            throw Failures.of(verb, e != 0 ? e : -rc);
        }
    }

    private static String cString(MemorySegment s) {
        return s.address() == 0L ? null : s.reinterpret(Integer.MAX_VALUE).getString(0);
    }

    // ---- one helper per wrapper shape -------------------------------------------------------
    //
    // Each shape is one body: capture errno, invokeExact, check, rethrow. A shape has one
    // overload per argument list that more than one verb shares; the handle's exact type is
    // still checked by invokeExact at every call. No helper allocates. A verb whose argument
    // list no other verb shares calls its handle in place and ends in the same check
    // (checkPtr / checkRc).

    /** An optional verb's handle must be there: else EOPNOTSUPP naming the library version it needs. */
    private static void requireOptional(MethodHandle h, String verb, String since) {
        if (h == null) {
            throw Failures.of(verb, Errno.EOPNOTSUPP, "libibverbs is older than " + since);
        }
    }

    /** Shape "pointer or NULL + errno": the pointer, or a {@link VerbsFailure}. */
    private static MemorySegment pointer(String verb, MethodHandle h, MemorySegment a) {
        MemorySegment cap = Errno.captureSegment();
        MemorySegment p;
        try {
            p = (MemorySegment) h.invokeExact(cap, a);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return checkPtr(verb, p, cap);
    }

    private static MemorySegment pointer(String verb, MethodHandle h, MemorySegment a, MemorySegment b) {
        MemorySegment cap = Errno.captureSegment();
        MemorySegment p;
        try {
            p = (MemorySegment) h.invokeExact(cap, a, b);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return checkPtr(verb, p, cap);
    }

    /** Shape "0 or errno": returns on 0, else a {@link VerbsFailure}. */
    private static void status(String verb, MethodHandle h, MemorySegment a) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, a);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc(verb, rc, cap);
    }

    private static void status(String verb, MethodHandle h, MemorySegment a, MemorySegment b) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, a, b);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc(verb, rc, cap);
    }

    private static void status(String verb, MethodHandle h, MemorySegment a, MemorySegment b, MemorySegment c) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, a, b, c);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc(verb, rc, cap);
    }

    /** Shape "0 or errno, without throwing": 0, or the errno (EIO where none was set). */
    private static int tryStatus(MethodHandle h, MemorySegment a, MemorySegment b) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, a, b);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return tryResult(rc, cap);
    }

    private static int tryStatus(MethodHandle h, MemorySegment a, MemorySegment b, MemorySegment c) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(cap, a, b, c);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return tryResult(rc, cap);
    }

    private static int tryResult(int rc, MemorySegment cap) {
        if (rc == 0) {
            return 0;
        }
        int e = Errno.captured(cap);
        return e > 0 ? e : Errno.EIO;
    }

    /** Shape "void": the verb cannot fail. */
    private static void run(MethodHandle h, MemorySegment a) {
        try {
            h.invokeExact(Errno.captureSegment(), a);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** Shape "static C string of an enum value" ({@code ibv_*_str}). */
    private static String text(MethodHandle h, int value) {
        MemorySegment s;
        try {
            s = (MemorySegment) h.invokeExact(Errno.captureSegment(), value);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return cString(s);
    }

    // ---- thin wrappers ----------------------------------------------------------------------

    /** {@code ibv_get_device_list}: the NULL-terminated array, its length written to {@code numOut}. */
    public static MemorySegment getDeviceList(MemorySegment numOut) {
        return pointer("ibv_get_device_list", IBV_GET_DEVICE_LIST, numOut);
    }

    public static void freeDeviceList(MemorySegment list) {
        run(IBV_FREE_DEVICE_LIST, list);
    }

    public static String getDeviceName(MemorySegment device) {
        MemorySegment s;
        try {
            s = (MemorySegment) IBV_GET_DEVICE_NAME.invokeExact(Errno.captureSegment(), device);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return cString(s);
    }

    /** The node GUID in host byte order (the verb returns it big-endian). */
    public static long getDeviceGuid(MemorySegment device) {
        try {
            return Long.reverseBytes((long) IBV_GET_DEVICE_GUID.invokeExact(Errno.captureSegment(), device));
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    public static MemorySegment openDevice(MemorySegment device) {
        return pointer("ibv_open_device", IBV_OPEN_DEVICE, device);
    }

    public static void closeDevice(MemorySegment ctx) {
        status("ibv_close_device", IBV_CLOSE_DEVICE, ctx);
    }

    public static void queryDevice(MemorySegment ctx, MemorySegment attr) {
        status("ibv_query_device", IBV_QUERY_DEVICE, ctx, attr);
    }

    public static void queryGid(MemorySegment ctx, int port, int index, MemorySegment gid16) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) IBV_QUERY_GID.invokeExact(cap, ctx, (byte) port, index, gid16);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc("ibv_query_gid", rc, cap);
    }

    /** {@code ibv_query_gid_ex}: fills a 32-byte {@code ibv_gid_entry}; throws (ENODATA for an empty slot). */
    public static void queryGidEx(MemorySegment ctx, int port, int index, MemorySegment entry) {
        requireOptional(IBV_QUERY_GID_EX, "ibv_query_gid_ex", "IBVERBS_1.11");
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) IBV_QUERY_GID_EX.invokeExact(cap, ctx, port, index, entry, 0, 32L);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc("ibv_query_gid_ex", rc, cap);
    }

    public static MemorySegment allocPd(MemorySegment ctx) {
        return pointer("ibv_alloc_pd", IBV_ALLOC_PD, ctx);
    }

    public static void deallocPd(MemorySegment pd) {
        status("ibv_dealloc_pd", IBV_DEALLOC_PD, pd);
    }

    /** The exported {@code ibv_reg_mr}; see {@link InlineVerbs#regMr} for the macro's choice. */
    public static MemorySegment regMr(MemorySegment pd, long addr, long length, int access) {
        MemorySegment cap = Errno.captureSegment();
        MemorySegment mr;
        try {
            mr = (MemorySegment) IBV_REG_MR.invokeExact(cap, pd, addr, length, access);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return checkPtr("ibv_reg_mr", mr, cap);
    }

    public static MemorySegment regMrIova2(MemorySegment pd, long addr, long length, long iova, int access) {
        requireOptional(IBV_REG_MR_IOVA2, "ibv_reg_mr_iova2", "IBVERBS_1.8");
        MemorySegment cap = Errno.captureSegment();
        MemorySegment mr;
        try {
            mr = (MemorySegment) IBV_REG_MR_IOVA2.invokeExact(cap, pd, addr, length, iova, access);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return checkPtr("ibv_reg_mr_iova2", mr, cap);
    }

    public static MemorySegment regDmabufMr(MemorySegment pd, long offset, long length, long iova, int fd, int access) {
        requireOptional(IBV_REG_DMABUF_MR, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
        MemorySegment cap = Errno.captureSegment();
        MemorySegment mr;
        try {
            mr = (MemorySegment) IBV_REG_DMABUF_MR.invokeExact(cap, pd, offset, length, iova, fd, access);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return checkPtr("ibv_reg_dmabuf_mr", mr, cap);
    }

    public static void deregMr(MemorySegment mr) {
        status("ibv_dereg_mr", IBV_DEREG_MR, mr);
    }

    public static MemorySegment createCompChannel(MemorySegment ctx) {
        return pointer("ibv_create_comp_channel", IBV_CREATE_COMP_CHANNEL, ctx);
    }

    public static void destroyCompChannel(MemorySegment ch) {
        status("ibv_destroy_comp_channel", IBV_DESTROY_COMP_CHANNEL, ch);
    }

    public static MemorySegment createCq(MemorySegment ctx, int cqe, MemorySegment channel, int vector) {
        MemorySegment cap = Errno.captureSegment();
        MemorySegment cq;
        try {
            cq = (MemorySegment) IBV_CREATE_CQ.invokeExact(cap, ctx, cqe, MemorySegment.NULL, channel, vector);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return checkPtr("ibv_create_cq", cq, cap);
    }

    public static void destroyCq(MemorySegment cq) {
        status("ibv_destroy_cq", IBV_DESTROY_CQ, cq);
    }

    /** {@code ibv_get_cq_event}: blocks unless the channel fd is non-blocking; writes the CQ and its context. */
    public static void getCqEvent(MemorySegment channel, MemorySegment cqOut, MemorySegment cqContextOut) {
        status("ibv_get_cq_event", IBV_GET_CQ_EVENT, channel, cqOut, cqContextOut);
    }

    /**
     * {@code ibv_get_cq_event} for a non-blocking channel fd: 0 with the CQ and its context
     * written, or the errno (EAGAIN: nothing to read; a positive value otherwise, EIO where the
     * library failed without setting errno, e.g. a short read).
     */
    public static int tryGetCqEvent(MemorySegment channel, MemorySegment cqOut, MemorySegment cqContextOut) {
        return tryStatus(IBV_GET_CQ_EVENT, channel, cqOut, cqContextOut);
    }

    public static void ackCqEvents(MemorySegment cq, int n) {
        try {
            IBV_ACK_CQ_EVENTS.invokeExact(Errno.captureSegment(), cq, n);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    public static MemorySegment createQp(MemorySegment pd, MemorySegment initAttr) {
        return pointer("ibv_create_qp", IBV_CREATE_QP, pd, initAttr);
    }

    public static void modifyQp(MemorySegment qp, MemorySegment attr, int mask) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) IBV_MODIFY_QP.invokeExact(cap, qp, attr, mask);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc("ibv_modify_qp", rc, cap);
    }

    public static void queryQp(MemorySegment qp, MemorySegment attr, int mask, MemorySegment initAttr) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) IBV_QUERY_QP.invokeExact(cap, qp, attr, mask, initAttr);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc("ibv_query_qp", rc, cap);
    }

    public static void destroyQp(MemorySegment qp) {
        status("ibv_destroy_qp", IBV_DESTROY_QP, qp);
    }

    public static MemorySegment createSrq(MemorySegment pd, MemorySegment initAttr) {
        return pointer("ibv_create_srq", IBV_CREATE_SRQ, pd, initAttr);
    }

    public static void destroySrq(MemorySegment srq) {
        status("ibv_destroy_srq", IBV_DESTROY_SRQ, srq);
    }

    public static MemorySegment createAh(MemorySegment pd, MemorySegment ahAttr) {
        return pointer("ibv_create_ah", IBV_CREATE_AH, pd, ahAttr);
    }

    /**
     * {@code ibv_attach_mcast} ({@code attach}) or {@code ibv_detach_mcast}: {@code gid} points at
     * the group's 16-byte GID; 0, or the errno the call returns.
     */
    public static void multicast(boolean attach, MemorySegment qp, MemorySegment gid, int lid) {
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = attach
                    ? (int) IBV_ATTACH_MCAST.invokeExact(cap, qp, gid, (short) lid)
                    : (int) IBV_DETACH_MCAST.invokeExact(cap, qp, gid, (short) lid);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        checkRc(attach ? "ibv_attach_mcast" : "ibv_detach_mcast", rc, cap);
    }

    public static void destroyAh(MemorySegment ah) {
        status("ibv_destroy_ah", IBV_DESTROY_AH, ah);
    }

    /** {@code ibv_get_async_event}: blocks unless the context's async fd is non-blocking. */
    public static void getAsyncEvent(MemorySegment ctx, MemorySegment event) {
        status("ibv_get_async_event", IBV_GET_ASYNC_EVENT, ctx, event);
    }

    /**
     * {@code ibv_get_async_event} for a non-blocking async fd: 0 with the event written, or the
     * errno (EAGAIN: nothing to read; EIO where the library failed without setting errno).
     */
    public static int tryGetAsyncEvent(MemorySegment ctx, MemorySegment event) {
        return tryStatus(IBV_GET_ASYNC_EVENT, ctx, event);
    }

    public static void ackAsyncEvent(MemorySegment event) {
        run(IBV_ACK_ASYNC_EVENT, event);
    }

    /** libibverbs' own text for a completion status ({@code ibv_wc_status_str}). */
    public static String wcStatusStr(int status) {
        return text(IBV_WC_STATUS_STR, status);
    }

    /** libibverbs' own text for an async event type ({@code ibv_event_type_str}). */
    public static String eventTypeStr(int type) {
        return text(IBV_EVENT_TYPE_STR, type);
    }

    /** libibverbs' own text for a node type ({@code ibv_node_type_str}). */
    public static String nodeTypeStr(int type) {
        return text(IBV_NODE_TYPE_STR, type);
    }

    /** libibverbs' own text for a port state ({@code ibv_port_state_str}). */
    public static String portStateStr(int state) {
        return text(IBV_PORT_STATE_STR, state);
    }
}
