package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_ACCESS;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_ADDR;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_LENGTH;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_MR;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_MW;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_RKEY;
import static org.verbs4j.natives.QueuePairExLayout.SEND_INVALIDATE_RKEY;
import static org.verbs4j.natives.WorkRequestLayout.SEND_ATOMIC_COMPARE_ADD;
import static org.verbs4j.natives.WorkRequestLayout.SEND_ATOMIC_REMOTE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SEND_ATOMIC_RKEY;
import static org.verbs4j.natives.WorkRequestLayout.SEND_ATOMIC_SWAP;
import static org.verbs4j.natives.WorkRequestLayout.SEND_FLAGS;
import static org.verbs4j.natives.WorkRequestLayout.SEND_IMM_DATA;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_OPCODE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_RDMA_REMOTE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SEND_RDMA_RKEY;
import static org.verbs4j.natives.WorkRequestLayout.SEND_UD_AH;
import static org.verbs4j.natives.WorkRequestLayout.SEND_UD_REMOTE_QKEY;
import static org.verbs4j.natives.WorkRequestLayout.SEND_UD_REMOTE_QPN;
import static org.verbs4j.natives.WorkRequestLayout.SEND_WR_ID;
import static org.verbs4j.natives.WorkRequestLayout.SEND_WR_SIZE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_XRC_REMOTE_SRQN;
import static org.verbs4j.natives.WorkRequestLayout.SGE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LENGTH;
import static org.verbs4j.natives.WorkRequestLayout.SGE_SIZE;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;

/**
 * A preallocated chain of send work requests ({@code struct ibv_send_wr} with their
 * {@code struct ibv_sge} lists), written in place and posted with one
 * {@link QueuePair#postSend} call. Nothing is allocated per operation: a request is started with
 * an opcode method ({@link #write}, {@link #send}, {@link #read}, …), given SGEs and flags with
 * the methods that follow, and the whole chain is posted; {@link #clear()} starts over.
 *
 * <pre>{@code
 * wrs.clear().write(1, remoteAddr, rkey).sge(mr, 0, 4096).signaled();
 * qp.postSend(wrs);
 * }</pre>
 *
 * <p>In checked mode each SGE is validated against its live {@link MemoryRegion} when it is
 * added; in every mode a post is refused if a region or address handle the chain names was closed
 * since. Inline data is copied into the chain's own memory when it is added (so it may come from
 * any segment, heap included, and be reused at once). Immediate data is given in host byte order
 * (converted to the wire's big-endian here). Owns its native memory (see {@link WorkRequestChain}
 * for its lifetime); not thread-safe: one thread builds and posts it.
 */
public final class SendWorkRequests extends WorkRequestChain {
    /** {@code enum ibv_wr_opcode}. */
    public static final int OP_RDMA_WRITE = 0,
            OP_RDMA_WRITE_WITH_IMM = 1,
            OP_SEND = 2,
            OP_SEND_WITH_IMM = 3,
            OP_RDMA_READ = 4,
            OP_ATOMIC_CMP_AND_SWP = 5,
            OP_ATOMIC_FETCH_AND_ADD = 6,
            OP_LOCAL_INV = 7,
            OP_BIND_MW = 8,
            OP_SEND_WITH_INV = 9,
            OP_ATOMIC_WRITE = 15;
    /** {@code enum ibv_send_flags}. */
    public static final int FLAG_FENCE = 1, FLAG_SIGNALED = 2, FLAG_SOLICITED = 4, FLAG_INLINE = 8;

    private static final boolean CHECKED = Verbs.CHECKED;
    /** Inline bytes per request when the constructor does not say (staged on first use). */
    public static final int DEFAULT_INLINE_BYTES = 256;

    private final int inlineStride; // staging bytes per request
    private MemorySegment
            staging; // capacity x inlineStride of the chain's automatic arena, allocated on first inline()
    private long stagingAddress;
    private final AddressHandle[] destinations;
    /** The window each bind request names (null elsewhere); allocated with the chain's first bind. */
    private MemoryWindow[] windows;

    private int curOpcode;
    private long curInline; // inline bytes of the request inlineOwner (any other request has none yet)
    private int inlineOwner = -1; // the index of the request curInline belongs to
    private int destinationsHigh; // 1 + the highest index destinations[] ever held (never lowered)
    private boolean curDevice; // the current WR has an SGE of device memory (then it may not be inline)
    // A summary of the chain, kept as it is built, so that checked mode validates a post in O(1)
    // (with maxSges of the base class).
    long maxInline; // the most inline bytes of any request
    int opcodes; // bit (1 << opcode) for every opcode in the chain
    int withDestination; // requests with a UD destination
    int withSrqNumber; // requests with an XRC remote SRQ number
    /** Which requests have an XRC remote SRQ number; allocated with the chain's first one. */
    private boolean[] srqNumbered;
    /**
     * The indexes of the requests flagged SIGNALED through {@link #signaled()}, in order (the
     * first {@link #signaledCount}): checked mode's accounting reads these at post time instead of
     * every request's send_flags. Raw writes through {@link #segment()} are not seen (as with the
     * rest of the summary).
     */
    int[] signaledIndexes;

    int signaledCount;

    /**
     * A chain with room for {@value #DEFAULT_INLINE_BYTES} inline bytes per request.
     *
     * @param capacity        the most work requests one chain holds
     * @param maxSgePerRequest the most SGEs one request carries
     */
    public SendWorkRequests(int capacity, int maxSgePerRequest) {
        this(capacity, maxSgePerRequest, DEFAULT_INLINE_BYTES);
    }

    /**
     * A chain with its own inline capacity.
     *
     * @param capacity           the most work requests one chain holds
     * @param maxSgePerRequest   the most SGEs one request carries
     * @param maxInlinePerRequest the most inline bytes one request carries (staged in the chain)
     */
    public SendWorkRequests(int capacity, int maxSgePerRequest, int maxInlinePerRequest) {
        super("send work request chain", SEND_WR_SIZE, capacity, maxSgePerRequest);
        if (maxInlinePerRequest < 0 || maxInlinePerRequest > 1 << 20) {
            throw new InvalidRequestException(
                    "SendWorkRequests",
                    "maxInlinePerRequest " + maxInlinePerRequest + " is outside 0..1 MiB",
                    "give at most 1,048,576 inline bytes per request (the device's max_inline_data is usually far less)");
        }
        this.inlineStride = (maxInlinePerRequest + 7) & ~7;
        this.destinations = new AddressHandle[capacity];
        this.signaledIndexes = new int[capacity];
    }

    /** Empties the chain (the memory is reused). */
    public SendWorkRequests clear() {
        count = 0;
        restartEpoch();
        curSges = 0;
        maxSges = 0;
        maxInline = 0;
        opcodes = 0;
        withDestination = 0;
        withSrqNumber = 0;
        signaledCount = 0;
        inlineOwner = -1;
        return this;
    }

    /** Opcodes UD takes ({@code SEND}, {@code SEND_WITH_IMM}). */
    static final int SEND_OPCODES = 1 << OP_SEND | 1 << OP_SEND_WITH_IMM;
    /** Opcodes without an SGE payload (LOCAL_INV, BIND_MW; ATOMIC_WRITE carries its 8 bytes in the request). */
    static final int NO_PAYLOAD_OPCODES = 1 << OP_LOCAL_INV | 1 << OP_BIND_MW | 1 << OP_ATOMIC_WRITE;
    /** Opcodes UC does not take: RDMA READ and the atomics (those but ATOMIC_WRITE write into the local buffer). */
    static final int READ_OR_ATOMIC_OPCODES =
            1 << OP_RDMA_READ | 1 << OP_ATOMIC_CMP_AND_SWP | 1 << OP_ATOMIC_FETCH_AND_ADD | 1 << OP_ATOMIC_WRITE;
    /** Opcodes only {@link QueuePair#postSendExtended} posts (ATOMIC_WRITE: ibv_wr_atomic_write). */
    static final int EXTENDED_ONLY_OPCODES = 1 << OP_ATOMIC_WRITE;

    /** Whether the chain holds a request UD does not take (not SEND / SEND_WITH_IMM). */
    boolean hasNonSendOps() {
        return (opcodes & ~SEND_OPCODES) != 0;
    }

    /** Whether the chain holds an RDMA READ or an atomic (UC takes none). */
    boolean hasReadOrAtomicOps() {
        return (opcodes & READ_OR_ATOMIC_OPCODES) != 0;
    }

    // Hot methods keep their throw paths out of line (small bytecode stays inlinable).
    private void begin(long wrId, int opcode) {
        int i = count;
        if (closed || i == capacity) {
            throw cannotBegin();
        }
        long o = SEND_WR_SIZE * i;
        cur = o;
        curSge = sgeStride * i;
        curSges = 0;
        curOpcode = opcode;
        curDevice = false;
        opcodes |= 1 << opcode;
        if (i < destinationsHigh && destinations[i] != null) { // RC/UC chains never look (no load, no GC barrier)
            destinations[i] = null;
        }
        if (windows != null && windows[i] != null) {
            windows[i] = null;
        }
        if (srqNumbered != null && srqNumbered[i]) {
            srqNumbered[i] = false;
        }
        count = i + 1;
        // three stores: wr_id; num_sge = 0 with the opcode next to it; send_flags = 0 with imm_data
        wrs.set(JAVA_LONG, o + SEND_WR_ID, wrId);
        wrs.set(JAVA_LONG, o + SEND_NUM_SGE, pack(0, opcode));
        wrs.set(JAVA_LONG, o + SEND_FLAGS, 0L);
    }

    /** Starts a SEND. */
    public SendWorkRequests send(long wrId) {
        begin(wrId, OP_SEND);
        wrs.set(JAVA_LONG, cur + SEND_UD_AH, 0L); // no stale destination from a reused slot
        return this;
    }

    /** Starts a SEND_WITH_IMM carrying {@code immediate} (host byte order). */
    public SendWorkRequests sendWithImmediate(long wrId, int immediate) {
        begin(wrId, OP_SEND_WITH_IMM);
        wrs.set(JAVA_LONG, cur + SEND_UD_AH, 0L);
        wrs.set(JAVA_INT, cur + SEND_IMM_DATA, Integer.reverseBytes(immediate));
        return this;
    }

    /** Starts an RDMA_WRITE to {@code remoteAddress} in the peer's region {@code rkey}. */
    public SendWorkRequests write(long wrId, long remoteAddress, int rkey) {
        begin(wrId, OP_RDMA_WRITE);
        wrs.set(JAVA_LONG, cur + SEND_RDMA_REMOTE_ADDR, remoteAddress);
        wrs.set(JAVA_INT, cur + SEND_RDMA_RKEY, rkey);
        return this;
    }

    /**
     * Appends {@code n} RDMA_WRITEs of one shape in one call, each with one SGE of {@code mr}:
     * request {@code k} ({@code 0 <= k < n}) has wr_id {@code firstWrId + k}, writes to
     * {@code remoteAddress + k * remoteStride} in the peer's region {@code rkey}, and carries the
     * SGE {@code [offset + k * localStride, + length)} of {@code mr}. All are unsignaled and
     * unfenced; the last one is the current request, so a {@link #signaled()} that follows flags
     * it (and {@link #sge} could add to it). The same descriptors as {@code n} times
     * {@code write(firstWrId + k, …).sge(mr, …)}, written in one loop with the checks done once
     * for the whole range:
     * <ul>
     *   <li>every mode: the chain is open and has room for {@code n} more requests, and the
     *       region is open (the chain remembers it for each request, so the post-time liveness
     *       check covers them as for {@link #sge});</li>
     *   <li>checked mode: the first and the last SGE lie inside the region (the SGEs between them
     *       then do too), and its memory is alive.</li>
     * </ul>
     * A refused call throws before anything is written: the chain is as it was.
     *
     * <pre>{@code
     * wrs.clear().writes(32, id, remoteAddr, 4096, rkey, mr, 0, 4096, 4096).signaled();
     * qp.postSend(wrs);
     * }</pre>
     *
     * @param n             the number of requests, at least 1
     * @param firstWrId     the wr_id of the first request (the next ones count up by one)
     * @param remoteAddress the remote address of the first request
     * @param remoteStride  added to the remote address per request (0: all write the same place)
     * @param rkey          the peer's region
     * @param mr            the registered region every SGE lies in
     * @param offset        the first SGE's offset in {@code mr}
     * @param localStride   added to the offset per request (0: all send the same bytes)
     * @param length        the bytes of each SGE
     * @return this chain
     * @throws InvalidRequestException {@code n < 1}; checked mode: an SGE outside the region, or its memory freed
     * @throws QueueFullException      fewer than {@code n} requests of capacity are left
     * @throws ResourceClosedException the chain or the region is closed
     */
    public SendWorkRequests writes(
            int n,
            long firstWrId,
            long remoteAddress,
            long remoteStride,
            int rkey,
            MemoryRegion mr,
            long offset,
            long localStride,
            int length) {
        int first = count;
        if (closed || n < 1 || n > capacity - first || !mr.isOpenPlain()) {
            throw cannotAppend(n, mr);
        }
        if (CHECKED) {
            checkSgeRange(mr, offset, localStride, n, length);
        }
        // nothing can be refused from here on
        int last = first + n - 1;
        if (first < destinationsHigh) { // RC/UC chains never look
            clearDestinations(first, Math.min(last + 1, destinationsHigh));
        }
        if (windows != null) {
            java.util.Arrays.fill(windows, first, last + 1, null);
        }
        if (srqNumbered != null) { // numbered by an earlier use of these slots: not these requests
            java.util.Arrays.fill(srqNumbered, first, last + 1, false);
        }
        MemorySegment w = wrs;
        MemorySegment s = sges;
        long stride = sgeStride;
        long numSgeOpcode = pack(1, OP_RDMA_WRITE);
        long lengthKey = pack(length, mr.lkey());
        long local = mr.address() + offset;
        long remote = remoteAddress;
        long o = SEND_WR_SIZE * first;
        long so = stride * first;
        // the stores alone in one loop (the JIT hoists the segments' checks out of a loop this simple;
        // the region bookkeeping in the same loop measured twice as slow); next and sg_list stay as
        // linked at construction
        for (int k = 0; k < n; k++) {
            w.set(JAVA_LONG, o + SEND_WR_ID, firstWrId + k);
            w.set(JAVA_LONG, o + SEND_NUM_SGE, numSgeOpcode);
            w.set(JAVA_LONG, o + SEND_FLAGS, 0L);
            w.set(JAVA_LONG, o + SEND_RDMA_REMOTE_ADDR, remote);
            w.set(JAVA_INT, o + SEND_RDMA_RKEY, rkey);
            s.set(JAVA_LONG, so + SGE_ADDR, local);
            s.set(JAVA_LONG, so + SGE_LENGTH, lengthKey);
            o += SEND_WR_SIZE;
            so += stride;
            local += localStride;
            remote += remoteStride;
        }
        noteRegions(first, n, mr);
        count = last + 1;
        cur = SEND_WR_SIZE * last;
        curSge = stride * last;
        curSges = 1;
        curOpcode = OP_RDMA_WRITE;
        curDevice = !mr.hostAccessible;
        opcodes |= 1 << OP_RDMA_WRITE;
        if (maxSges < 1) {
            maxSges = 1;
        }
        return this;
    }

    /** The region of the first SGE slot of requests {@code [first, first + n)} (a chain rebuilt over the same region stores nothing: no GC barrier). */
    private void noteRegions(int first, int n, MemoryRegion mr) {
        MemoryRegion[] regions = sgeRegions;
        int slots = maxSge;
        if (slots == 1) {
            for (int i = first, end = first + n; i < end; i++) {
                if (regions[i] != mr) {
                    regions[i] = mr;
                }
            }
        } else {
            for (int i = first * slots, end = (first + n) * slots; i < end; i += slots) {
                if (regions[i] != mr) {
                    regions[i] = mr;
                }
            }
        }
    }

    private void clearDestinations(int from, int to) {
        for (int i = from; i < to; i++) {
            if (destinations[i] != null) {
                destinations[i] = null;
            }
        }
    }

    private VerbsException cannotAppend(int n, MemoryRegion mr) {
        if (closed) {
            return cannotBegin();
        }
        if (n < 1) {
            return new InvalidRequestException(
                    "ibv_post_send", "a bulk append needs at least one request: n = " + n, null);
        }
        if (n > capacity - count) {
            return new QueueFullException(
                    "ibv_post_send",
                    Errno.ENOMEM,
                    n + " more requests do not fit: the chain holds " + count + " of its capacity of " + capacity,
                    "post it and clear() before adding more, or allocate a larger chain");
        }
        return mr.closedException("ibv_post_send");
    }

    /**
     * Checked mode: the SGEs {@code [offset + k * stride, + length)} for {@code 0 <= k < n} all lie
     * inside {@code mr} (the offsets are linear in k, so the first and the last bound them all).
     */
    private static void checkSgeRange(MemoryRegion mr, long offset, long stride, int n, int length) {
        long len = Integer.toUnsignedLong(length);
        mr.checkSge("ibv_post_send", offset, len);
        if (n > 1 && stride != 0) {
            long lastOffset;
            try {
                lastOffset = Math.addExact(offset, Math.multiplyExact(stride, (long) (n - 1)));
            } catch (ArithmeticException e) {
                lastOffset = Long.MIN_VALUE; // outside every region: checkSge refuses it
            }
            mr.checkSge("ibv_post_send", lastOffset, len);
        }
    }

    /** Starts an RDMA_WRITE_WITH_IMM: the peer's receive completes with {@code immediate}. */
    public SendWorkRequests writeWithImmediate(long wrId, long remoteAddress, int rkey, int immediate) {
        begin(wrId, OP_RDMA_WRITE_WITH_IMM);
        wrs.set(JAVA_LONG, cur + SEND_RDMA_REMOTE_ADDR, remoteAddress);
        wrs.set(JAVA_INT, cur + SEND_RDMA_RKEY, rkey);
        wrs.set(JAVA_INT, cur + SEND_IMM_DATA, Integer.reverseBytes(immediate));
        return this;
    }

    /**
     * Starts a SEND_WITH_INV: a SEND whose arrival also invalidates the peer's memory window (or
     * region) {@code invalidateRkey}; the peer's receive completion carries that rkey.
     */
    public SendWorkRequests sendWithInvalidate(long wrId, int invalidateRkey) {
        begin(wrId, OP_SEND_WITH_INV);
        wrs.set(JAVA_LONG, cur + SEND_UD_AH, 0L);
        wrs.set(JAVA_INT, cur + SEND_INVALIDATE_RKEY, invalidateRkey);
        return this;
    }

    /**
     * Starts a LOCAL_INV of this side's memory window (or region) {@code rkey}: once it completed,
     * the device refuses the rkey to every peer. It carries no SGEs.
     */
    public SendWorkRequests localInvalidate(long wrId, int rkey) {
        begin(wrId, OP_LOCAL_INV);
        wrs.set(JAVA_INT, cur + SEND_INVALIDATE_RKEY, rkey);
        return this;
    }

    /**
     * Starts a BIND_MW of the type 2 window {@code mw} to {@code [offset, offset + length)} of
     * {@code mr}, granting {@code access} (REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC) to peers that
     * present the bind's rkey, which {@link MemoryWindow#rkey()} returns from now on (the device
     * honours it once the bind completed). The window must be unbound (new, or invalidated since
     * its last bind) and in the queue pair's protection domain; the region needs
     * {@link Access#MW_BIND}. From here the region refuses to close until the window is closed or
     * bound to another region. It carries no SGEs.
     *
     * @throws ResourceClosedException the window or the region is closed
     * @throws InvalidRequestException a type 1 window; window and region in different protection
     *                                 domains; checked mode: the range outside the region, no
     *                                 MW_BIND on the region, a right the region does not have
     */
    public SendWorkRequests bindWindow(
            long wrId, MemoryWindow mw, MemoryRegion mr, long offset, long length, java.util.Set<Access> access) {
        ensureOpenChain();
        if (!mw.isOpenPlain()) {
            throw mw.closedException("ibv_post_send");
        }
        if (!mr.isOpenPlain()) {
            throw mr.closedException("ibv_post_send");
        }
        checkBind(mw, mr, offset, length, access);
        if (count == capacity) {
            throw cannotBegin();
        }
        if (windows == null) {
            windows = new MemoryWindow[capacity];
        }
        int rkey = mw.nextBind(mr, "ibv_post_send");
        begin(wrId, OP_BIND_MW);
        windows[count - 1] = mw;
        wrs.set(JAVA_LONG, cur + SEND_BIND_MW, mw.address);
        wrs.set(JAVA_INT, cur + SEND_BIND_RKEY, rkey);
        wrs.set(JAVA_LONG, cur + SEND_BIND_MR, mr.handle.address());
        wrs.set(JAVA_LONG, cur + SEND_BIND_ADDR, mr.address() + offset);
        wrs.set(JAVA_LONG, cur + SEND_BIND_LENGTH, length);
        wrs.set(JAVA_INT, cur + SEND_BIND_ACCESS, Access.mask(access));
        return this;
    }

    private void ensureOpenChain() {
        if (closed) {
            throw cannotBegin();
        }
    }

    private static void checkBind(
            MemoryWindow mw, MemoryRegion mr, long offset, long length, java.util.Set<Access> access) {
        if (mw.type() != MemoryWindow.Type.TYPE_2) {
            throw new InvalidRequestException(
                    "ibv_post_send",
                    "a type 1 window is bound with ibv_bind_mw, not by a work request",
                    "bind it with MemoryWindow.bind, or allocate the window as MemoryWindow.Type.TYPE_2");
        }
        checkWindowRange("ibv_post_send", mw, mr, offset, length, access);
    }

    /**
     * A bind of {@code mw} to {@code [offset, +length)} of {@code mr} granting {@code access}: the
     * same protection domain in every mode; in checked mode a non-empty range inside the region,
     * which has MW_BIND and every remote right granted.
     */
    static void checkWindowRange(
            String verb, MemoryWindow mw, MemoryRegion mr, long offset, long length, java.util.Set<Access> access) {
        if (mw.pd != mr.protectionDomain()) {
            throw new InvalidRequestException(
                    verb,
                    "the window and the region belong to different protection domains",
                    "bind a window to a region of its own protection domain");
        }
        if (!CHECKED) {
            return;
        }
        if (length <= 0 || !mr.contains(offset, length)) {
            throw new InvalidRequestException(
                    verb,
                    "the window range [" + offset + ", +" + length + ") is empty or outside the region of "
                            + mr.length() + " bytes",
                    "bind a non-empty range inside the region");
        }
        java.util.Set<Access> has = mr.access();
        if (!has.contains(Access.MW_BIND)) {
            throw new InvalidRequestException(
                    verb, "the region was registered without MW_BIND", "register it with Access.MW_BIND");
        }
        for (Access a : access) {
            if ((a != Access.REMOTE_READ && a != Access.REMOTE_WRITE && a != Access.REMOTE_ATOMIC)
                    || !has.contains(a)) {
                throw new InvalidRequestException(
                        verb,
                        "a window grants only REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC its region has; " + a
                                + " is not one",
                        "grant the window a subset of the region's remote rights");
            }
        }
    }

    /** Starts an RDMA_READ from {@code remoteAddress} into the SGEs that follow. */
    public SendWorkRequests read(long wrId, long remoteAddress, int rkey) {
        begin(wrId, OP_RDMA_READ);
        wrs.set(JAVA_LONG, cur + SEND_RDMA_REMOTE_ADDR, remoteAddress);
        wrs.set(JAVA_INT, cur + SEND_RDMA_RKEY, rkey);
        return this;
    }

    /**
     * Starts an ATOMIC_CMP_AND_SWP on the 8 bytes at {@code remoteAddress} (8-byte aligned):
     * if they equal {@code compare} they become {@code swap}; the old value lands in the one
     * 8-byte SGE that must follow.
     */
    public SendWorkRequests compareAndSwap(long wrId, long remoteAddress, int rkey, long compare, long swap) {
        checkAtomicAddress(remoteAddress);
        begin(wrId, OP_ATOMIC_CMP_AND_SWP);
        atomic(remoteAddress, rkey, compare, swap);
        return this;
    }

    /** Starts an ATOMIC_FETCH_AND_ADD of {@code add} to the 8 bytes at {@code remoteAddress}; the old value lands in the SGE. */
    public SendWorkRequests fetchAndAdd(long wrId, long remoteAddress, int rkey, long add) {
        checkAtomicAddress(remoteAddress);
        begin(wrId, OP_ATOMIC_FETCH_AND_ADD);
        atomic(remoteAddress, rkey, add, 0L);
        return this;
    }

    /**
     * Starts an ATOMIC_WRITE ({@code ibv_wr_atomic_write}): the 8 bytes of {@code value}, as this
     * machine stores a {@code long}, land at {@code remoteAddress} (8-byte aligned) in one piece,
     * never torn. No SGE follows; the peer's region needs REMOTE_WRITE. Posted only by
     * {@link QueuePair#postSendExtended} on a queue pair created with
     * {@link SendOperation#ATOMIC_WRITE}, on a device whose {@code device_cap_flags_ex} has
     * {@code IB_UVERBS_DEVICE_ATOMIC_WRITE} (rxe from Linux 6.2).
     */
    public SendWorkRequests atomicWrite(long wrId, long remoteAddress, int rkey, long value) {
        checkAtomicAddress(remoteAddress);
        begin(wrId, OP_ATOMIC_WRITE);
        atomic(remoteAddress, rkey, value, 0L);
        return this;
    }

    // checked before begin(), so that a refused request leaves the chain exactly as it was
    private static void checkAtomicAddress(long remoteAddress) {
        if (CHECKED && (remoteAddress & 7) != 0) {
            throw new InvalidRequestException(
                    "ibv_post_send",
                    "atomic remote address 0x" + Long.toHexString(remoteAddress) + " is not 8-byte aligned",
                    "atomics work on aligned 8-byte words");
        }
    }

    private void atomic(long remoteAddress, int rkey, long compareAdd, long swap) {
        wrs.set(JAVA_LONG, cur + SEND_ATOMIC_REMOTE_ADDR, remoteAddress);
        wrs.set(JAVA_LONG, cur + SEND_ATOMIC_COMPARE_ADD, compareAdd);
        wrs.set(JAVA_LONG, cur + SEND_ATOMIC_SWAP, swap);
        wrs.set(JAVA_INT, cur + SEND_ATOMIC_RKEY, rkey);
    }

    private VerbsException cannotBegin() {
        if (closed) {
            return new ResourceClosedException("ibv_post_send", "the SendWorkRequests is closed", "create a new one");
        }
        return new QueueFullException(
                "ibv_post_send",
                Errno.ENOMEM,
                "the chain already holds its capacity of " + capacity + " requests",
                "post it and clear() before adding more, or allocate a larger chain");
    }

    private void ensureCurrent() {
        if (count == 0) {
            throw noCurrentRequest();
        }
    }

    private VerbsException noCurrentRequest() {
        if (closed) {
            return new ResourceClosedException("ibv_post_send", "the SendWorkRequests is closed", "create a new one");
        }
        return new InvalidRequestException(
                "ibv_post_send",
                "no work request to add to",
                "start a work request first (send, write, read, compareAndSwap, ...)");
    }

    private void ensureSgeRoom() {
        if (curSges == maxSge) {
            throw sgeSlotsFull();
        }
    }

    private VerbsException sgeSlotsFull() {
        return VerbsException.create(
                "ibv_post_send",
                Errno.EINVAL,
                "the request already has its " + maxSge + " SGEs",
                "allocate the chain with more SGEs per request");
    }

    /** Adds the SGE {@code [offset, offset + length)} of a registered region to the current request. */
    public SendWorkRequests sge(MemoryRegion mr, long offset, int length) {
        ensureCurrent();
        ensureSgeRoom();
        if (CHECKED) {
            if ((NO_PAYLOAD_OPCODES & 1 << curOpcode) != 0) {
                throw new InvalidRequestException(
                        "ibv_post_send",
                        "a LOCAL_INV, BIND_MW or ATOMIC_WRITE request carries no SGEs",
                        "add the SGE to a data request");
            }
            mr.checkSge("ibv_post_send", offset, Integer.toUnsignedLong(length));
            checkLocalAccess(mr, length);
        }
        if (!mr.hostAccessible) {
            deviceSge();
        }
        appendSge("ibv_post_send", mr, mr.address() + offset, length, mr.lkey());
        return this;
    }

    /**
     * An SGE of device memory: refused (in every mode) in an inline request, whose SGEs the
     * provider copies with the CPU, which would read device memory and crash.
     */
    private void deviceSge() {
        if (inlineOwner == count - 1 && curInline != 0) {
            throw deviceInline();
        }
        curDevice = true;
    }

    private static InvalidRequestException deviceInline() {
        return new InvalidRequestException(
                "ibv_post_send",
                "an inline request cannot carry device (GPU) memory: the " + "provider copies inline data with the CPU",
                "send device memory in a request of its own, without inline data");
    }

    private void checkLocalAccess(MemoryRegion mr, int length) {
        if ((READ_OR_ATOMIC_OPCODES & 1 << curOpcode)
                != 0) { // READ and atomics: the adapter writes into the local buffer
            checkLocalWrite(mr, length);
        }
    }

    private void checkLocalWrite(MemoryRegion mr, int length) {
        if (!mr.access().contains(Access.LOCAL_WRITE)) {
            throw VerbsException.create(
                    "ibv_post_send",
                    Errno.EINVAL,
                    "RDMA READ and atomics write into the local " + "buffer, but its region lacks LOCAL_WRITE",
                    "register the region with Access.LOCAL_WRITE");
        }
        if (curOpcode != OP_RDMA_READ && (length != 8 || curSges != 0)) {
            throw VerbsException.create(
                    "ibv_post_send",
                    Errno.EINVAL,
                    "an atomic takes exactly one 8-byte SGE",
                    "give the atomic one SGE of length 8");
        }
    }

    /**
     * Adds {@code data} as inline payload and marks the request INLINE. The bytes are copied into
     * the chain now (the provider copies them into the work queue entry at post time), so
     * {@code data} need not be registered, may be any segment (heap included), and may be reused
     * or freed as soon as this returns. At most the chain's inline capacity per request
     * ({@link #DEFAULT_INLINE_BYTES} unless the constructor said otherwise); the queue pair must
     * have been created with enough {@code maxInlineData}.
     */
    public SendWorkRequests inline(MemorySegment data) {
        ensureCurrent();
        ensureSgeRoom();
        long len = data.byteSize();
        if (inlineOwner != count - 1) { // the first inline() of this request
            inlineOwner = count - 1;
            curInline = 0;
        }
        if (len > inlineStride - curInline) {
            throw new InvalidRequestException(
                    "ibv_post_send",
                    "inline data of " + len + " bytes exceeds what is left (" + (inlineStride - curInline) + " of "
                            + inlineStride + ") of this request's inline capacity",
                    "create the chain with new SendWorkRequests(capacity, maxSge, maxInlinePerRequest)");
        }
        if (CHECKED && ((READ_OR_ATOMIC_OPCODES | NO_PAYLOAD_OPCODES) & 1 << curOpcode) != 0) {
            throw new InvalidRequestException("ibv_post_send", "only SEND and RDMA WRITE can be inline", null);
        }
        if (curDevice) {
            throw deviceInline();
        }
        if (staging == null) {
            stage();
        }
        long at = (long) (count - 1) * inlineStride + curInline;
        try {
            MemorySegment.copy(data, 0, staging, at, len);
        } catch (IllegalStateException e) {
            throw new InvalidRequestException(
                    "ibv_post_send",
                    Errno.EFAULT,
                    "the inline data's memory was freed " + "(its arena is closed)",
                    "add inline data while its memory is alive");
        }
        appendSge("ibv_post_send", null, stagingAddress + at, (int) len, 0);
        curInline += len;
        if (curInline > maxInline) {
            maxInline = curInline;
        }
        flag(FLAG_INLINE);
        return this;
    }

    private void stage() {
        if (inlineStride == 0) {
            throw new InvalidRequestException(
                    "ibv_post_send",
                    "this chain was created without inline capacity",
                    "create it with new SendWorkRequests(capacity, maxSge, maxInlinePerRequest)");
        }
        // one allocation on the first inline request, none after; freed with the chain (see WorkRequestChain)
        staging = memory.allocate((long) capacity * inlineStride, 64);
        stagingAddress = staging.address();
    }

    /**
     * The inline staging of request {@code request} of this chain: the bytes its {@link #inline}
     * calls copied, from offset 0 in the order they were added (the rest of the slice, up to the
     * chain's inline capacity per request, is not sent). The provider copies them into the work
     * queue entry at each post, so writing here changes what the next {@link QueuePair#postSend}
     * of this chain sends: a request built once can be posted again with a new payload, as a C
     * program re-posts one {@code ibv_send_wr} whose inline SGE points at a buffer it rewrites
     * (perftest's write_lat writes its iteration count there before every post).
     *
     * <p>Lifetime: the slice keeps the chain's native memory alive while it is reachable, so it
     * stays safe to use after {@link #close()} (writes then reach no adapter). Rebuilding the
     * chain ({@link #clear()} and new requests) reuses the same bytes. The thread that builds and
     * posts the chain writes here; a write racing a post on another thread changes only the payload.
     *
     * @throws InvalidRequestException {@code request} is not a request of the chain, or it
     *                                 carries no inline data
     * @throws ResourceClosedException the chain is closed
     */
    public MemorySegment inlineData(int request) {
        if (closed) {
            throw new ResourceClosedException("ibv_post_send", "the SendWorkRequests is closed", "create a new one");
        }
        if (request < 0 || request >= count) {
            throw new InvalidRequestException(
                    "ibv_post_send",
                    "request " + request + " is not in this chain of " + count,
                    "pass the index of a request the chain holds (0 for the first)");
        }
        if ((wrs.get(JAVA_INT, SEND_WR_SIZE * request + SEND_FLAGS) & FLAG_INLINE) == 0) { // only inline() sets it
            throw new InvalidRequestException(
                    "ibv_post_send",
                    "request " + request + " carries no inline data",
                    "add its payload with inline(...) first");
        }
        return staging.asSlice((long) request * inlineStride, inlineStride);
    }

    private int flag(int f) {
        ensureCurrent();
        int old = wrs.get(JAVA_INT, cur + SEND_FLAGS);
        wrs.set(JAVA_INT, cur + SEND_FLAGS, old | f);
        return old;
    }

    /** The current request produces a completion (else only on error, unless the QP signals all). */
    public SendWorkRequests signaled() {
        if ((flag(FLAG_SIGNALED) & FLAG_SIGNALED) == 0) {
            signaledIndexes[signaledCount++] = count - 1;
        }
        return this;
    }

    /** The current request waits for earlier RDMA READs and atomics of this QP to finish. */
    public SendWorkRequests fence() {
        flag(FLAG_FENCE);
        return this;
    }

    /** The peer's receive raises a solicited event. */
    public SendWorkRequests solicited() {
        flag(FLAG_SOLICITED);
        return this;
    }

    /** Addresses the current (UD) request: the address handle, the remote QP number and Q_Key. */
    public SendWorkRequests destination(AddressHandle ah, int remoteQpn, int remoteQkey) {
        ensureCurrent();
        if (!ah.isOpenPlain()) { // every mode: the provider reads the handle at post time
            throw ah.closedException("ibv_post_send");
        }
        int i = count - 1;
        if (destinations[i] == null) { // the request's first destination
            withDestination++;
        }
        destinations[i] = ah;
        if (i >= destinationsHigh) {
            destinationsHigh = i + 1;
        }
        wrs.set(JAVA_LONG, cur + SEND_UD_AH, ah.address);
        wrs.set(JAVA_LONG, cur + SEND_UD_REMOTE_QPN, pack(remoteQpn, remoteQkey));
        return this;
    }

    /**
     * Addresses the current request of an {@link QueuePairType#XRC_SEND} queue pair: the number
     * of the peer's XRC shared receive queue that receives it ({@link SharedReceiveQueue#srqNumber()}
     * on the receiving side; {@code wr.qp_type.xrc.remote_srqn} for {@link QueuePair#postSend},
     * {@code ibv_wr_set_xrc_srqn} for {@link QueuePair#postSendExtended}).
     */
    public SendWorkRequests remoteSrqNumber(int srqNumber) {
        ensureCurrent();
        int i = count - 1;
        if (srqNumbered == null) {
            srqNumbered = new boolean[capacity];
        }
        if (!srqNumbered[i]) {
            srqNumbered[i] = true;
            withSrqNumber++;
        }
        wrs.set(JAVA_INT, cur + SEND_XRC_REMOTE_SRQN, srqNumber);
        return this;
    }

    /** For an XRC_SEND queue pair, in every mode: each request names the remote SRQ. */
    boolean everyRequestHasSrqNumber() {
        return withSrqNumber == count;
    }

    /** The first request without an XRC remote SRQ number, or -1. */
    int firstWithoutSrqNumber() {
        for (int i = 0; i < count; i++) {
            if (srqNumbered == null || !srqNumbered[i]) {
                return i;
            }
        }
        return -1;
    }

    // ---- used by QueuePair.postSend ------------------------------------------------------

    @Override
    void verifyMore(String verb) {
        for (int i = 0; windows != null && i < count; i++) {
            MemoryWindow mw = windows[i];
            if (mw != null && !mw.isOpen()) {
                throw new InvalidRequestException(
                        verb,
                        "work request #" + i + " binds a memory window that was closed after bindWindow(); "
                                + "nothing was posted",
                        "rebuild the chain with a live window");
            }
        }
        for (int i = 0; i < count; i++) {
            AddressHandle ah = destinations[i];
            if (ah != null && !ah.isOpen()) {
                throw new InvalidRequestException(
                        verb,
                        "work request #" + i + " names an address handle that was "
                                + "closed after destination() was set; nothing was posted",
                        "rebuild the chain with a live handle");
            }
        }
    }

    /** For a UD queue pair, in every mode: each request has a live destination (the provider reads it). */
    boolean everyRequestHasDestination() {
        return withDestination == count;
    }

    int opcodeAt(int i) {
        return wrs.get(JAVA_INT, SEND_WR_SIZE * i + SEND_OPCODE);
    }

    int flagsAt(int i) {
        return wrs.get(JAVA_INT, SEND_WR_SIZE * i + SEND_FLAGS);
    }

    long udAhAt(int i) {
        return wrs.get(JAVA_LONG, SEND_WR_SIZE * i + SEND_UD_AH);
    }

    long payloadAt(int i) {
        long total = 0;
        long base = sgeStride * i;
        for (int s = 0, n = numSgeAt(i); s < n; s++) {
            total += Integer.toUnsignedLong(sges.get(JAVA_INT, base + SGE_SIZE * s + SGE_LENGTH));
        }
        return total;
    }

    static {
        if (ADDRESS.byteSize() != 8) {
            throw new ExceptionInInitializerError("verbs4j needs a 64-bit platform");
        }
        // pairs of 32-bit fields written with one 64-bit store (pack)
        if (SEND_OPCODE != SEND_NUM_SGE + 4
                || SEND_IMM_DATA != SEND_FLAGS + 4
                || SEND_UD_REMOTE_QKEY != SEND_UD_REMOTE_QPN + 4
                || SEND_NUM_SGE % 8 != 0
                || SEND_FLAGS % 8 != 0
                || SEND_UD_REMOTE_QPN % 8 != 0) {
            throw new ExceptionInInitializerError("struct ibv_send_wr / ibv_sge: adjacent 32-bit fields moved");
        }
    }
}
