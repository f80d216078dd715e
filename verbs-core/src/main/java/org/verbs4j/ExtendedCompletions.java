package org.verbs4j;

import java.nio.ByteOrder;

/**
 * A reusable array of extended completions that {@link CompletionQueueEx#poll} fills: for each,
 * the work request id, status and opcode, the vendor error of a failed one, and the
 * {@link CompletionField}s the queue was created to deliver (reading any other field is
 * refused). Plain Java arrays allocated once, here: a poll into it allocates nothing.
 *
 * <p>Not thread-safe: one poller fills and reads it at a time (as with {@link WorkCompletions}).
 */
public final class ExtendedCompletions extends Reaped {
    private static final boolean LITTLE_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    final int capacity;
    int count;
    /** The fields the last poll read ({@link CompletionField#readBit()} bits). */
    int fieldsRead;

    final long[] wrId;
    final int[] status;
    final int[] opcode;
    final int[] vendorErr;
    final int[] byteLen;
    final int[] imm;
    final int[] qpNum;
    final int[] srcQp;
    final int[] slid;
    final int[] sl;
    final int[] dlidPathBits;
    final long[] timestamp;
    final int[] cvlan;
    final int[] flowTag;
    final long[] wallclockNs;
    final int[] wcFlags;

    /** Room for {@code capacity} completions (1 to 65536). */
    public ExtendedCompletions(int capacity) {
        if (capacity < 1 || capacity > 65536) {
            throw new InvalidRequestException(
                    "ExtendedCompletions",
                    "capacity " + capacity + " is outside 1..65536",
                    "poll in batches of at most 65536 (a few dozen is typical)");
        }
        this.capacity = capacity;
        wrId = new long[capacity];
        status = new int[capacity];
        opcode = new int[capacity];
        vendorErr = new int[capacity];
        byteLen = new int[capacity];
        imm = new int[capacity];
        qpNum = new int[capacity];
        srcQp = new int[capacity];
        slid = new int[capacity];
        sl = new int[capacity];
        dlidPathBits = new int[capacity];
        timestamp = new long[capacity];
        cvlan = new int[capacity];
        flowTag = new int[capacity];
        wallclockNs = new long[capacity];
        wcFlags = new int[capacity];
    }

    /** How many completions it can hold. */
    public int capacity() {
        return capacity;
    }

    /** How many completions the last poll left in it. */
    public int count() {
        return count;
    }

    /** Whether the last poll read {@code field} (the queue was created to deliver it). */
    public boolean has(CompletionField field) {
        return (fieldsRead & field.readBit()) != 0;
    }

    private int index(int i) {
        if (i < 0 || i >= count) {
            throw new InvalidRequestException(
                    "ExtendedCompletions",
                    "index " + i + " is outside the " + count + " completions the last poll reaped",
                    "read indexes 0 to count() - 1");
        }
        return i;
    }

    private int index(int i, CompletionField field) {
        if ((fieldsRead & field.readBit()) == 0) {
            throw new InvalidRequestException(
                    "ExtendedCompletions." + field,
                    "the completion queue was not created to deliver " + field,
                    "create it with CompletionField." + field + " among its fields");
        }
        return index(i);
    }

    /** {@code wr_id} of completion {@code i}. */
    public long wrId(int i) {
        return wrId[index(i)];
    }

    /** The {@code IBV_WC_*} status of completion {@code i} ({@link CompletionStatus#SUCCESS} is 0). */
    public int status(int i) {
        return status[index(i)];
    }

    /** The {@code IBV_WC_*} opcode of completion {@code i} (see {@link CompletionOpcode}); valid on success. */
    public int opcode(int i) {
        return opcode[index(i)];
    }

    /** The vendor error of completion {@code i}: read for failed completions, 0 for successful ones. */
    public int vendorError(int i) {
        return vendorErr[index(i)];
    }

    /** {@link CompletionField#BYTE_LEN} of completion {@code i}. */
    public int byteLength(int i) {
        return byteLen[index(i, CompletionField.BYTE_LEN)];
    }

    /**
     * {@link CompletionField#IMM} of completion {@code i} in host byte order (as the sender passed
     * it; {@code ibv_wc_read_imm_data} gives it in network order).
     */
    public int immediateData(int i) {
        int raw = imm[index(i, CompletionField.IMM)];
        return LITTLE_ENDIAN ? Integer.reverseBytes(raw) : raw;
    }

    /** {@link CompletionField#QP_NUM} of completion {@code i}. */
    public int qpNumber(int i) {
        return qpNum[index(i, CompletionField.QP_NUM)];
    }

    /** {@link CompletionField#SRC_QP} of completion {@code i}. */
    public int sourceQpNumber(int i) {
        return srcQp[index(i, CompletionField.SRC_QP)];
    }

    /** {@link CompletionField#SLID} of completion {@code i}. */
    public int sourceLid(int i) {
        return slid[index(i, CompletionField.SLID)];
    }

    /** {@link CompletionField#SL} of completion {@code i}. */
    public int serviceLevel(int i) {
        return sl[index(i, CompletionField.SL)];
    }

    /** {@link CompletionField#DLID_PATH_BITS} of completion {@code i}. */
    public int dlidPathBits(int i) {
        return dlidPathBits[index(i, CompletionField.DLID_PATH_BITS)];
    }

    /** {@link CompletionField#COMPLETION_TIMESTAMP} of completion {@code i}: raw device clock ticks. */
    public long completionTimestamp(int i) {
        return timestamp[index(i, CompletionField.COMPLETION_TIMESTAMP)];
    }

    /** {@link CompletionField#CVLAN} of completion {@code i}. */
    public int cvlan(int i) {
        return cvlan[index(i, CompletionField.CVLAN)];
    }

    /** {@link CompletionField#FLOW_TAG} of completion {@code i}. */
    public int flowTag(int i) {
        return flowTag[index(i, CompletionField.FLOW_TAG)];
    }

    /** {@link CompletionField#COMPLETION_TIMESTAMP_WALLCLOCK} of completion {@code i}, in nanoseconds. */
    public long completionWallclockNanos(int i) {
        return wallclockNs[index(i, CompletionField.COMPLETION_TIMESTAMP_WALLCLOCK)];
    }

    /**
     * The {@code IBV_WC_*} flags of completion {@code i} ({@code IBV_WC_WITH_IMM}, ...), read with
     * {@link CompletionField#IMM}.
     */
    public int flags(int i) {
        return wcFlags[index(i, CompletionField.IMM)];
    }

    /** True when completion {@code i} carries immediate data (read with {@link CompletionField#IMM}). */
    public boolean hasImmediate(int i) {
        return (flags(i) & WorkCompletions.WC_WITH_IMM) != 0;
    }

    @Override
    int rawQpNumber(int i) {
        return qpNum[i];
    }

    @Override
    long rawStatusAndOpcode(int i) {
        long s = status[i] & 0xffffffffL;
        long o = opcode[i] & 0xffffffffL;
        return LITTLE_ENDIAN ? s | o << 32 : o | s << 32;
    }
}
