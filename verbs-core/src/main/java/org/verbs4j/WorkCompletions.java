package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.CompletionLayout;

/**
 * A reusable native array of {@code struct ibv_wc} that {@link CompletionQueue#poll} fills, read
 * in place by index, like a flyweight: reading a completion allocates nothing (status texts are
 * libibverbs' own strings, fetched once).
 *
 * <p>Owns its native memory: an automatic arena freed once the array is unreachable, so a
 * {@link #close()} racing a poll on another thread cannot free memory the provider writes into;
 * close makes the array unusable and invalidates the raw view. Not thread-safe: one poller uses it.
 */
public final class WorkCompletions extends Reaped implements AutoCloseable {
    /** {@code IBV_WC_SUCCESS}. */
    public static final int SUCCESS = 0;
    /** {@code IBV_WC_WITH_IMM}. */
    public static final int WC_WITH_IMM = 1 << 1;
    /** {@code IBV_WC_GRH}. */
    public static final int WC_GRH = 1 << 0;

    private final LeakReport leak;
    private final java.lang.foreign.Arena memory = java.lang.foreign.Arena.ofAuto(); // freed with this object
    private final RawViews views = new RawViews(); // of segment(), closed by close()
    private final MemorySegment wcs;
    final long address;
    final int capacity;
    int count;
    private boolean closed;

    /** An array of {@code capacity} completions. */
    public WorkCompletions(int capacity) {
        if (capacity <= 0 || capacity > 1 << 24) {
            throw new InvalidRequestException(
                    "WorkCompletions",
                    "capacity " + capacity + " is outside 1..2^24",
                    "give a capacity of at least 1 and at most 16,777,216 completions");
        }
        MemorySegment raw;
        try {
            raw = memory.allocate(CompletionLayout.WC_SIZE * capacity, 8);
        } catch (OutOfMemoryError e) { // malloc refused: a size the limit allows, on a machine without the room
            throw new VerbsException(
                    "WorkCompletions",
                    org.verbs4j.natives.Errno.ENOMEM,
                    "no native memory for " + capacity + " completions (" + CompletionLayout.WC_SIZE * capacity
                            + " bytes)",
                    "give a smaller capacity");
        }
        this.leak = new LeakReport(this, "work completion array");
        // a global-scope view: reads are guarded by count, which close() resets (see WorkRequestChain)
        this.wcs = WorkRequestChain.globalView(raw);
        this.address = wcs.address();
        this.capacity = capacity;
    }

    /** How many completions the last poll reaped. */
    public int count() {
        return count;
    }

    /** How many completions it can hold. */
    public int capacity() {
        return capacity;
    }

    private long at(int i, long field) {
        if (Integer.compareUnsigned(i, count) >= 0) {
            throw outOfRange(i);
        }
        return (long) i * CompletionLayout.WC_SIZE + field;
    }

    private VerbsException outOfRange(int i) {
        return new InvalidRequestException(
                "ibv_wc",
                "completion #" + i + " does not exist: the last poll reaped " + count
                        + (closed ? " (the array is closed)" : ""),
                "read indexes 0 .. count()-1");
    }

    /** The work request id of completion {@code i}. */
    public long wrId(int i) {
        return wcs.get(JAVA_LONG, at(i, CompletionLayout.WR_ID));
    }

    /** {@code enum ibv_wc_status} of completion {@code i} (0 = success). */
    public int status(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.STATUS));
    }

    /** True when completion {@code i} succeeded. */
    public boolean isSuccess(int i) {
        return status(i) == SUCCESS;
    }

    /** libibverbs' text for the status of completion {@code i} ({@code ibv_wc_status_str}). */
    public String statusText(int i) {
        return CompletionStatus.text(status(i));
    }

    /** {@code enum ibv_wc_opcode} of completion {@code i} (see {@link CompletionOpcode}). */
    public int opcode(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.OPCODE));
    }

    /** The vendor error of completion {@code i}. */
    public int vendorError(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.VENDOR_ERR));
    }

    /** Bytes received (receives, RDMA READ) of completion {@code i}. */
    public int byteLength(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.BYTE_LEN));
    }

    /** The immediate data (host byte order) of completion {@code i}; valid when {@link #hasImmediate}. */
    public int immediate(int i) {
        return Integer.reverseBytes(wcs.get(JAVA_INT, at(i, CompletionLayout.IMM_DATA)));
    }

    /** True when completion {@code i} carries immediate data. */
    public boolean hasImmediate(int i) {
        return (flags(i) & WC_WITH_IMM) != 0;
    }

    /** {@code wc_flags} of completion {@code i}. */
    public int flags(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.WC_FLAGS));
    }

    /** The local QP number completion {@code i} belongs to. */
    public int qpNumber(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.QP_NUM));
    }

    /** The source QP number of a UD receive. */
    public int sourceQp(int i) {
        return wcs.get(JAVA_INT, at(i, CompletionLayout.SRC_QP));
    }

    /** The service level of a UD receive. */
    public int serviceLevel(int i) {
        return Byte.toUnsignedInt(wcs.get(JAVA_BYTE, at(i, CompletionLayout.SL)));
    }

    // unchecked reads for the poller's own bookkeeping (index already known to be in range)
    @Override
    int rawQpNumber(int i) {
        return wcs.get(JAVA_INT, (long) i * CompletionLayout.WC_SIZE + CompletionLayout.QP_NUM);
    }

    /**
     * Status and opcode of completion {@code i} in one 8-byte read (they are adjacent in
     * {@code struct ibv_wc}, at an 8-byte boundary): take them apart with {@link #statusOf} and
     * {@link #opcodeOf}.
     */
    @Override
    long rawStatusAndOpcode(int i) {
        return wcs.get(JAVA_LONG, (long) i * CompletionLayout.WC_SIZE + CompletionLayout.STATUS);
    }

    private static final boolean LITTLE_ENDIAN = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN;

    static int statusOf(long statusAndOpcode) {
        return (int) (LITTLE_ENDIAN ? statusAndOpcode : statusAndOpcode >>> 32);
    }

    static int opcodeOf(long statusAndOpcode) {
        return (int) (LITTLE_ENDIAN ? statusAndOpcode >>> 32 : statusAndOpcode);
    }

    static {
        if (CompletionLayout.OPCODE != CompletionLayout.STATUS + 4
                || CompletionLayout.STATUS % 8 != 0
                || CompletionLayout.WC_SIZE % 8 != 0) {
            throw new ExceptionInInitializerError("struct ibv_wc: status and opcode are not one aligned 8-byte word");
        }
    }

    /**
     * The raw {@code struct ibv_wc} array: restricted to modules with native access, and a view
     * that stops working when the array is closed.
     */
    public MemorySegment segment() {
        Restricted.check("WorkCompletions.segment");
        try {
            return MemorySegment.ofAddress(address)
                    .reinterpret(CompletionLayout.WC_SIZE * capacity, views.arena(), null);
        } catch (IllegalStateException e) {
            throw new ResourceClosedException(
                    "WorkCompletions.segment", "the array is closed", "take the segment of an open array");
        }
    }

    void ensureUsable(String verb) {
        if (closed) {
            throw new ResourceClosedException(verb, "the WorkCompletions array is closed", "create a new one");
        }
    }

    /** Frees the native array; using it afterwards throws. */
    @Override
    public void close() {
        if (closed) {
            throw new ResourceClosedException("WorkCompletions.close", "already closed", "close it once");
        }
        closed = true;
        count = 0;
        leak.closed();
        views.close();
    }
}
