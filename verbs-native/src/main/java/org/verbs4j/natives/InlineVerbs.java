package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * Hand-written dispatch for the verbs that {@code verbs.h} defines {@code static inline} and that
 * therefore have no symbol: the function pointer is read out of the provider's
 * {@code ibv_context} (or the {@code verbs_context} before it) and called through an
 * address-less downcall handle whose first argument is that pointer.
 *
 * <p>Data path ({@link #postSend}, {@link #postRecv}, {@link #postSrqRecv}, {@link #pollCq},
 * {@link #reqNotifyCq}): {@code static final} handles invoked with {@code invokeExact}; pointer
 * arguments travel as {@code long} (an LP64 pointer is passed exactly as a 64-bit integer), so a
 * call touches no arena and allocates nothing. Post and poll are linked both ways, and the caller
 * picks one per provider ({@link #criticalDataPath}): {@code Linker.Option.critical(false)} (no
 * thread-state transition) where the provider's post and poll write to mapped queues and ring a
 * doorbell without entering the kernel, an ordinary downcall where its post is a system call
 * ({@link #SYSCALL_PROVIDERS}: rxe and siw post with {@code write(2)} on the uverbs fd, and a
 * critical call must not block a safepoint for a system call's length).
 * {@value #CRITICAL_PROPERTY}{@code =false} links every provider's data path as ordinary
 * downcalls. {@code req_notify_cq} is always an ordinary downcall (it arms the CQ for a wait; on
 * several providers it enters the kernel). The return value is the verb's own error report (an
 * errno for post, a negative count for poll), so no errno is captured on the data path.
 *
 * <p>Control path ({@link #queryPort}, {@link #queryDeviceEx}, {@link #createCqEx},
 * {@link #regMr}): errno is captured at the call. Stateless; any thread may call it, with the
 * usual verbs rules on which objects may be used concurrently.
 */
public final class InlineVerbs {
    /**
     * System property: {@code false} links every provider's data path as ordinary downcalls
     * (default true: critical where the provider allows it, see {@link #criticalDataPath}).
     */
    public static final String CRITICAL_PROPERTY = "verbs4j.criticalDowncalls";
    /** Whether data-path downcalls may be critical at all ({@value #CRITICAL_PROPERTY}). */
    public static final boolean CRITICAL = Boolean.parseBoolean(System.getProperty(CRITICAL_PROPERTY, "true"));
    /**
     * The providers ({@code verbs_device_ops.name}) whose post makes a system call: the software
     * RDMA providers rxe and siw, and the rdmavt-based hfi1verbs and ipathverbs, whose
     * {@code post_send} is {@code ibv_cmd_post_send}, a {@code write(2)} to the uverbs fd.
     */
    public static final java.util.Set<String> SYSCALL_PROVIDERS =
            java.util.Set.of("rxe", "siw", "hfi1verbs", "ipathverbs");

    /** The shape of {@code post_send}/{@code post_recv}: {@code (qp, wr, bad_wr)int}, pointers as long. */
    static final FunctionDescriptor POST = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG);
    /** The shape of {@code poll_cq}: {@code (cq, num_entries, wc)int}, pointers as long. */
    static final FunctionDescriptor POLL = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG);

    private static final FunctionDescriptor NOTIFY = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT);

    /** The data-path shapes linked both ways; the caller picks one per provider. */
    static final MethodHandle POST_SEND_CRITICAL = dataPath("ibv_context_ops.post_send", POST, true);

    static final MethodHandle POST_SEND_STANDARD = dataPath("ibv_context_ops.post_send", POST, false);
    static final MethodHandle POST_RECV_CRITICAL = dataPath("ibv_context_ops.post_recv", POST, true);
    static final MethodHandle POST_RECV_STANDARD = dataPath("ibv_context_ops.post_recv", POST, false);
    static final MethodHandle POLL_CQ_CRITICAL = dataPath("ibv_context_ops.poll_cq", POLL, true);
    static final MethodHandle POLL_CQ_STANDARD = dataPath("ibv_context_ops.poll_cq", POLL, false);

    /** {@code int post_send(qp, wr, bad_wr)}, type {@code (MemorySegment fn, long, long, long)int}, critical if {@link #CRITICAL}. */
    public static final MethodHandle POST_SEND = CRITICAL ? POST_SEND_CRITICAL : POST_SEND_STANDARD;
    /** {@code int post_recv(qp, wr, bad_wr)}, same shape; also used for post_srq_recv. */
    public static final MethodHandle POST_RECV = CRITICAL ? POST_RECV_CRITICAL : POST_RECV_STANDARD;
    /** {@code int poll_cq(cq, num_entries, wc)}, type {@code (MemorySegment fn, long, int, long)int}. */
    public static final MethodHandle POLL_CQ = CRITICAL ? POLL_CQ_CRITICAL : POLL_CQ_STANDARD;
    /** {@code int req_notify_cq(cq, solicited_only)}, type {@code (MemorySegment fn, long, int)int}: an ordinary downcall. */
    public static final MethodHandle REQ_NOTIFY_CQ = dataPath("ibv_context_ops.req_notify_cq", NOTIFY, false);

    private static final MethodHandle QUERY_PORT_OP = NativeBinding.pointer(
            "verbs_context.query_port",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS, JAVA_LONG),
            true,
            false);
    private static final MethodHandle QUERY_DEVICE_EX_OP = NativeBinding.pointer(
            "verbs_context.query_device_ex",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG),
            true,
            false);
    private static final MethodHandle CREATE_CQ_EX_OP = NativeBinding.pointer(
            "verbs_context.create_cq_ex", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);

    private InlineVerbs() {}

    private static MethodHandle dataPath(String op, FunctionDescriptor fd, boolean critical) {
        return NativeBinding.pointer(op, fd, false, critical);
    }

    /** The data-path handle of shape {@code fd} ({@link #POST} or {@link #POLL}), critical or standard. */
    static MethodHandle dataPath(FunctionDescriptor fd, boolean critical) {
        if (fd == POST) {
            return critical ? POST_SEND_CRITICAL : POST_SEND_STANDARD;
        }
        if (fd == POLL) {
            return critical ? POLL_CQ_CRITICAL : POLL_CQ_STANDARD;
        }
        throw new IllegalArgumentException("not a data-path shape: " + fd);
    }

    /**
     * Whether the data path of {@code provider} (a {@link #providerName}, or null when unknown) is
     * linked critical: unless {@value #CRITICAL_PROPERTY} is false, every provider but the
     * {@link #SYSCALL_PROVIDERS}.
     */
    public static boolean criticalDataPath(String provider) {
        return CRITICAL && !(provider != null && SYSCALL_PROVIDERS.contains(provider));
    }

    /** The longest provider name {@link #providerName} reads. */
    private static final int MAX_PROVIDER_NAME = 64;

    /**
     * The name of the provider (libibverbs' driver) behind {@code ctx}:
     * {@code ((struct verbs_device *) ctx->device)->ops->name}, e.g. {@code "rxe"} or
     * {@code "mlx5"}; null when the context has no device, the device no ops, or the ops no name
     * (a context that libibverbs did not make).
     */
    public static String providerName(MemorySegment ctx) {
        MemorySegment device = ctx.reinterpret(ContextLayout.SIZE).get(ADDRESS, ContextLayout.DEVICE);
        if (device.equals(MemorySegment.NULL)) {
            return null;
        }
        MemorySegment ops = device.reinterpret(ContextLayout.VERBS_DEVICE_OPS + ADDRESS.byteSize())
                .get(ADDRESS, ContextLayout.VERBS_DEVICE_OPS);
        if (ops.equals(MemorySegment.NULL)) {
            return null;
        }
        MemorySegment name = ops.reinterpret(ADDRESS.byteSize()).get(ADDRESS, 0);
        if (name.equals(MemorySegment.NULL)) {
            return null;
        }
        MemorySegment chars = name.reinterpret(MAX_PROVIDER_NAME);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < MAX_PROVIDER_NAME; i++) { // byte by byte: never reads past the terminator
            byte b = chars.get(JAVA_BYTE, i);
            if (b == 0) {
                return sb.toString();
            }
            sb.append((char) (b & 0xff));
        }
        return null;
    }

    // ---- function pointers --------------------------------------------------------------

    /** {@code ctx->ops.<slot>} as a callable segment; slot is one of the {@code ContextLayout.OPS_*} offsets. */
    public static MemorySegment contextOp(MemorySegment ctx, long slot) {
        return ctx.reinterpret(ContextLayout.SIZE).get(ADDRESS, slot);
    }

    /** {@code qp->context} (also {@code cq->context}, {@code srq->context}: all at offset 0). */
    public static MemorySegment contextOf(MemorySegment verbsObject) {
        return verbsObject.reinterpret(8).get(ADDRESS, 0);
    }

    /** {@code verbs_get_ctx(ctx)}: the extended context, or {@code NULL} if ctx is not one. */
    public static MemorySegment verbsGetCtx(MemorySegment ctx) {
        long compat = ctx.reinterpret(ContextLayout.SIZE).get(JAVA_LONG, ContextLayout.ABI_COMPAT);
        if (compat != ContextLayout.ABI_IS_EXTENDED) {
            return MemorySegment.NULL;
        }
        return MemorySegment.ofAddress(ctx.address() - ContextLayout.VERBS_CONTEXT_CONTEXT)
                .reinterpret(ContextLayout.VERBS_CONTEXT_SIZE);
    }

    /**
     * {@code verbs_get_ctx_op(ctx, op)}: the op's function pointer if the context is extended,
     * large enough to hold the op ({@code sz >= sizeof(verbs_context) - offsetof(op)}) and the
     * op is set; otherwise {@code NULL}.
     */
    public static MemorySegment verbsGetCtxOp(MemorySegment ctx, long vctxOpOffset) {
        MemorySegment vctx = verbsGetCtx(ctx);
        if (vctx.equals(MemorySegment.NULL)) {
            return MemorySegment.NULL;
        }
        long sz = vctx.get(JAVA_LONG, ContextLayout.VCTX_SZ);
        if (sz < ContextLayout.VERBS_CONTEXT_SIZE - vctxOpOffset) {
            return MemorySegment.NULL;
        }
        return vctx.get(ADDRESS, vctxOpOffset);
    }

    // ---- data path ------------------------------------------------------------------------

    /** {@link #postSend(MemorySegment, long, long, long)} linked critical or not ({@link #criticalDataPath}). */
    public static int postSend(boolean critical, MemorySegment fn, long qp, long wr, long badWr) {
        try {
            return critical
                    ? (int) POST_SEND_CRITICAL.invokeExact(fn, qp, wr, badWr)
                    : (int) POST_SEND_STANDARD.invokeExact(fn, qp, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code ibv_post_recv} (through {@code ops.post_recv}) or, the same shape,
     * {@code ibv_post_srq_recv} (through {@code ops.post_srq_recv}), linked critical or not.
     */
    public static int postRecv(boolean critical, MemorySegment fn, long qpOrSrq, long wr, long badWr) {
        try {
            return critical
                    ? (int) POST_RECV_CRITICAL.invokeExact(fn, qpOrSrq, wr, badWr)
                    : (int) POST_RECV_STANDARD.invokeExact(fn, qpOrSrq, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@link #pollCq(MemorySegment, long, int, long)} linked critical or not ({@link #criticalDataPath}). */
    public static int pollCq(boolean critical, MemorySegment fn, long cq, int numEntries, long wc) {
        try {
            return critical
                    ? (int) POLL_CQ_CRITICAL.invokeExact(fn, cq, numEntries, wc)
                    : (int) POLL_CQ_STANDARD.invokeExact(fn, cq, numEntries, wc);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_post_send}: 0, or the errno; {@code *badWr} names the first WR not posted. */
    public static int postSend(MemorySegment fn, long qp, long wr, long badWr) {
        try {
            return (int) POST_SEND.invokeExact(fn, qp, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_post_recv}: 0, or the errno; {@code *badWr} names the first WR not posted. */
    public static int postRecv(MemorySegment fn, long qp, long wr, long badWr) {
        try {
            return (int) POST_RECV.invokeExact(fn, qp, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_post_srq_recv} (the same shape as post_recv, through {@code ops.post_srq_recv}). */
    public static int postSrqRecv(MemorySegment fn, long srq, long wr, long badWr) {
        try {
            return (int) POST_RECV.invokeExact(fn, srq, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_poll_cq}: the number of completions written at {@code wc}, or negative on error. */
    public static int pollCq(MemorySegment fn, long cq, int numEntries, long wc) {
        try {
            return (int) POLL_CQ.invokeExact(fn, cq, numEntries, wc);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_req_notify_cq}: 0, or the errno. */
    public static int reqNotifyCq(MemorySegment fn, long cq, int solicitedOnly) {
        try {
            return (int) REQ_NOTIFY_CQ.invokeExact(fn, cq, solicitedOnly);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- control path ---------------------------------------------------------------------

    /**
     * {@code ibv_query_port} as verbs.h's {@code ___ibv_query_port} does it: the extended
     * {@code query_port} op with the full 52-byte {@code ibv_port_attr}; only when the context has
     * none, the exported compat symbol, which fills the first 48 bytes (the rest is zeroed).
     * Throws {@link VerbsFailure} on failure.
     *
     * @param attr at least {@link ContextLayout#PORT_ATTR_SIZE} bytes
     */
    public static void queryPort(MemorySegment ctx, int port, MemorySegment attr) {
        MemorySegment op = verbsGetCtxOp(ctx, ContextLayout.VCTX_QUERY_PORT);
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            if (!op.equals(MemorySegment.NULL)) {
                rc = (int) QUERY_PORT_OP.invokeExact(op, cap, ctx, (byte) port, attr, ContextLayout.PORT_ATTR_SIZE);
            } else {
                attr.asSlice(0, ContextLayout.PORT_ATTR_SIZE).fill((byte) 0);
                rc = (int) LibIbverbs.IBV_QUERY_PORT_COMPAT.invokeExact(cap, ctx, (byte) port, attr);
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
        LibIbverbs.checkRc("ibv_query_port", rc, cap);
    }

    /**
     * {@code ibv_query_device_ex(ctx, NULL, attr)}: the extended op with
     * {@code sizeof(ibv_device_attr_ex)}, falling back (op missing, EOPNOTSUPP or ENOSYS) to
     * {@code ibv_query_device} into {@code attr->orig_attr} (offset 0) as verbs.h does.
     */
    public static void queryDeviceEx(MemorySegment ctx, MemorySegment attr, long attrExSize) {
        MemorySegment op = verbsGetCtxOp(ctx, ContextLayout.VCTX_QUERY_DEVICE_EX);
        MemorySegment cap = Errno.captureSegment();
        try {
            if (!op.equals(MemorySegment.NULL)) {
                int rc = (int) QUERY_DEVICE_EX_OP.invokeExact(op, cap, ctx, MemorySegment.NULL, attr, attrExSize);
                if (rc != Errno.EOPNOTSUPP && rc != Errno.ENOSYS) {
                    LibIbverbs.checkRc("ibv_query_device_ex", rc, cap);
                    return;
                }
            }
            attr.asSlice(0, attrExSize).fill((byte) 0);
            int rc = (int) LibIbverbs.IBV_QUERY_DEVICE.invokeExact(cap, ctx, attr);
            LibIbverbs.checkRc("ibv_query_device_ex", rc, cap);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_create_cq_ex}: through the extended op; EOPNOTSUPP when the context has none. */
    public static MemorySegment createCqEx(MemorySegment ctx, MemorySegment cqInitAttrEx) {
        return createThroughOp(
                "ibv_create_cq_ex",
                "create_cq_ex",
                ContextLayout.VCTX_CREATE_CQ_EX,
                CREATE_CQ_EX_OP,
                ctx,
                cqInitAttrEx);
    }

    /**
     * A {@code verbs_context} op of the shape {@code struct X *op(ctx, attr)} (create_cq_ex,
     * create_qp_ex): EOPNOTSUPP when the context has none, else the object or a failure naming
     * {@code verb} with the errno captured at the call.
     */
    static MemorySegment createThroughOp(
            String verb, String opName, long vctxOffset, MethodHandle h, MemorySegment ctx, MemorySegment attr) {
        MemorySegment op = verbsGetCtxOp(ctx, vctxOffset);
        if (op.equals(MemorySegment.NULL)) {
            throw Failures.of(verb, Errno.EOPNOTSUPP, "the provider has no " + opName + " op");
        }
        MemorySegment cap = Errno.captureSegment();
        MemorySegment created;
        try {
            created = (MemorySegment) h.invokeExact(op, cap, ctx, attr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
        return LibIbverbs.checkPtr(verb, created, cap);
    }

    /** {@code IBV_ACCESS_OPTIONAL_RANGE}: access bits a provider may ignore. */
    public static final int ACCESS_OPTIONAL_RANGE = 0x3ff00000;

    /**
     * The {@code ibv_reg_mr} macro: plain {@code ibv_reg_mr} unless the access flags carry
     * optional bits, in which case {@code ibv_reg_mr_iova2} with {@code iova = addr}.
     */
    public static MemorySegment regMr(MemorySegment pd, long addr, long length, int access) {
        if ((access & ACCESS_OPTIONAL_RANGE) == 0) {
            return LibIbverbs.regMr(pd, addr, length, access);
        }
        return LibIbverbs.regMrIova2(pd, addr, length, addr, access);
    }

    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }
}
