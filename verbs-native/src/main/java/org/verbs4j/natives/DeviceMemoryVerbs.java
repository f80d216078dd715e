package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import org.verbs4j.natives.generated.ibverbs.verbs_context;

/**
 * Dispatch for the device-memory verbs, all {@code static inline} in {@code verbs.h}:
 * {@code ibv_alloc_dm}, {@code ibv_free_dm} and {@code ibv_reg_dm_mr} are {@code verbs_context}
 * ops (EOPNOTSUPP when the provider has none); {@code ibv_memcpy_to_dm} and
 * {@code ibv_memcpy_from_dm} call the function pointers of the {@code struct ibv_dm} itself.
 * The caller checks the ranges: the provider copies what it is asked to. Control path: errno
 * captured where the verb reports through it. Stateless.
 *
 * <pre>
 * struct ibv_alloc_dm_attr (16): +0 size_t length  +8 u32 log_align_req  +12 u32 comp_mask
 * struct ibv_dm (32): +0 ibv_context *context  +8 memcpy_to_dm  +16 memcpy_from_dm
 *                     +24 u32 comp_mask  +28 u32 handle
 * </pre>
 */
public final class DeviceMemoryVerbs {
    private DeviceMemoryVerbs() {}

    public static final long ALLOC_DM_ATTR_SIZE = 16;
    public static final long ALLOC_DM_LENGTH = 0;
    public static final long DM_SIZE = 32;
    public static final long DM_CONTEXT = 0;
    public static final long DM_MEMCPY_TO_DM = 8;
    public static final long DM_MEMCPY_FROM_DM = 16;
    /** {@code IBV_ACCESS_ZERO_BASED}: a device-memory region's SGEs address it from 0. */
    public static final int ACCESS_ZERO_BASED = 1 << 5;

    private static final MethodHandle ALLOC_DM_OP = NativeBinding.pointer(
            "verbs_context.alloc_dm", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true, false);
    private static final MethodHandle FREE_DM_OP =
            NativeBinding.pointer("verbs_context.free_dm", FunctionDescriptor.of(JAVA_INT, ADDRESS), true, false);
    private static final MethodHandle REG_DM_MR_OP = NativeBinding.pointer(
            "verbs_context.reg_dm_mr",
            FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT),
            true,
            false);
    /** The members have the types of the inlines that call them ({@code ibv_memcpy_to_dm}, {@code _from_dm}). */
    private static final MethodHandle MEMCPY_TO_DM = NativeBinding.pointer(
            "ibv_dm.memcpy_to_dm",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG),
            false,
            false);

    private static final MethodHandle MEMCPY_FROM_DM = NativeBinding.pointer(
            "ibv_dm.memcpy_from_dm",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG),
            false,
            false);

    /** {@code ibv_alloc_dm(ctx, &{length, 0, 0})}: the {@code struct ibv_dm *}, or a failure with the errno. */
    public static MemorySegment allocDm(MemorySegment ctx, long length) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(ALLOC_DM_ATTR_SIZE, 8);
            attr.set(JAVA_LONG, ALLOC_DM_LENGTH, length);
            return InlineVerbs.createThroughOp(
                            "ibv_alloc_dm", "alloc_dm", verbs_context.alloc_dm$offset(), ALLOC_DM_OP, ctx, attr)
                    .reinterpret(DM_SIZE);
        }
    }

    /** {@code ibv_free_dm(dm)}; throws the errno. */
    public static void freeDm(MemorySegment dm) {
        MemorySegment ctx = dm.reinterpret(DM_SIZE).get(ADDRESS, DM_CONTEXT);
        DomainVerbs.releaseThroughOp("ibv_free_dm", "free_dm", verbs_context.free_dm$offset(), FREE_DM_OP, ctx, dm);
    }

    /** {@code ibv_reg_dm_mr(pd, dm, offset, length, access)}: the {@code struct ibv_mr *}, or a failure. */
    public static MemorySegment regDmMr(
            MemorySegment ctx, MemorySegment pd, MemorySegment dm, long offset, long length, int access) {
        MemorySegment op = DomainVerbs.requireOp("ibv_reg_dm_mr", "reg_dm_mr", verbs_context.reg_dm_mr$offset(), ctx);
        MemorySegment cap = Errno.captureSegment();
        MemorySegment mr;
        try {
            mr = (MemorySegment) REG_DM_MR_OP.invokeExact(op, cap, pd, dm, offset, length, access);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        return LibIbverbs.checkPtr("ibv_reg_dm_mr", mr, cap).reinterpret(ObjectLayout.MR_SIZE);
    }

    /**
     * {@code ibv_memcpy_to_dm(dm, offset, host, host.byteSize())}: 0 or the provider's errno. The
     * segment travels by reference, so its scope stays alive for the call (a closed one throws).
     */
    public static int memcpyToDm(MemorySegment dm, long offset, MemorySegment host) {
        MemorySegment fn = dm.get(ADDRESS, DM_MEMCPY_TO_DM);
        try {
            return (int) MEMCPY_TO_DM.invokeExact(fn, dm, offset, host, host.byteSize());
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code ibv_memcpy_from_dm(host, dm, offset, host.byteSize())}: 0 or the provider's errno. */
    public static int memcpyFromDm(MemorySegment host, MemorySegment dm, long offset) {
        MemorySegment fn = dm.get(ADDRESS, DM_MEMCPY_FROM_DM);
        try {
            return (int) MEMCPY_FROM_DM.invokeExact(fn, host, dm, offset, host.byteSize());
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }
}
