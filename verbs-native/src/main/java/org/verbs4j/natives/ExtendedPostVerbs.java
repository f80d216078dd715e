package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * Dispatch for the extended queue pair's {@code static inline} verbs of {@code verbs.h}:
 * {@code ibv_wr_start}, the work request builders ({@code ibv_wr_send}, {@code ibv_wr_rdma_write},
 * {@code ibv_wr_atomic_cmp_swp}, {@code ibv_wr_bind_mw}, {@code ibv_wr_atomic_write}, ...), the setters
 * ({@code ibv_wr_set_sge(_list)}, {@code ibv_wr_set_inline_data(_list)},
 * {@code ibv_wr_set_ud_addr}), {@code ibv_wr_complete} and {@code ibv_wr_abort} are function
 * pointers in {@code struct ibv_qp_ex} (offsets in {@link QueuePairExLayout}). Control path:
 * {@code ibv_create_qp_ex} and {@code ibv_advise_mr} ({@code verbs_context} ops),
 * {@code ibv_alloc_mw}, {@code ibv_bind_mw} and {@code ibv_dealloc_mw} ({@code ibv_context_ops}),
 * errno captured at the call (bind and advise return it).
 *
 * <p>Data path: {@code static final} address-less handles invoked with {@code invokeExact},
 * pointers passed as {@code long}, nothing allocated; each is linked both ways (critical or not,
 * chosen per provider as {@link InlineVerbs#criticalDataPath} says: rxe's {@code wr_complete}
 * rings its doorbell with a system call). Builders of one C shape share a handle (named after one
 * of them); the builders and setters report errors only through {@code wr_complete}'s return
 * value, so no errno is captured.
 */
public final class ExtendedPostVerbs {
    private ExtendedPostVerbs() {}

    private static final FunctionDescriptor V_Q = FunctionDescriptor.ofVoid(JAVA_LONG);
    private static final FunctionDescriptor I_Q = FunctionDescriptor.of(JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor V_QI = FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT);
    private static final FunctionDescriptor V_QIL = FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor V_QILI =
            FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT);
    private static final FunctionDescriptor V_QILL =
            FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG);
    private static final FunctionDescriptor V_QILLL =
            FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG);
    private static final FunctionDescriptor V_QLIL =
            FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor V_QLL = FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG, JAVA_LONG);
    private static final FunctionDescriptor V_QLII =
            FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT);

    private static MethodHandle h(String member, FunctionDescriptor fd, boolean critical) {
        return NativeBinding.pointer("ibv_qp_ex." + member, fd, false, critical);
    }

    // wr_start, wr_abort and wr_send: void (qp)
    private static final MethodHandle Q_C = h("wr_send", V_Q, true), Q_S = h("wr_send", V_Q, false);
    private static final MethodHandle COMPLETE_C = h("wr_complete", I_Q, true),
            COMPLETE_S = h("wr_complete", I_Q, false);
    // wr_send_imm, wr_send_inv, wr_local_inv: void (qp, uint32)
    private static final MethodHandle QI_C = h("wr_send_imm", V_QI, true), QI_S = h("wr_send_imm", V_QI, false);
    // wr_rdma_write, wr_rdma_read: void (qp, rkey, remote_addr)
    private static final MethodHandle QIL_C = h("wr_rdma_write", V_QIL, true), QIL_S = h("wr_rdma_write", V_QIL, false);
    private static final MethodHandle QILI_C = h("wr_rdma_write_imm", V_QILI, true),
            QILI_S = h("wr_rdma_write_imm", V_QILI, false);
    private static final MethodHandle QILL_C = h("wr_atomic_fetch_add", V_QILL, true),
            QILL_S = h("wr_atomic_fetch_add", V_QILL, false);
    private static final MethodHandle QILLL_C = h("wr_atomic_cmp_swp", V_QILLL, true),
            QILLL_S = h("wr_atomic_cmp_swp", V_QILLL, false);
    private static final MethodHandle BIND_C = h("wr_bind_mw", V_QLIL, true), BIND_S = h("wr_bind_mw", V_QLIL, false);
    // wr_set_sge_list, wr_set_inline_data, wr_set_inline_data_list: void (qp, size_t or pointer, pointer or size_t)
    private static final MethodHandle QLL_C = h("wr_set_sge_list", V_QLL, true),
            QLL_S = h("wr_set_sge_list", V_QLL, false);
    private static final MethodHandle SGE_C = h("wr_set_sge", V_QILI, true), SGE_S = h("wr_set_sge", V_QILI, false);
    private static final MethodHandle UD_C = h("wr_set_ud_addr", V_QLII, true),
            UD_S = h("wr_set_ud_addr", V_QLII, false);

    private static final MethodHandle CREATE_QP_EX_OP = NativeBinding.pointer(
            "verbs_context.create_qp_ex", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle ALLOC_MW_OP = NativeBinding.pointer(
            "ibv_context_ops.alloc_mw", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT), true, false);
    private static final MethodHandle BIND_MW_OP = NativeBinding.pointer(
            "ibv_context_ops.bind_mw", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), false, false);
    private static final MethodHandle ADVISE_MR_OP = NativeBinding.pointer(
            "verbs_context.advise_mr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT),
            false,
            false);
    private static final MethodHandle DEALLOC_MW_OP =
            NativeBinding.pointer("ibv_context_ops.dealloc_mw", FunctionDescriptor.of(JAVA_INT, ADDRESS), true, false);

    /** A {@code void fn(qp)} member: {@code wr_start}, {@code wr_abort}, {@code wr_send}. */
    public static void call(boolean critical, MemorySegment fn, long qpx) {
        try {
            if (critical) {
                Q_C.invokeExact(fn, qpx);
            } else {
                Q_S.invokeExact(fn, qpx);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code ibv_wr_complete(qp)}: 0, or the errno of the first builder or setter that failed (nothing posted). */
    public static int complete(boolean critical, MemorySegment fn, long qpx) {
        try {
            return critical ? (int) COMPLETE_C.invokeExact(fn, qpx) : (int) COMPLETE_S.invokeExact(fn, qpx);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * A {@code void fn(qp, uint32_t)} member: {@code wr_send_imm} (big-endian immediate),
     * {@code wr_send_inv}, {@code wr_local_inv}, {@code wr_set_xrc_srqn}.
     */
    public static void call(boolean critical, MemorySegment fn, long qpx, int value) {
        try {
            if (critical) {
                QI_C.invokeExact(fn, qpx, value);
            } else {
                QI_S.invokeExact(fn, qpx, value);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code wr_rdma_write} / {@code wr_rdma_read (qp, rkey, remote_addr)}. */
    public static void rdma(boolean critical, MemorySegment fn, long qpx, int rkey, long remoteAddress) {
        try {
            if (critical) {
                QIL_C.invokeExact(fn, qpx, rkey, remoteAddress);
            } else {
                QIL_S.invokeExact(fn, qpx, rkey, remoteAddress);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code wr_rdma_write_imm(qp, rkey, remote_addr, imm_data)} (big-endian immediate). */
    public static void rdmaImm(boolean critical, MemorySegment fn, long qpx, int rkey, long remoteAddress, int imm) {
        try {
            if (critical) {
                QILI_C.invokeExact(fn, qpx, rkey, remoteAddress, imm);
            } else {
                QILI_S.invokeExact(fn, qpx, rkey, remoteAddress, imm);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code wr_atomic_fetch_add(qp, rkey, remote_addr, add)}. */
    public static void fetchAdd(boolean critical, MemorySegment fn, long qpx, int rkey, long remoteAddress, long add) {
        try {
            if (critical) {
                QILL_C.invokeExact(fn, qpx, rkey, remoteAddress, add);
            } else {
                QILL_S.invokeExact(fn, qpx, rkey, remoteAddress, add);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * {@code wr_atomic_write(qp, rkey, remote_addr, atomic_wr)}: the 8 bytes at address
     * {@code value} (copied into the work queue entry by the call). The C shape of
     * {@code wr_atomic_fetch_add}, whose handle it shares (a pointer passed as {@code long}).
     */
    public static void atomicWrite(
            boolean critical, MemorySegment fn, long qpx, int rkey, long remoteAddress, long value) {
        fetchAdd(critical, fn, qpx, rkey, remoteAddress, value);
    }

    /** {@code wr_atomic_cmp_swp(qp, rkey, remote_addr, compare, swap)}. */
    public static void compareSwap(
            boolean critical, MemorySegment fn, long qpx, int rkey, long remoteAddress, long compare, long swap) {
        try {
            if (critical) {
                QILLL_C.invokeExact(fn, qpx, rkey, remoteAddress, compare, swap);
            } else {
                QILLL_S.invokeExact(fn, qpx, rkey, remoteAddress, compare, swap);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code wr_bind_mw(qp, mw, rkey, bind_info)}. */
    public static void bindMw(boolean critical, MemorySegment fn, long qpx, long mw, int rkey, long bindInfo) {
        try {
            if (critical) {
                BIND_C.invokeExact(fn, qpx, mw, rkey, bindInfo);
            } else {
                BIND_S.invokeExact(fn, qpx, mw, rkey, bindInfo);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code wr_set_sge(qp, lkey, addr, length)}. */
    public static void setSge(boolean critical, MemorySegment fn, long qpx, int lkey, long addr, int length) {
        try {
            if (critical) {
                SGE_C.invokeExact(fn, qpx, lkey, addr, length);
            } else {
                SGE_S.invokeExact(fn, qpx, lkey, addr, length);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * A {@code void fn(qp, a, b)} member with two 64-bit arguments: {@code wr_set_sge_list(qp,
     * num_sge, sg_list)}, {@code wr_set_inline_data(qp, addr, length)},
     * {@code wr_set_inline_data_list(qp, num_buf, buf_list)}.
     */
    public static void call(boolean critical, MemorySegment fn, long qpx, long a, long b) {
        try {
            if (critical) {
                QLL_C.invokeExact(fn, qpx, a, b);
            } else {
                QLL_S.invokeExact(fn, qpx, a, b);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code wr_set_ud_addr(qp, ah, remote_qpn, remote_qkey)}. */
    public static void setUdAddr(boolean critical, MemorySegment fn, long qpx, long ah, int remoteQpn, int qkey) {
        try {
            if (critical) {
                UD_C.invokeExact(fn, qpx, ah, remoteQpn, qkey);
            } else {
                UD_S.invokeExact(fn, qpx, ah, remoteQpn, qkey);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * {@code ibv_create_qp_ex(ctx, attr)} for an {@code attr} whose comp_mask asks for more than
     * the PD: through the {@code create_qp_ex} op; EOPNOTSUPP when the context has none.
     */
    public static MemorySegment createQpEx(MemorySegment ctx, MemorySegment initAttrEx) {
        return InlineVerbs.createThroughOp(
                "ibv_create_qp_ex", "create_qp_ex", ContextLayout.VCTX_CREATE_QP_EX, CREATE_QP_EX_OP, ctx, initAttrEx);
    }

    /** {@code ibv_qp_to_qp_ex(qp)}: the extended queue pair, or NULL when the QP was not created extended. */
    public static MemorySegment qpToQpEx(MemorySegment qp) {
        if (LibIbverbs.IBV_QP_TO_QP_EX == null) {
            throw Failures.of("ibv_qp_to_qp_ex", Errno.EOPNOTSUPP, "libibverbs is older than 1.6 (rdma-core 21)");
        }
        try {
            return (MemorySegment) LibIbverbs.IBV_QP_TO_QP_EX.invokeExact(Errno.captureSegment(), qp);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code ibv_alloc_mw(pd, type)}: EOPNOTSUPP when the provider has no alloc_mw op. */
    public static MemorySegment allocMw(MemorySegment ctx, MemorySegment pd, int type) {
        MemorySegment op = InlineVerbs.contextOp(ctx, ContextLayout.OPS_ALLOC_MW);
        if (op.equals(MemorySegment.NULL)) {
            throw Failures.of("ibv_alloc_mw", Errno.EOPNOTSUPP, "the provider has no alloc_mw op");
        }
        MemorySegment cap = Errno.captureSegment();
        MemorySegment mw;
        try {
            mw = (MemorySegment) ALLOC_MW_OP.invokeExact(op, cap, pd, type);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return LibIbverbs.checkPtr("ibv_alloc_mw", mw, cap);
    }

    /** {@code ibv_dealloc_mw(mw)} through the context's dealloc_mw op. */
    public static void deallocMw(MemorySegment ctx, MemorySegment mw) {
        MemorySegment op = InlineVerbs.contextOp(ctx, ContextLayout.OPS_DEALLOC_MW);
        if (op.equals(MemorySegment.NULL)) {
            throw Failures.of("ibv_dealloc_mw", Errno.EOPNOTSUPP, "the provider has no dealloc_mw op");
        }
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) DEALLOC_MW_OP.invokeExact(op, cap, mw);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        LibIbverbs.checkRc("ibv_dealloc_mw", rc, cap);
    }

    /**
     * {@code ibv_bind_mw(qp, mw, mw_bind)} through the context's bind_mw op, after the inline's own
     * checks (the caller's): 0, or the errno the provider returned; EOPNOTSUPP when it has no op.
     */
    public static int bindMw(MemorySegment ctx, MemorySegment qp, MemorySegment mw, MemorySegment bind) {
        MemorySegment op = InlineVerbs.contextOp(ctx, ContextLayout.OPS_BIND_MW);
        if (op.equals(MemorySegment.NULL)) {
            return Errno.EOPNOTSUPP;
        }
        try {
            return (int) BIND_MW_OP.invokeExact(op, qp, mw, bind);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * {@code ibv_advise_mr(pd, advice, flags, sg_list, num_sge)} through the {@code advise_mr}
     * op of {@code verbs_context}: 0, or the errno; EOPNOTSUPP when the context has no such op.
     */
    public static int adviseMr(
            MemorySegment ctx, MemorySegment pd, int advice, int flags, MemorySegment sgList, int numSge) {
        MemorySegment op = InlineVerbs.verbsGetCtxOp(ctx, ContextLayout.VCTX_ADVISE_MR);
        if (op.equals(MemorySegment.NULL)) {
            return Errno.EOPNOTSUPP;
        }
        try {
            return (int) ADVISE_MR_OP.invokeExact(op, pd, advice, flags, sgList, numSge);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }
}
