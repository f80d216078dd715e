package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import org.verbs4j.natives.CompletionLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.VerbsException;

/**
 * A reusable native array of {@code struct ibv_wc} that {@link CompletionQueue#poll} fills, read
 * in place by index, like a flyweight: reading a completion allocates nothing (status texts are
 * libibverbs' own strings, fetched once).
 *
 * <p>Owns its native memory (freed by {@link #close()}). Not thread-safe: one poller uses it.
 */
public final class WorkCompletions implements AutoCloseable {
    /** {@code IBV_WC_SUCCESS}. */
    public static final int SUCCESS = 0;
    /** {@code IBV_WC_WITH_IMM}. */
    public static final int WC_WITH_IMM = 1 << 1;
    /** {@code IBV_WC_GRH}. */
    public static final int WC_GRH = 1 << 0;

    private final OwnedMemory memory;
    private final MemorySegment wcs;
    private final MemorySegment owned; // the arena segment, for segment(): a closed arena makes raw access fail safely
    final long address;
    final int capacity;
    int count;
    private boolean closed;

    /** An array of {@code capacity} completions. */
    public WorkCompletions(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        this.memory = new OwnedMemory(this, "work completion array");
        // a global-scope view: reads are guarded by count, which close() resets (see SendWorkRequests)
        this.owned = memory.allocate(CompletionLayout.WC_SIZE * capacity, 8);
        this.wcs = WorkRequestChain.globalView(owned);
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
        return (long) Objects.checkIndex(i, count) * CompletionLayout.WC_SIZE + field;
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

    /** The raw {@code struct ibv_wc} array. */
    public MemorySegment segment() {
        return owned;
    }

    void ensureUsable(String verb) {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "the WorkCompletions array is closed", "create a new one");
        }
    }

    /** Frees the native array; using it afterwards throws. */
    @Override
    public void close() {
        if (closed) {
            throw new VerbsException("WorkCompletions.close", Errno.EBADF, "already closed", "close it once");
        }
        closed = true;
        count = 0;
        memory.close();
    }
}
