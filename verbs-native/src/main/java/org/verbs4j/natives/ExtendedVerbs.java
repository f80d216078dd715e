package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * Dispatch for the extended completion queue's {@code static inline} verbs of {@code verbs.h}:
 * {@code ibv_start_poll}, {@code ibv_next_poll}, {@code ibv_end_poll} and the
 * {@code ibv_wc_read_*} field readers are function pointers in {@code struct ibv_cq_ex} (offsets
 * in {@link CompletionExLayout}); {@code ibv_query_rt_values_ex} is a {@code verbs_context} op.
 *
 * <p>Data path: {@code static final} address-less handles invoked with {@code invokeExact},
 * pointers passed as {@code long}, nothing allocated. start/next/end poll are linked both ways
 * (critical or not, chosen per provider as {@link InlineVerbs#criticalDataPath} says); the field
 * readers only read the current completion and are critical unless
 * {@value InlineVerbs#CRITICAL_PROPERTY} is false. Their return values are the verbs' own error
 * reports, so no errno is captured there.
 */
public final class ExtendedVerbs {
    private ExtendedVerbs() {}

    private static final FunctionDescriptor START = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG);
    private static final FunctionDescriptor NEXT = FunctionDescriptor.of(JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor END = FunctionDescriptor.ofVoid(JAVA_LONG);

    private static final MethodHandle START_CRITICAL =
            NativeBinding.pointer("ibv_cq_ex.start_poll", START, false, true);
    private static final MethodHandle START_STANDARD =
            NativeBinding.pointer("ibv_cq_ex.start_poll", START, false, false);
    private static final MethodHandle NEXT_CRITICAL = NativeBinding.pointer("ibv_cq_ex.next_poll", NEXT, false, true);
    private static final MethodHandle NEXT_STANDARD = NativeBinding.pointer("ibv_cq_ex.next_poll", NEXT, false, false);
    private static final MethodHandle END_CRITICAL = NativeBinding.pointer("ibv_cq_ex.end_poll", END, false, true);
    private static final MethodHandle END_STANDARD = NativeBinding.pointer("ibv_cq_ex.end_poll", END, false, false);

    private static final MethodHandle READ_U8 = NativeBinding.pointer(
            "ibv_cq_ex.read_sl", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG), false, InlineVerbs.CRITICAL);
    private static final MethodHandle READ_U16 = NativeBinding.pointer(
            "ibv_cq_ex.read_cvlan", FunctionDescriptor.of(JAVA_SHORT, JAVA_LONG), false, InlineVerbs.CRITICAL);
    private static final MethodHandle READ_U32 = NativeBinding.pointer(
            "ibv_cq_ex.read_byte_len", FunctionDescriptor.of(JAVA_INT, JAVA_LONG), false, InlineVerbs.CRITICAL);
    private static final MethodHandle READ_U64 = NativeBinding.pointer(
            "ibv_cq_ex.read_completion_ts", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG), false, InlineVerbs.CRITICAL);

    private static final MethodHandle QUERY_RT_VALUES_OP = NativeBinding.pointer(
            "verbs_context.query_rt_values", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true, false);

    /** {@code ibv_start_poll(cq, attr)}: 0 (a completion is current), ENOENT (none), or an errno. */
    public static int startPoll(boolean critical, MemorySegment fn, long cq, long attr) {
        try {
            return critical
                    ? (int) START_CRITICAL.invokeExact(fn, cq, attr)
                    : (int) START_STANDARD.invokeExact(fn, cq, attr);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code ibv_next_poll(cq)}: 0 (the next completion is current), ENOENT (none), or an errno. */
    public static int nextPoll(boolean critical, MemorySegment fn, long cq) {
        try {
            return critical ? (int) NEXT_CRITICAL.invokeExact(fn, cq) : (int) NEXT_STANDARD.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code ibv_end_poll(cq)}: ends a poll that {@link #startPoll} began with 0. */
    public static void endPoll(boolean critical, MemorySegment fn, long cq) {
        try {
            if (critical) {
                END_CRITICAL.invokeExact(fn, cq);
            } else {
                END_STANDARD.invokeExact(fn, cq);
            }
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** A {@code uint8_t ibv_wc_read_*(cq)} reader (sl, dlid_path_bits), zero-extended. */
    public static int readU8(MemorySegment fn, long cq) {
        try {
            return (byte) READ_U8.invokeExact(fn, cq) & 0xff;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** A {@code uint16_t ibv_wc_read_*(cq)} reader (cvlan), zero-extended. */
    public static int readU16(MemorySegment fn, long cq) {
        try {
            return (short) READ_U16.invokeExact(fn, cq) & 0xffff;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** A 32-bit {@code ibv_wc_read_*(cq)} reader (opcode, byte_len, imm_data, qp_num, ...). */
    public static int readU32(MemorySegment fn, long cq) {
        try {
            return (int) READ_U32.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** A {@code uint64_t ibv_wc_read_*(cq)} reader (completion_ts, completion_wallclock_ns). */
    public static long readU64(MemorySegment fn, long cq) {
        try {
            return (long) READ_U64.invokeExact(fn, cq);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * {@code ibv_query_rt_values_ex(ctx, values)} as verbs.h does it: EOPNOTSUPP when the context
     * has no {@code query_rt_values} op, else the op's return value. Returns 0 or the errno.
     *
     * @param values at least {@link CompletionExLayout#VALUES_SIZE} bytes; comp_mask set by the caller
     */
    public static int queryRtValues(MemorySegment ctx, MemorySegment values) {
        MemorySegment op = InlineVerbs.verbsGetCtxOp(ctx, CompletionExLayout.VCTX_QUERY_RT_VALUES);
        if (op.equals(MemorySegment.NULL)) {
            return Errno.EOPNOTSUPP;
        }
        MemorySegment cap = Errno.captureSegment();
        try {
            return (int) QUERY_RT_VALUES_OP.invokeExact(op, cap, ctx, values);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }
}
