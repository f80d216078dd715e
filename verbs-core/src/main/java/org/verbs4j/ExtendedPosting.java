package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.QueuePairExLayout.SEND_BIND_INFO;
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
import static org.verbs4j.natives.WorkRequestLayout.SGE_LKEY;
import static org.verbs4j.natives.WorkRequestLayout.SGE_SIZE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.ExtendedPostVerbs;
import org.verbs4j.natives.NativeLibraries;
import org.verbs4j.natives.QueuePairExLayout;

/**
 * The extended posting of one queue pair ({@code struct ibv_qp_ex}): replays a validated
 * {@link SendWorkRequests} chain through {@code ibv_wr_start}, one builder and its setters per
 * request, and {@code ibv_wr_complete}, which posts all of it or nothing. The chain, its gates,
 * region checks and accounting are the classic post's ({@link QueuePair#postSendExtended}); this
 * class only reads the descriptors the chain wrote and hands each field to the provider's
 * function pointers (read once here). Nothing is allocated per post.
 *
 * <p>The builders a provider did not set up (operations the queue pair was not created for) are
 * NULL pointers: a request whose opcode has none is refused before {@code wr_start}, in every mode,
 * and an opcode written raw into the chain that has none makes the post abort
 * ({@code wr_abort}) with EINVAL.
 *
 * <p>Inline data goes to the provider with one {@code wr_set_inline_data}: the pieces a request's
 * {@link SendWorkRequests#inline} calls staged lie next to each other; a request that mixes them
 * with region SGEs is gathered here first (at post time, as {@code ibv_post_send} reads them) into
 * a buffer of the queue pair's {@code maxInlineData}. {@code wr_set_inline_data_list} is never
 * called: rxe's (rdma-core before 64) leaves the request's length at 0, and does not check the
 * pieces' total against the inline limit.
 */
final class ExtendedPosting {
    private final MemorySegment qpx;
    final long address;
    private final boolean critical;
    private final boolean ud;
    /** An XRC_SEND queue pair: each request names the remote XRC SRQ ({@code wr_set_xrc_srqn}). */
    private final boolean xrc;
    /** Bit (1 << opcode) for every opcode whose builder the provider set. */
    final int opcodes;
    /** Operations asked for at creation. */
    final long sendOps;

    private final MemorySegment start, complete, abort;
    private final MemorySegment send, sendImm, sendInv, write, writeImm, read, cas, faa, localInv, bind, atomicWrite;
    private final MemorySegment setSge, setSgeList, setInline, setUdAddr, setXrcSrqn;
    /** {@code maxInlineData} bytes: an inline request that mixes staged pieces and region SGEs is gathered here. */
    private final MemorySegment gather;

    private final long gatherAddress;
    /** Whether the provider has the inline setter (read once, not at each post). */
    private final boolean inlineSetter;
    /** Whether {@code wr_set_sge_list} miscounts a list of unequal lengths (see {@link #postsClassically}). */
    final boolean sgeListMiscounted;

    /** All of the address space, to read an SGE's bytes by address without a segment per post. */
    private static final MemorySegment EVERYWHERE = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    ExtendedPosting(
            MemorySegment qpEx,
            long sendOps,
            boolean critical,
            QueuePairType type,
            int maxInline,
            boolean sgeListMiscounted,
            Arena arena) {
        this.sgeListMiscounted = sgeListMiscounted;
        this.qpx = qpEx.reinterpret(QueuePairExLayout.QP_EX_SIZE);
        this.address = qpx.address();
        this.critical = critical;
        this.ud = type == QueuePairType.UD;
        this.xrc = type == QueuePairType.XRC_SEND;
        this.sendOps = sendOps;
        this.start = fn(QueuePairExLayout.WR_START);
        this.complete = fn(QueuePairExLayout.WR_COMPLETE);
        this.abort = fn(QueuePairExLayout.WR_ABORT);
        this.write = fn(QueuePairExLayout.WR_RDMA_WRITE);
        this.writeImm = fn(QueuePairExLayout.WR_RDMA_WRITE_IMM);
        this.send = fn(QueuePairExLayout.WR_SEND);
        this.sendImm = fn(QueuePairExLayout.WR_SEND_IMM);
        this.read = fn(QueuePairExLayout.WR_RDMA_READ);
        this.cas = fn(QueuePairExLayout.WR_ATOMIC_CMP_SWP);
        this.faa = fn(QueuePairExLayout.WR_ATOMIC_FETCH_ADD);
        this.localInv = fn(QueuePairExLayout.WR_LOCAL_INV);
        this.bind = fn(QueuePairExLayout.WR_BIND_MW);
        this.sendInv = fn(QueuePairExLayout.WR_SEND_INV);
        // the last member since rdma-core 44: a provider that accepted the flag has it; never read otherwise
        this.atomicWrite = (sendOps & QueuePairExLayout.WITH_ATOMIC_WRITE) != 0
                ? fn(QueuePairExLayout.WR_ATOMIC_WRITE)
                : MemorySegment.NULL;
        this.setSge = fn(QueuePairExLayout.WR_SET_SGE);
        this.setSgeList = fn(QueuePairExLayout.WR_SET_SGE_LIST);
        this.setInline = fn(QueuePairExLayout.WR_SET_INLINE_DATA);
        this.setUdAddr = fn(QueuePairExLayout.WR_SET_UD_ADDR);
        this.setXrcSrqn = fn(QueuePairExLayout.WR_SET_XRC_SRQN);
        MemorySegment[] byOpcode = {write, writeImm, send, sendImm, read, cas, faa, localInv, bind, sendInv};
        int ops = 0;
        for (int op = 0; op < byOpcode.length; op++) {
            if (!byOpcode[op].equals(MemorySegment.NULL)) {
                ops |= 1 << op;
            }
        }
        if (!atomicWrite.equals(MemorySegment.NULL)) {
            ops |= 1 << SendWorkRequests.OP_ATOMIC_WRITE;
        }
        this.opcodes = ops;
        this.inlineSetter = !setInline.equals(MemorySegment.NULL);
        this.gather = arena.allocate(Math.max(1, maxInline), 8);
        this.gatherAddress = gather.address();
    }

    /**
     * Gives {@code qp} (made by {@code ibv_create_qp_ex} for {@code ops}) its extended posting;
     * closes it and throws EOPNOTSUPP when the provider's {@code ibv_qp_ex} cannot be used.
     */
    static void attach(QueuePair qp, long ops, QueuePairType type) {
        String why;
        try {
            MemorySegment qpx = ExtendedPostVerbs.qpToQpEx(qp.handle);
            ExtendedPosting x = qpx.equals(MemorySegment.NULL)
                    ? null
                    : new ExtendedPosting(
                            qpx,
                            ops,
                            qp.pd.context().criticalDataPath,
                            type,
                            qp.maxInlineData(),
                            miscountsSgeLists(qp.pd.context()),
                            Arena.ofAuto());
            why = x == null ? "ibv_qp_to_qp_ex returned NULL: the queue pair was not created extended" : x.unusable();
            qp.extended = x;
        } catch (RuntimeException e) {
            qp.close();
            throw e;
        }
        if (why != null) {
            qp.close();
            throw VerbsException.create("ibv_create_qp_ex", Errno.EOPNOTSUPP, why, "post with postSend instead");
        }
    }

    /**
     * rxe's {@code wr_set_sge_list} before rdma-core 64 sums {@code num_sge} times the first SGE's
     * length, so a list of unequal lengths moves the wrong number of bytes or completes with
     * LOC_QP_OP_ERR. libibverbs and its providers ship together (the private ABI must match), and
     * libibverbs 64 is the first with {@code ibv_reg_buf_mr}.
     */
    private static boolean miscountsSgeLists(Context ctx) {
        return ctx.providerName().filter("rxe"::equals).isPresent()
                && NativeLibraries.ibverbs()
                        .map(l -> l.find("ibv_reg_buf_mr").isEmpty())
                        .orElse(false);
    }

    /**
     * Whether requests {@code [0, n)} go through {@code ibv_post_send} instead: only on a provider
     * whose {@code wr_set_sge_list} miscounts, and only for a chain with a request whose region
     * SGEs differ in length (the classic post builds the same work queue entries correctly).
     */
    boolean postsClassically(SendWorkRequests wrs, int n) {
        if (!sgeListMiscounted || wrs.maxSges < 2) {
            return false;
        }
        MemorySegment w = wrs.wrs;
        MemorySegment sges = wrs.sges;
        for (int i = 0; i < n; i++) {
            long o = SEND_WR_SIZE * i;
            int numSge = w.get(JAVA_INT, o + SEND_NUM_SGE);
            if (numSge < 2 || (w.get(JAVA_INT, o + SEND_FLAGS) & SendWorkRequests.FLAG_INLINE) != 0) {
                continue;
            }
            long s = wrs.sgeStride * i;
            int first = sges.get(JAVA_INT, s + SGE_LENGTH);
            for (int k = 1; k < numSge; k++) {
                if (sges.get(JAVA_INT, s + SGE_SIZE * k + SGE_LENGTH) != first) {
                    return true;
                }
            }
        }
        return false;
    }

    private MemorySegment fn(long offset) {
        return qpx.get(ADDRESS, offset);
    }

    /** Why the provider's {@code ibv_qp_ex} cannot be used at all (a NULL start, complete, abort or SGE setter), or null. */
    String unusable() {
        if (start.equals(MemorySegment.NULL)
                || complete.equals(MemorySegment.NULL)
                || abort.equals(MemorySegment.NULL)
                || setSge.equals(MemorySegment.NULL)
                || setSgeList.equals(MemorySegment.NULL)) {
            return "the provider's ibv_qp_ex lacks wr_start, wr_complete, wr_abort or the SGE setters";
        }
        if (ud && setUdAddr.equals(MemorySegment.NULL)) {
            return "the provider's ibv_qp_ex lacks wr_set_ud_addr for a UD queue pair";
        }
        if (xrc && setXrcSrqn.equals(MemorySegment.NULL)) {
            return "the provider's ibv_qp_ex lacks wr_set_xrc_srqn for an XRC_SEND queue pair";
        }
        return null;
    }

    /** Whether every opcode of the chain has a builder and, for inline requests, the inline setter exists. */
    boolean accepts(SendWorkRequests wrs) {
        return (wrs.opcodes & ~opcodes) == 0 && (wrs.maxInline == 0 || inlineSetter);
    }

    /**
     * Posts requests {@code [0, n)} of the chain: 0, or the errno {@code wr_complete} returned (or
     * EINVAL for an opcode without a builder), in which case nothing was posted.
     */
    int post(SendWorkRequests wrs, int n) {
        long q = address;
        boolean c = critical;
        ExtendedPostVerbs.call(c, start, q);
        int rc;
        boolean built = false;
        try {
            rc = buildAll(wrs, n, q, c);
            built = true;
        } finally {
            if (!built) {
                ExtendedPostVerbs.call(c, abort, q); // the provider holds its send-queue lock until then
            }
        }
        if (rc != 0) {
            ExtendedPostVerbs.call(c, abort, q);
            return rc;
        }
        return ExtendedPostVerbs.complete(c, complete, q);
    }

    private int buildAll(SendWorkRequests wrs, int n, long q, boolean c) {
        MemorySegment w = wrs.wrs;
        MemorySegment sges = wrs.sges;
        long sgeBase = sges.address();
        long stride = wrs.sgeStride;
        int allowed = opcodes;
        for (int i = 0; i < n; i++) {
            long o = SEND_WR_SIZE * i;
            int opcode = w.get(JAVA_INT, o + SEND_OPCODE);
            if (opcode < 0 || opcode > 31 || (allowed & (1 << opcode)) == 0) {
                return Errno.EINVAL;
            }
            int flags = w.get(JAVA_INT, o + SEND_FLAGS);
            qpx.set(JAVA_LONG, QueuePairExLayout.WR_ID, w.get(JAVA_LONG, o + SEND_WR_ID));
            qpx.set(JAVA_INT, QueuePairExLayout.WR_FLAGS, flags);
            build(w, o, opcode, q, c);
            if (ud) {
                ExtendedPostVerbs.setUdAddr(
                        c,
                        setUdAddr,
                        q,
                        w.get(JAVA_LONG, o + SEND_UD_AH),
                        w.get(JAVA_INT, o + SEND_UD_REMOTE_QPN),
                        w.get(JAVA_INT, o + SEND_UD_REMOTE_QKEY));
            } else if (xrc) { // the chain was checked: every request names its SRQ
                ExtendedPostVerbs.call(c, setXrcSrqn, q, w.get(JAVA_INT, o + SEND_XRC_REMOTE_SRQN));
            }
            int numSge = w.get(JAVA_INT, o + SEND_NUM_SGE);
            if (numSge > 0 && (SendWorkRequests.NO_PAYLOAD_OPCODES & 1 << opcode) == 0) {
                if (numSge > wrs.maxSge) {
                    return Errno.EINVAL; // only a raw write can get here
                }
                long s = stride * i;
                if ((flags & SendWorkRequests.FLAG_INLINE) != 0) {
                    if (!inline(sges, s, numSge, q, c)) {
                        return Errno.EINVAL;
                    }
                } else if (numSge == 1) {
                    ExtendedPostVerbs.setSge(
                            c,
                            setSge,
                            q,
                            sges.get(JAVA_INT, s + SGE_LKEY),
                            sges.get(JAVA_LONG, s + SGE_ADDR),
                            sges.get(JAVA_INT, s + SGE_LENGTH));
                } else {
                    ExtendedPostVerbs.call(c, setSgeList, q, numSge, sgeBase + s);
                }
            }
        }
        return 0;
    }

    private void build(MemorySegment w, long o, int opcode, long q, boolean c) {
        switch (opcode) {
            case SendWorkRequests.OP_RDMA_WRITE ->
                ExtendedPostVerbs.rdma(
                        c, write, q, w.get(JAVA_INT, o + SEND_RDMA_RKEY), w.get(JAVA_LONG, o + SEND_RDMA_REMOTE_ADDR));
            case SendWorkRequests.OP_RDMA_WRITE_WITH_IMM ->
                ExtendedPostVerbs.rdmaImm(
                        c,
                        writeImm,
                        q,
                        w.get(JAVA_INT, o + SEND_RDMA_RKEY),
                        w.get(JAVA_LONG, o + SEND_RDMA_REMOTE_ADDR),
                        w.get(JAVA_INT, o + SEND_IMM_DATA));
            case SendWorkRequests.OP_SEND -> ExtendedPostVerbs.call(c, send, q);
            case SendWorkRequests.OP_SEND_WITH_IMM ->
                ExtendedPostVerbs.call(c, sendImm, q, w.get(JAVA_INT, o + SEND_IMM_DATA));
            case SendWorkRequests.OP_RDMA_READ ->
                ExtendedPostVerbs.rdma(
                        c, read, q, w.get(JAVA_INT, o + SEND_RDMA_RKEY), w.get(JAVA_LONG, o + SEND_RDMA_REMOTE_ADDR));
            case SendWorkRequests.OP_ATOMIC_CMP_AND_SWP ->
                ExtendedPostVerbs.compareSwap(
                        c,
                        cas,
                        q,
                        w.get(JAVA_INT, o + SEND_ATOMIC_RKEY),
                        w.get(JAVA_LONG, o + SEND_ATOMIC_REMOTE_ADDR),
                        w.get(JAVA_LONG, o + SEND_ATOMIC_COMPARE_ADD),
                        w.get(JAVA_LONG, o + SEND_ATOMIC_SWAP));
            case SendWorkRequests.OP_ATOMIC_FETCH_AND_ADD ->
                ExtendedPostVerbs.fetchAdd(
                        c,
                        faa,
                        q,
                        w.get(JAVA_INT, o + SEND_ATOMIC_RKEY),
                        w.get(JAVA_LONG, o + SEND_ATOMIC_REMOTE_ADDR),
                        w.get(JAVA_LONG, o + SEND_ATOMIC_COMPARE_ADD));
            case SendWorkRequests.OP_LOCAL_INV ->
                ExtendedPostVerbs.call(c, localInv, q, w.get(JAVA_INT, o + SEND_INVALIDATE_RKEY));
            case SendWorkRequests.OP_BIND_MW ->
                ExtendedPostVerbs.bindMw(
                        c,
                        bind,
                        q,
                        w.get(JAVA_LONG, o + SEND_BIND_MW),
                        w.get(JAVA_INT, o + SEND_BIND_RKEY),
                        w.address() + o + SEND_BIND_INFO);
            case SendWorkRequests.OP_ATOMIC_WRITE -> // the 8 bytes are read from the chain during the call
                ExtendedPostVerbs.atomicWrite(
                        c,
                        atomicWrite,
                        q,
                        w.get(JAVA_INT, o + SEND_ATOMIC_RKEY),
                        w.get(JAVA_LONG, o + SEND_ATOMIC_REMOTE_ADDR),
                        w.address() + o + SEND_ATOMIC_COMPARE_ADD);
            default -> ExtendedPostVerbs.call(c, sendInv, q, w.get(JAVA_INT, o + SEND_INVALIDATE_RKEY));
        }
    }

    /**
     * The inline SGEs {@code [s, s + numSge * 16)} of one request, to {@code wr_set_inline_data}:
     * in place when they are contiguous, else gathered; false when their total exceeds the queue
     * pair's {@code maxInlineData} (the provider would refuse it too).
     */
    private boolean inline(MemorySegment sges, long s, int numSge, long q, boolean c) {
        long first = sges.get(JAVA_LONG, s + SGE_ADDR);
        long end = first;
        long total = 0;
        boolean contiguous = true;
        for (int k = 0; k < numSge; k++) {
            long a = sges.get(JAVA_LONG, s + SGE_SIZE * k + SGE_ADDR);
            long len = Integer.toUnsignedLong(sges.get(JAVA_INT, s + SGE_SIZE * k + SGE_LENGTH));
            contiguous &= a == end;
            end = a + len;
            total += len;
        }
        if (contiguous) {
            ExtendedPostVerbs.call(c, setInline, q, first, total);
            return true;
        }
        if (total > gather.byteSize()) {
            return false;
        }
        long at = 0;
        for (int k = 0; k < numSge; k++) {
            long len = Integer.toUnsignedLong(sges.get(JAVA_INT, s + SGE_SIZE * k + SGE_LENGTH));
            MemorySegment.copy(EVERYWHERE, sges.get(JAVA_LONG, s + SGE_SIZE * k + SGE_ADDR), gather, at, len);
            at += len;
        }
        ExtendedPostVerbs.call(c, setInline, q, gatherAddress, total);
        return true;
    }
}
