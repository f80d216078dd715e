package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import org.verbs4j.natives.generated.ibverbs.verbs_context;

/**
 * Dispatch for the XRC verbs, all {@code static inline} in {@code verbs.h}: {@code ibv_open_xrcd},
 * {@code ibv_close_xrcd}, {@code ibv_create_srq_ex} and {@code ibv_get_srq_num} are
 * {@code verbs_context} ops, called as the inlines call them (EOPNOTSUPP when the provider has
 * none); XRC queue pairs are made by the create_qp_ex op ({@link ExtendedPostVerbs#createQpEx}).
 * Control path: errno captured at the call. Stateless.
 *
 * <pre>
 * struct ibv_xrcd (8):               +0 ibv_context *context
 * struct ibv_xrcd_init_attr (12):    +0 u32 comp_mask  +4 int fd  +8 int oflags
 * struct ibv_srq_init_attr_ex (64):  +0 srq_context  +8 attr {max_wr, max_sge, srq_limit}
 *                                    +20 u32 comp_mask  +24 srq_type  +32 pd  +40 xrcd  +48 cq
 * struct ibv_qp_init_attr_ex:        +52 qp_type  +72 ibv_xrcd *xrcd
 * </pre>
 */
public final class XrcVerbs {
    private XrcVerbs() {}

    public static final long XRCD_SIZE = 8;
    public static final long XRCD_CONTEXT = 0;
    public static final long XRCD_INIT_ATTR_SIZE = 12;
    public static final long XRCD_INIT_COMP_MASK = 0;
    public static final long XRCD_INIT_FD = 4;
    public static final long XRCD_INIT_OFLAGS = 8;
    public static final int XRCD_INIT_ATTR_FD = 1;
    public static final int XRCD_INIT_ATTR_OFLAGS = 2;

    public static final long SRQ_INIT_EX_SIZE = 64;
    public static final long SRQ_INIT_EX_MAX_WR = 8;
    public static final long SRQ_INIT_EX_MAX_SGE = 12;
    public static final long SRQ_INIT_EX_COMP_MASK = 20;
    public static final long SRQ_INIT_EX_TYPE = 24;
    public static final long SRQ_INIT_EX_PD = 32;
    public static final long SRQ_INIT_EX_XRCD = 40;
    public static final long SRQ_INIT_EX_CQ = 48;
    public static final int SRQ_INIT_ATTR_TYPE = 1;
    public static final int SRQ_INIT_ATTR_PD = 2;
    public static final int SRQ_INIT_ATTR_XRCD = 4;
    public static final int SRQ_INIT_ATTR_CQ = 8;
    public static final int SRQT_XRC = 1;

    public static final long QP_INIT_QP_TYPE = 52;
    public static final long QP_INIT_XRCD = 72;
    public static final int QP_INIT_ATTR_XRCD = 2;
    public static final int QPT_XRC_SEND = 9;
    /** {@code struct ibv_qp_open_attr} ({@code ibv_open_qp}). */
    public static final long QP_OPEN_ATTR_SIZE = 32;

    public static final long QP_OPEN_COMP_MASK = 0;
    public static final long QP_OPEN_QP_NUM = 4;
    public static final long QP_OPEN_XRCD = 8;
    public static final long QP_OPEN_QP_TYPE = 24;
    public static final int QP_OPEN_ATTR_NUM = 1;
    public static final int QP_OPEN_ATTR_XRCD = 2;
    public static final int QP_OPEN_ATTR_TYPE = 8;
    public static final int QPT_XRC_RECV = 10;

    /** {@code O_RDONLY | O_CREAT} (Linux, every architecture verbs4j runs on) and the mode of a created file. */
    private static final int O_RDONLY = 0, O_CREAT = 0100, MODE = 0600;

    private static final MethodHandle OPEN_XRCD_OP = NativeBinding.pointer(
            "verbs_context.open_xrcd", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle CLOSE_XRCD_OP =
            NativeBinding.pointer("verbs_context.close_xrcd", FunctionDescriptor.of(JAVA_INT, ADDRESS), true, false);
    private static final MethodHandle CREATE_SRQ_EX_OP = NativeBinding.pointer(
            "verbs_context.create_srq_ex", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle GET_SRQ_NUM_OP = NativeBinding.pointer(
            "verbs_context.get_srq_num", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle OPEN_QP_OP = NativeBinding.pointer(
            "verbs_context.open_qp", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle OPEN = NativeBinding.variadic(
            Linker.nativeLinker().defaultLookup(),
            "open",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT),
            2);

    /**
     * {@code ibv_open_xrcd(ctx, &{FD | OFLAGS, fd, O_CREAT})}: fd -1 opens an anonymous domain;
     * the {@code struct ibv_xrcd *}, or a failure with the errno.
     */
    public static MemorySegment openXrcd(MemorySegment ctx, int fd) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(XRCD_INIT_ATTR_SIZE, 4);
            attr.set(JAVA_INT, XRCD_INIT_COMP_MASK, XRCD_INIT_ATTR_FD | XRCD_INIT_ATTR_OFLAGS);
            attr.set(JAVA_INT, XRCD_INIT_FD, fd);
            attr.set(JAVA_INT, XRCD_INIT_OFLAGS, O_CREAT);
            return InlineVerbs.createThroughOp(
                            "ibv_open_xrcd", "open_xrcd", verbs_context.open_xrcd$offset(), OPEN_XRCD_OP, ctx, attr)
                    .reinterpret(XRCD_SIZE);
        }
    }

    /**
     * {@code ibv_open_qp(ctx, &{NUM | XRCD | TYPE, qpNum, xrcd, NULL, IBV_QPT_XRC_RECV})}: a handle on
     * the XRC_RECV queue pair {@code qpNum} of the domain (made by this or another process), or a
     * failure with the errno.
     */
    public static MemorySegment openQp(MemorySegment ctx, MemorySegment xrcd, int qpNum) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(QP_OPEN_ATTR_SIZE, 8);
            attr.set(JAVA_INT, QP_OPEN_COMP_MASK, QP_OPEN_ATTR_NUM | QP_OPEN_ATTR_XRCD | QP_OPEN_ATTR_TYPE);
            attr.set(JAVA_INT, QP_OPEN_QP_NUM, qpNum);
            attr.set(ADDRESS, QP_OPEN_XRCD, xrcd);
            attr.set(JAVA_INT, QP_OPEN_QP_TYPE, QPT_XRC_RECV);
            return InlineVerbs.createThroughOp(
                    "ibv_open_qp", "open_qp", verbs_context.open_qp$offset(), OPEN_QP_OP, ctx, attr);
        }
    }

    /** {@code ibv_close_xrcd(xrcd)}; throws the errno. */
    public static void closeXrcd(MemorySegment xrcd) {
        MemorySegment ctx = xrcd.reinterpret(XRCD_SIZE).get(ADDRESS, XRCD_CONTEXT);
        DomainVerbs.releaseThroughOp(
                "ibv_close_xrcd", "close_xrcd", verbs_context.close_xrcd$offset(), CLOSE_XRCD_OP, ctx, xrcd);
    }

    /** {@code ibv_create_srq_ex(ctx, attr)} through the create_srq_ex op: the {@code struct ibv_srq *}, or a failure. */
    public static MemorySegment createSrqEx(MemorySegment ctx, MemorySegment initAttrEx) {
        return InlineVerbs.createThroughOp(
                "ibv_create_srq_ex",
                "create_srq_ex",
                verbs_context.create_srq_ex$offset(),
                CREATE_SRQ_EX_OP,
                ctx,
                initAttrEx);
    }

    /** {@code ibv_get_srq_num(srq, &num)}: the SRQ number peers' XRC sends name, or a failure with the errno. */
    public static int getSrqNum(MemorySegment ctx, MemorySegment srq) {
        MemorySegment op =
                DomainVerbs.requireOp("ibv_get_srq_num", "get_srq_num", verbs_context.get_srq_num$offset(), ctx);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment num = a.allocate(JAVA_INT);
            MemorySegment cap = Errno.captureSegment();
            int rc;
            try {
                rc = (int) GET_SRQ_NUM_OP.invokeExact(op, cap, srq, num);
            } catch (Throwable t) {
                throw InlineVerbs.rethrow(t);
            }
            LibIbverbs.checkRc("ibv_get_srq_num", rc, cap);
            return num.get(JAVA_INT, 0);
        }
    }

    /**
     * {@code open(path, O_RDONLY | O_CREAT, 0600)}: the fd of the file that names a domain shared
     * between processes, or a failure naming {@code verb} with the errno.
     */
    public static int openFile(String verb, String path) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cap = Errno.captureSegment();
            int fd;
            try {
                fd = (int) OPEN.invokeExact(cap, a.allocateFrom(path), O_RDONLY | O_CREAT, MODE);
            } catch (Throwable t) {
                throw InlineVerbs.rethrow(t);
            }
            if (fd < 0) {
                throw Failures.of(verb, Errno.captured(cap), "open(" + path + ") failed");
            }
            return fd;
        }
    }
}
