package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Collections;
import java.util.EnumSet;
import java.util.Set;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.CompletionExLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.ExtendedVerbs;
import org.verbs4j.natives.InlineVerbs;

/**
 * An extended completion queue ({@code struct ibv_cq_ex}, made by {@code ibv_create_cq_ex}):
 * polled with {@code ibv_start_poll} / {@code ibv_next_poll} / {@code ibv_end_poll}, reading per
 * completion only the {@link CompletionField}s it was created to deliver, into a reusable
 * {@link ExtendedCompletions}; allocation-free.
 *
 * <p>It <em>is</em> a completion queue: {@link #queue()} is the same CQ as a
 * {@link CompletionQueue} (what {@code ibv_cq_ex_to_cq} gives in C), with its lifetime and safety
 * model unchanged: give it to {@link QueuePairInit#of} to complete queue pairs here, arm it with
 * {@link CompletionQueue#requestNotify} for its completion channel, and close it (it refuses
 * while queue pairs use it). A poll enters the queue's poll gate, so a second thread polling at
 * the same moment gets a {@link ResourceBusyException}, a close racing a poll waits for it, and
 * in checked mode each poll credits its completions to their queue pairs (so in checked mode the
 * queue also reads each completion's QP number, whether or not {@link CompletionField#QP_NUM} was
 * asked for). Every poll that {@code start_poll} began is ended with {@code end_poll}, even when
 * reading a field throws.
 *
 * <p>Timestamps: {@link CompletionField#COMPLETION_TIMESTAMP} needs a device whose
 * {@code completion_timestamp_mask} is not 0 (refused otherwise, before the provider is asked);
 * {@link #clockNanos} converts raw ticks with the device's {@code hca_core_clock}, and
 * {@link #rawClock} reads the device's clock now through {@code ibv_query_rt_values_ex}.
 */
public final class CompletionQueueEx implements AutoCloseable {
    private static final boolean CHECKED = Verbs.CHECKED;

    private final CompletionQueue cq;
    private final Context context;
    private final Set<CompletionField> fields;
    private final long address;
    private final MemorySegment startFn;
    private final MemorySegment nextFn;
    private final MemorySegment endFn;
    private final MemorySegment opcodeFn;
    private final MemorySegment vendorErrFn;
    private final MemorySegment byteLenFn;
    private final MemorySegment immFn;
    private final MemorySegment qpNumFn;
    private final MemorySegment srcQpFn;
    private final MemorySegment slidFn;
    private final MemorySegment slFn;
    private final MemorySegment dlidPathBitsFn;
    private final MemorySegment timestampFn;
    private final MemorySegment cvlanFn;
    private final MemorySegment flowTagFn;
    private final MemorySegment wallclockFn;
    private final MemorySegment wcFlagsFn;
    /** The {@link CompletionField#readBit()} mask of the fields each poll reads. */
    private final int readMask;
    /** The {@code struct ibv_poll_cq_attr} start_poll takes (comp_mask 0), alive as long as the queue. */
    private final MemorySegment pollAttrSegment;

    private final long pollAttr;
    /** The {@code struct ibv_cq_ex}; read only inside the poll gate (never after the queue closed). */
    private final MemorySegment view;

    private final boolean critical;
    /**
     * Whether the provider's {@code next_poll} ends the batch itself when it finds the queue empty:
     * rxe's stores the consumer index and drops its lock there, and an {@code end_poll} after it
     * would advance past the producer (stale completions read again) and unlock twice.
     */
    private final boolean emptyNextEndsBatch;
    /** {@code hca_core_clock} in kHz (0 when the device does not report it). */
    private final long coreClockKHz;

    private CompletionQueueEx(CompletionQueue cq, Context context, Set<CompletionField> fields, long coreClockKHz) {
        this.cq = cq;
        this.context = context;
        this.fields = Collections.unmodifiableSet(EnumSet.copyOf(fields));
        this.coreClockKHz = coreClockKHz;
        this.address = cq.address;
        this.critical = context.criticalDataPath;
        this.emptyNextEndsBatch = context.providerName().filter("rxe"::equals).isPresent();
        MemorySegment x = MemorySegment.ofAddress(address).reinterpret(CompletionExLayout.CQ_EX_SIZE);
        startFn = fn(x, CompletionExLayout.START_POLL);
        nextFn = fn(x, CompletionExLayout.NEXT_POLL);
        endFn = fn(x, CompletionExLayout.END_POLL);
        opcodeFn = fn(x, CompletionExLayout.READ_OPCODE);
        vendorErrFn = fn(x, CompletionExLayout.READ_VENDOR_ERR);
        byteLenFn = fn(x, CompletionExLayout.READ_BYTE_LEN);
        immFn = fn(x, CompletionExLayout.READ_IMM_DATA);
        qpNumFn = fn(x, CompletionExLayout.READ_QP_NUM);
        srcQpFn = fn(x, CompletionExLayout.READ_SRC_QP);
        slidFn = fn(x, CompletionExLayout.READ_SLID);
        slFn = fn(x, CompletionExLayout.READ_SL);
        dlidPathBitsFn = fn(x, CompletionExLayout.READ_DLID_PATH_BITS);
        timestampFn = fn(x, CompletionExLayout.READ_COMPLETION_TS);
        cvlanFn = fn(x, CompletionExLayout.READ_CVLAN);
        flowTagFn = fn(x, CompletionExLayout.READ_FLOW_TAG);
        wallclockFn = fn(x, CompletionExLayout.READ_COMPLETION_WALLCLOCK_NS);
        wcFlagsFn = fn(x, CompletionExLayout.READ_WC_FLAGS);
        int mask = 0;
        for (CompletionField f : fields) {
            mask |= f.readBit();
        }
        if (CHECKED) {
            mask |= CompletionField.QP_NUM.readBit();
        }
        this.readMask = mask;
        this.pollAttrSegment = Arena.ofAuto().allocate(CompletionExLayout.POLL_ATTR_SIZE, 8);
        this.pollAttr = pollAttrSegment.address();
        this.view = x;
        if (startFn.equals(MemorySegment.NULL)
                || nextFn.equals(MemorySegment.NULL)
                || endFn.equals(MemorySegment.NULL)
                || opcodeFn.equals(MemorySegment.NULL)
                || wcFlagsFn.equals(MemorySegment.NULL)) {
            cq.close();
            throw new InvalidRequestException(
                    "ibv_create_cq_ex",
                    "the provider's extended CQ has no start_poll/next_poll/end_poll/read_opcode/read_wc_flags",
                    "use Context.createCompletionQueue and CompletionQueue.poll on this device");
        }
        for (CompletionField f : fields) {
            if (readerOf(f).equals(MemorySegment.NULL)) {
                cq.close();
                throw VerbsException.create(
                        "ibv_create_cq_ex",
                        Errno.EOPNOTSUPP,
                        "the provider's extended CQ has no reader for " + f,
                        "create the queue without CompletionField." + f);
            }
        }
    }

    private static MemorySegment fn(MemorySegment cqEx, long offset) {
        return cqEx.get(java.lang.foreign.ValueLayout.ADDRESS, offset);
    }

    private MemorySegment readerOf(CompletionField f) {
        return switch (f) {
            case BYTE_LEN -> byteLenFn;
            case IMM -> immFn;
            case QP_NUM -> qpNumFn;
            case SRC_QP -> srcQpFn;
            case SLID -> slidFn;
            case SL -> slFn;
            case DLID_PATH_BITS -> dlidPathBitsFn;
            case COMPLETION_TIMESTAMP -> timestampFn;
            case CVLAN -> cvlanFn;
            case FLOW_TAG -> flowTagFn;
            case COMPLETION_TIMESTAMP_WALLCLOCK -> wallclockFn;
        };
    }

    /** Creates the native CQ through {@code create} ({@code ibv_create_cq_ex}; a test's stand-in). */
    @FunctionalInterface
    interface Creator {
        MemorySegment create(MemorySegment context, MemorySegment cqInitAttrEx);
    }

    static CompletionQueueEx create(
            Context context,
            int minEntries,
            Set<CompletionField> fields,
            CompletionChannel channel,
            int compVector,
            Creator create,
            NativeResource.Destroyer destroy) {
        return create(context, minEntries, fields, channel, compVector, null, create, destroy);
    }

    /** As above, on {@code parentDomain} ({@code IBV_CQ_INIT_ATTR_MASK_PD}; null: none). */
    static CompletionQueueEx create(
            Context context,
            int minEntries,
            Set<CompletionField> fields,
            CompletionChannel channel,
            int compVector,
            ProtectionDomain parentDomain,
            Creator create,
            NativeResource.Destroyer destroy) {
        context.ensureOpen("ibv_create_cq_ex");
        if (parentDomain != null) {
            parentDomain.ensureOpen("ibv_create_cq_ex");
            parentDomain.requireContext(
                    "ibv_create_cq_ex", context, "completion queue", "allocate the parent domain on the same context");
            if (parentDomain.threadDomain() == null) {
                throw new InvalidRequestException(
                        "ibv_create_cq_ex",
                        parentDomain.describe() + " is not a parent domain",
                        "pass a parent domain (ThreadDomain.allocateParentDomain(pd)), or none");
            }
        }
        if (fields == null || fields.contains(null)) {
            throw new InvalidRequestException(
                    "ibv_create_cq_ex", "fields is null or holds null", "pass EnumSet.noneOf(CompletionField.class)");
        }
        EnumSet<CompletionField> asked =
                fields.isEmpty() ? EnumSet.noneOf(CompletionField.class) : EnumSet.copyOf(fields);
        long clock = 0;
        if (asked.contains(CompletionField.COMPLETION_TIMESTAMP)
                || asked.contains(CompletionField.COMPLETION_TIMESTAMP_WALLCLOCK)) {
            long[] timestamps = timestampAttributes(context);
            if (timestamps[0] == 0) {
                throw VerbsException.create(
                        "ibv_create_cq_ex",
                        Errno.EOPNOTSUPP,
                        context.deviceName()
                                + " reports completion_timestamp_mask 0: it makes no completion timestamps",
                        "create the queue without COMPLETION_TIMESTAMP"
                                + " (and COMPLETION_TIMESTAMP_WALLCLOCK); take System.nanoTime() at the poll instead");
            }
            clock = timestamps[1];
        }
        long wcFlags = CompletionField.wcFlags(asked) | (CHECKED ? CompletionExLayout.WC_EX_WITH_QP_NUM : 0);
        CompletionQueue cq;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(CompletionExLayout.INIT_SIZE, 8);
            cq = context.createCq(
                    minEntries,
                    channel,
                    compVector,
                    null,
                    parentDomain,
                    (ctx, cqe, ch, vector) -> {
                        if (parentDomain != null) {
                            attr.set(JAVA_INT, CompletionExLayout.INIT_COMP_MASK, CompletionExLayout.INIT_ATTR_MASK_PD);
                            attr.set(
                                    java.lang.foreign.ValueLayout.ADDRESS,
                                    CompletionExLayout.INIT_PARENT_DOMAIN,
                                    parentDomain.handle);
                        }
                        attr.set(JAVA_INT, CompletionExLayout.INIT_CQE, cqe);
                        attr.set(java.lang.foreign.ValueLayout.ADDRESS, CompletionExLayout.INIT_CHANNEL, ch);
                        attr.set(JAVA_INT, CompletionExLayout.INIT_COMP_VECTOR, vector);
                        attr.set(JAVA_LONG, CompletionExLayout.INIT_WC_FLAGS, wcFlags);
                        try {
                            return create.create(ctx, attr);
                        } catch (VerbsException e) {
                            if (e.errno() == Errno.EOPNOTSUPP || e.errno() == Errno.EINVAL) {
                                throw VerbsException.create(
                                        "ibv_create_cq_ex",
                                        e.errno(),
                                        context.deviceName() + " refused wc_flags 0x" + Long.toHexString(wcFlags) + " ("
                                                + asked + ")",
                                        "ask for fewer CompletionFields (rxe delivers BYTE_LEN, IMM, QP_NUM, SRC_QP,"
                                                + " SLID, SL and DLID_PATH_BITS)");
                            }
                            throw e;
                        }
                    },
                    destroy);
        }
        return new CompletionQueueEx(cq, context, asked, clock);
    }

    /** The completion queue itself, as a {@link CompletionQueue} (for queue pairs, arming, closing). */
    public CompletionQueue queue() {
        return cq;
    }

    /** The fields each completion delivers (as asked at creation). */
    public Set<CompletionField> fields() {
        return fields;
    }

    /** The number of entries the provider granted. */
    public int capacity() {
        return cq.capacity();
    }

    /** True until {@link #close()}. */
    public boolean isOpen() {
        return cq.isOpen();
    }

    /**
     * {@code ibv_start_poll}, then {@code ibv_next_poll} until {@code out} is full or the queue is
     * empty, then {@code ibv_end_poll}: reaps up to {@code out.capacity()} completions into
     * {@code out} (overwriting what it held) and returns how many. Allocation-free.
     */
    public int poll(ExtendedCompletions out) {
        return pollAppend(out, 0);
    }

    /**
     * Busy-polls until at least {@code min} completions were reaped into {@code out} (appended
     * after one another) or {@code timeout} passed; returns how many it holds. For tests and setup.
     */
    public int poll(ExtendedCompletions out, int min, Duration timeout) {
        cq.ensureOpen("ibv_start_poll");
        if (min > out.capacity) {
            throw VerbsException.create(
                    "ibv_start_poll",
                    Errno.EINVAL,
                    "min " + min + " exceeds the array's capacity " + out.capacity,
                    null);
        }
        long deadline = Timeouts.deadline("ibv_start_poll", timeout);
        int have = 0;
        out.count = 0;
        while (have < min) {
            int n = pollAppend(out, have) - have;
            have += n;
            if (n == 0 && System.nanoTime() - deadline > 0) {
                break;
            }
            if (n == 0) {
                Thread.onSpinWait();
            }
        }
        return have;
    }

    /** One start/next/end poll into {@code out} after the {@code have} it holds; returns its new count. */
    private int pollAppend(ExtendedCompletions out, int have) {
        cq.enterPoll("ibv_start_poll");
        int n = have;
        int failure = 0;
        try {
            if (cq.asyncFailure != null) {
                throw AsyncEventDispatcher.failure("ibv_start_poll", cq.asyncFailure);
            }
            out.count = have;
            out.fieldsRead = readMask;
            if (have >= out.capacity) {
                return have;
            }
            int rc = ExtendedVerbs.startPoll(critical, startFn, address, pollAttr);
            if (rc == Errno.ENOENT) {
                return have;
            }
            if (rc != 0) {
                throw pollFailed("ibv_start_poll", rc, "the provider reported an error polling the CQ");
            }
            boolean ended = false;
            try {
                while (true) {
                    read(out, n);
                    n++;
                    if (n == out.capacity) {
                        break;
                    }
                    rc = ExtendedVerbs.nextPoll(critical, nextFn, address);
                    if (rc != 0) {
                        failure = rc == Errno.ENOENT ? 0 : rc;
                        ended = rc == Errno.ENOENT && emptyNextEndsBatch;
                        break;
                    }
                }
            } finally {
                if (!ended) {
                    ExtendedVerbs.endPoll(critical, endFn, address);
                }
                out.count = n;
                if (CHECKED && n > have) {
                    cq.credit(out, have, n);
                }
            }
        } finally {
            cq.leavePoll();
        }
        if (failure != 0) {
            throw pollFailed(
                    "ibv_next_poll",
                    failure,
                    "the provider reported an error polling the CQ after " + (n - have) + " completions");
        }
        return n;
    }

    private static VerbsException pollFailed(String verb, int errno, String detail) {
        return VerbsException.create(
                verb,
                errno,
                detail,
                "a CQ in error (overrun) stays so: look for IBV_EVENT_CQ_ERR with Context.nextAsyncEvent,"
                        + " then close and recreate the queue with more entries");
    }

    /** Reads the current completion into entry {@code i} of {@code out}: the fields of {@link #readMask} only. */
    private void read(ExtendedCompletions out, int i) {
        long cqx = address;
        int m = readMask;
        int status = statusNow();
        out.wrId[i] = wrIdNow();
        out.status[i] = status;
        out.opcode[i] = ExtendedVerbs.readU32(opcodeFn, cqx);
        out.vendorErr[i] = status == CompletionStatus.SUCCESS ? 0 : ExtendedVerbs.readU32(vendorErrFn, cqx);
        if (m == 0) {
            return;
        }
        if ((m & B_BYTE_LEN) != 0) {
            out.byteLen[i] = ExtendedVerbs.readU32(byteLenFn, cqx);
        }
        if ((m & B_IMM) != 0) {
            out.imm[i] = ExtendedVerbs.readU32(immFn, cqx);
            out.wcFlags[i] = ExtendedVerbs.readU32(wcFlagsFn, cqx); // whether it carries one
        }
        if ((m & B_QP_NUM) != 0) {
            out.qpNum[i] = ExtendedVerbs.readU32(qpNumFn, cqx);
        }
        if ((m & B_TIMESTAMP) != 0) {
            out.timestamp[i] = ExtendedVerbs.readU64(timestampFn, cqx);
        }
        if ((m & B_WALLCLOCK) != 0) {
            out.wallclockNs[i] = ExtendedVerbs.readU64(wallclockFn, cqx);
        }
        if ((m & B_RARE) != 0) {
            readRare(out, i, m, cqx);
        }
    }

    private void readRare(ExtendedCompletions out, int i, int m, long cqx) {
        if ((m & CompletionField.SRC_QP.readBit()) != 0) {
            out.srcQp[i] = ExtendedVerbs.readU32(srcQpFn, cqx);
        }
        if ((m & CompletionField.SLID.readBit()) != 0) {
            out.slid[i] = ExtendedVerbs.readU32(slidFn, cqx);
        }
        if ((m & CompletionField.SL.readBit()) != 0) {
            out.sl[i] = ExtendedVerbs.readU8(slFn, cqx);
        }
        if ((m & CompletionField.DLID_PATH_BITS.readBit()) != 0) {
            out.dlidPathBits[i] = ExtendedVerbs.readU8(dlidPathBitsFn, cqx);
        }
        if ((m & CompletionField.CVLAN.readBit()) != 0) {
            out.cvlan[i] = ExtendedVerbs.readU16(cvlanFn, cqx);
        }
        if ((m & CompletionField.FLOW_TAG.readBit()) != 0) {
            out.flowTag[i] = ExtendedVerbs.readU32(flowTagFn, cqx);
        }
    }

    private static final int B_BYTE_LEN = CompletionField.BYTE_LEN.readBit();
    private static final int B_IMM = CompletionField.IMM.readBit();
    private static final int B_QP_NUM = CompletionField.QP_NUM.readBit();
    private static final int B_TIMESTAMP = CompletionField.COMPLETION_TIMESTAMP.readBit();
    private static final int B_WALLCLOCK = CompletionField.COMPLETION_TIMESTAMP_WALLCLOCK.readBit();
    private static final int B_RARE = CompletionField.SRC_QP.readBit()
            | CompletionField.SLID.readBit()
            | CompletionField.SL.readBit()
            | CompletionField.DLID_PATH_BITS.readBit()
            | CompletionField.CVLAN.readBit()
            | CompletionField.FLOW_TAG.readBit();

    /** {@code cq->status}, which start_poll and next_poll set. */
    private int statusNow() {
        return view.get(JAVA_INT, CompletionExLayout.STATUS);
    }

    /** {@code cq->wr_id}, which start_poll and next_poll set. */
    private long wrIdNow() {
        return view.get(JAVA_LONG, CompletionExLayout.WR_ID);
    }

    /**
     * {@code ibv_query_rt_values_ex}: the device's raw clock now, in the ticks of
     * {@link ExtendedCompletions#completionTimestamp}. Throws EOPNOTSUPP when the provider has no
     * {@code query_rt_values} (rxe has none).
     */
    public long rawClock() {
        cq.ensureOpen("ibv_query_rt_values_ex");
        context.pin("ibv_query_rt_values_ex");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment values = a.allocate(CompletionExLayout.VALUES_SIZE, 8);
            values.set(JAVA_INT, CompletionExLayout.VALUES_COMP_MASK, CompletionExLayout.VALUES_MASK_RAW_CLOCK);
            int rc = ExtendedVerbs.queryRtValues(context.handle, values);
            if (rc != 0) {
                throw VerbsException.create(
                        "ibv_query_rt_values_ex",
                        rc,
                        context.deviceName() + " cannot read its completion clock",
                        "convert completion timestamps with clockNanos (hca_core_clock) instead");
            }
            return values.get(JAVA_LONG, CompletionExLayout.VALUES_RAW_CLOCK_SEC) * 1_000_000_000L
                    + values.get(JAVA_LONG, CompletionExLayout.VALUES_RAW_CLOCK_NSEC);
        } finally {
            context.unpin();
        }
    }

    /**
     * {@code ibv_query_device_ex}: {@code {completion_timestamp_mask, hca_core_clock}} of the
     * context's device (0 where the device reports none).
     */
    static long[] timestampAttributes(Context context) {
        context.pin("ibv_query_device_ex");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(CompletionExLayout.DEVICE_ATTR_EX_SIZE, 8);
            InlineVerbs.queryDeviceEx(context.handle, attr, CompletionExLayout.DEVICE_ATTR_EX_SIZE);
            return new long[] {
                attr.get(JAVA_LONG, CompletionExLayout.DEVICE_ATTR_EX_COMPLETION_TIMESTAMP_MASK),
                attr.get(JAVA_LONG, CompletionExLayout.DEVICE_ATTR_EX_HCA_CORE_CLOCK)
            };
        } finally {
            context.unpin();
        }
    }

    /**
     * Converts raw clock ticks (a {@link CompletionField#COMPLETION_TIMESTAMP}, or a difference of
     * two) to nanoseconds with the device's {@code hca_core_clock}; refused when the queue was not
     * created with timestamps or the device reports no clock rate.
     */
    public long clockNanos(long ticks) {
        if (coreClockKHz <= 0) {
            throw VerbsException.create(
                    "ibv_query_device_ex",
                    Errno.EOPNOTSUPP,
                    "no hca_core_clock for this queue (not created with timestamps, or the device reports 0 kHz)",
                    "create it with CompletionField.COMPLETION_TIMESTAMP on a device that makes them");
        }
        return ticks / coreClockKHz * 1_000_000L + ticks % coreClockKHz * 1_000_000L / coreClockKHz;
    }

    /** Closes the queue ({@link CompletionQueue#close()}): refused while queue pairs use it. */
    @Override
    public void close() {
        cq.close();
    }

    @Override
    public String toString() {
        return "CompletionQueueEx(" + cq.describe() + ", fields " + fields + ")";
    }
}
