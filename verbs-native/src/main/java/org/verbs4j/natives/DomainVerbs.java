package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import org.verbs4j.natives.generated.ibverbs.verbs_context;

/**
 * Dispatch for the {@code static inline} verbs of {@code verbs.h} that allocate thread domains and
 * parent domains: {@code ibv_alloc_td}, {@code ibv_dealloc_td} and {@code ibv_alloc_parent_domain}
 * are {@code verbs_context} ops, called as the inlines call them ({@code verbs_get_ctx_op}, then
 * the op; EOPNOTSUPP when the provider has none). A parent domain is a {@code struct ibv_pd}:
 * {@code ibv_dealloc_pd} releases it. Control path: errno captured at the call. Stateless.
 *
 * <pre>
 * struct ibv_td (8):                        +0 ibv_context *context
 * struct ibv_td_init_attr (4):              +0 u32 comp_mask
 * struct ibv_parent_domain_init_attr (48):  +0 ibv_pd *pd  +8 ibv_td *td  +16 u32 comp_mask
 *                                           +24 alloc  +32 free  +40 pd_context
 * </pre>
 */
public final class DomainVerbs {
    private DomainVerbs() {}

    public static final long TD_CONTEXT = 0;
    public static final long TD_INIT_ATTR_SIZE = 4;
    public static final long PARENT_DOMAIN_INIT_ATTR_SIZE = 48;
    public static final long PARENT_DOMAIN_PD = 0;
    public static final long PARENT_DOMAIN_TD = 8;

    private static final MethodHandle ALLOC_TD_OP = NativeBinding.pointer(
            "verbs_context.alloc_td", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle DEALLOC_TD_OP =
            NativeBinding.pointer("verbs_context.dealloc_td", FunctionDescriptor.of(JAVA_INT, ADDRESS), true, false);
    private static final MethodHandle ALLOC_PARENT_DOMAIN_OP = NativeBinding.pointer(
            "verbs_context.alloc_parent_domain", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);

    /** {@code ibv_alloc_td(ctx, &{comp_mask = 0})}: the {@code struct ibv_td *}, or a failure with the errno. */
    public static MemorySegment allocTd(MemorySegment ctx) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(TD_INIT_ATTR_SIZE, 4);
            return InlineVerbs.createThroughOp(
                    "ibv_alloc_td", "alloc_td", verbs_context.alloc_td$offset(), ALLOC_TD_OP, ctx, attr);
        }
    }

    /** {@code ibv_dealloc_td(td)} through the context's dealloc_td op; throws the errno. */
    public static void deallocTd(MemorySegment td) {
        MemorySegment ctx = td.reinterpret(8).get(ADDRESS, TD_CONTEXT);
        releaseThroughOp("ibv_dealloc_td", "dealloc_td", verbs_context.dealloc_td$offset(), DEALLOC_TD_OP, ctx, td);
    }

    /** The {@code verbs_context} op at {@code vctxOffset}, or a failure (EOPNOTSUPP) naming {@code verb}. */
    static MemorySegment requireOp(String verb, String opName, long vctxOffset, MemorySegment ctx) {
        MemorySegment op = InlineVerbs.verbsGetCtxOp(ctx, vctxOffset);
        if (op.equals(MemorySegment.NULL)) {
            throw Failures.of(verb, Errno.EOPNOTSUPP, "the provider has no " + opName + " op");
        }
        return op;
    }

    /**
     * A {@code verbs_context} op of the shape {@code int op(obj)} (dealloc_td, free_dm): returns
     * normally on 0, else throws naming {@code verb} with the errno.
     */
    static void releaseThroughOp(
            String verb, String opName, long vctxOffset, MethodHandle h, MemorySegment ctx, MemorySegment obj) {
        MemorySegment op = requireOp(verb, opName, vctxOffset, ctx);
        MemorySegment cap = Errno.captureSegment();
        int rc;
        try {
            rc = (int) h.invokeExact(op, cap, obj);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        LibIbverbs.checkRc(verb, rc, cap);
    }

    /**
     * {@code ibv_alloc_parent_domain(ctx, &{pd, td, comp_mask = 0})}: a {@code struct ibv_pd *}
     * (released with {@code ibv_dealloc_pd}), or a failure with the errno.
     */
    public static MemorySegment allocParentDomain(MemorySegment ctx, MemorySegment pd, MemorySegment td) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(PARENT_DOMAIN_INIT_ATTR_SIZE, 8);
            attr.set(ADDRESS, PARENT_DOMAIN_PD, pd);
            attr.set(ADDRESS, PARENT_DOMAIN_TD, td);
            return InlineVerbs.createThroughOp(
                    "ibv_alloc_parent_domain",
                    "alloc_parent_domain",
                    verbs_context.alloc_parent_domain$offset(),
                    ALLOC_PARENT_DOMAIN_OP,
                    ctx,
                    attr);
        }
    }
}
