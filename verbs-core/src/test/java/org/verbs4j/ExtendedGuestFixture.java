package org.verbs4j;

import static org.verbs4j.GuestSupport.assertSameBytes;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * Guest fixture of the extended post and poll tests (rxe0): one context and protection domain,
 * four registered buffers (extended sender, extended receiver, classic sender, classic receiver),
 * the chains and completion arrays, and the comparison of one operation posted through
 * {@code ibv_wr_*} and completed into an {@code ibv_cq_ex} against the same operation posted
 * through {@code ibv_post_send} and polled classically: completions value for value, buffers
 * byte for byte.
 */
final class ExtendedGuestFixture implements AutoCloseable {
    static final int SIZE = 16 * 1024;
    static final Set<Access> ALL =
            EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    static final Set<Access> REMOTE = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    static final Set<CompletionField> FIELDS =
            EnumSet.of(CompletionField.BYTE_LEN, CompletionField.IMM, CompletionField.QP_NUM);
    /** Where the atomics of the cases operate (holding {@link #ATOMIC_START} before each case). */
    static final long ATOMIC_AT = 8192;

    static final long ATOMIC_START = 41;

    final Context ctx;
    final ProtectionDomain pd;
    final Arena arena;
    final GidEntry gid;
    /** Extended sender, extended receiver, classic sender, classic receiver. */
    final MemorySegment[] bufs = new MemorySegment[4];

    final MemoryRegion[] mrs = new MemoryRegion[4];
    final SendWorkRequests sends = new SendWorkRequests(4, 2);
    final ReceiveWorkRequests recvs = new ReceiveWorkRequests(4, 1);
    final WorkCompletions wcs = new WorkCompletions(8);
    final ExtendedCompletions out = new ExtendedCompletions(8);

    ExtendedGuestFixture() {
        ctx = LoopbackPair.openTestDevice();
        pd = ctx.allocateProtectionDomain();
        arena = Arena.ofShared();
        gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        for (int i = 0; i < 4; i++) {
            bufs[i] = arena.allocate(SIZE, 4096);
            mrs[i] = pd.register(arena, bufs[i], ALL);
        }
    }

    @Override
    public void close() {
        GuestSupport.closeAll(wcs, recvs, sends);
        for (int i = 3; i >= 0; i--) {
            GuestSupport.closeAll(mrs[i]);
        }
        GuestSupport.closeAll(pd, ctx, arena);
    }

    /** One completion, in the fields both paths report (status and length included, so a failure shows). */
    record Seen(long wrId, int status, int opcode, int byteLen, int imm, int qpRole) {}

    /** What an operation posts on a chain: from {@code local} to {@code remote}. */
    @FunctionalInterface
    interface PostOp {
        void post(SendWorkRequests s, MemoryRegion local, MemoryRegion remote);
    }

    /** One case: an operation, and whether the peer receives (a receive is posted for it). */
    record Case(String what, boolean receive, PostOp op) {}

    /**
     * Every opcode of the classic chain once, over registered memory: sends with a receive, RDMA
     * (a write of two SGEs of unequal lengths), and the atomics on {@link #ATOMIC_AT} (compare
     * {@link #ATOMIC_START} and swap, then fetch and add 5 into {@code 10008}).
     */
    static final List<Case> EVERY_OPCODE = List.of(
            new Case("SEND", true, (s, l, r) -> s.send(1).sge(l, 0, 1000).signaled()),
            new Case(
                    "SEND_WITH_IMM",
                    true,
                    (s, l, r) ->
                            s.sendWithImmediate(2, 0xCAFEBABE).sge(l, 0, 300).signaled()),
            new Case(
                    "RDMA_WRITE, two SGEs of unequal length",
                    false,
                    (s, l, r) -> s.write(3, r.address() + 4096, r.rkey())
                            .sge(l, 0, 2048)
                            .sge(l, 2048, 100)
                            .signaled()),
            new Case(
                    "RDMA_WRITE_WITH_IMM",
                    true,
                    (s, l, r) -> s.writeWithImmediate(4, r.address() + 6000, r.rkey(), 0x1234)
                            .sge(l, 0, 777)
                            .signaled()),
            new Case(
                    "RDMA_READ",
                    false,
                    (s, l, r) ->
                            s.read(5, r.address(), r.rkey()).sge(l, 4096, 3000).signaled()),
            new Case(
                    "ATOMIC_CMP_AND_SWP",
                    false,
                    (s, l, r) -> s.compareAndSwap(6, r.address() + ATOMIC_AT, r.rkey(), ATOMIC_START, 99)
                            .sge(l, 10000, 8)
                            .signaled()),
            new Case(
                    "ATOMIC_FETCH_AND_ADD",
                    false,
                    (s, l, r) -> s.fetchAndAdd(7, r.address() + ATOMIC_AT, r.rkey(), 5)
                            .sge(l, 10008, 8)
                            .signaled()));

    /** An RC queue pair made by {@code ibv_create_qp_ex} for every operation, completing into {@code cq}. */
    QueuePair extendedPair(CompletionQueueEx cq) {
        return pd.createExtendedQueuePair(
                init(cq.queue()), EnumSet.complementOf(EnumSet.of(SendOperation.ATOMIC_WRITE)));
    }

    /** A classic RC queue pair of the same capacities, completing into {@code cq}. */
    QueuePair classicPair(CompletionQueue cq) {
        return pd.createQueuePair(init(cq));
    }

    private static QueuePairInit init(CompletionQueue cq) {
        return QueuePairInit.of(QueuePairType.RC, cq).maxSendSge(2).maxInlineData(64);
    }

    void connect(QueuePair a, QueuePair b) {
        GuestSupport.connect(a, b, gid, REMOTE, ConnectOptions.roce(gid.index()));
    }

    /** Every buffer patterned (the two sides differently), and the atomics' target set. */
    void resetBuffers() {
        for (int i = 0; i < 4; i++) {
            bufs[i].fill((byte) 0);
            pattern(bufs[i].asSlice(0, 4096), 7 + (i & 1));
        }
        bufs[1].set(ValueLayout.JAVA_LONG, ATOMIC_AT, ATOMIC_START);
        bufs[3].set(ValueLayout.JAVA_LONG, ATOMIC_AT, ATOMIC_START);
    }

    /** 0 for {@code a}'s queue pair number, 1 for {@code b}'s, else -1. */
    private static int role(int qpn, QueuePair a, QueuePair b) {
        return qpn == a.qpNumber() ? 0 : qpn == b.qpNumber() ? 1 : -1;
    }

    /** The next classic completion of {@code cq} (bounded wait), or null when none came. */
    Seen classic(CompletionQueue cq, QueuePair a, QueuePair b) {
        if (cq.poll(wcs, 1, GuestSupport.WAIT) != 1) {
            return null;
        }
        boolean ok = wcs.status(0) == CompletionStatus.SUCCESS;
        return new Seen(
                wcs.wrId(0),
                wcs.status(0),
                ok ? wcs.opcode(0) : -1,
                ok ? wcs.byteLength(0) : -1,
                ok && wcs.hasImmediate(0) ? wcs.immediate(0) : 0,
                role(wcs.qpNumber(0), a, b));
    }

    /** The next extended completion of {@code cq} (bounded wait), or null when none came. */
    Seen extended(CompletionQueueEx cq, QueuePair a, QueuePair b) {
        if (cq.poll(out, 1, GuestSupport.WAIT) != 1) {
            return null;
        }
        boolean ok = out.status(0) == CompletionStatus.SUCCESS;
        return new Seen(
                out.wrId(0),
                out.status(0),
                ok ? out.opcode(0) : -1,
                ok ? out.byteLength(0) : -1,
                ok && out.hasImmediate(0) ? out.immediateData(0) : 0,
                role(out.qpNumber(0), a, b));
    }

    /**
     * Posts {@code op} on {@code a} (through {@code ibv_wr_*} when {@code ext}, else
     * {@code ibv_post_send}) from {@code local} to {@code remote}, with a receive posted on
     * {@code b} first when {@code receive}.
     */
    void post(
            boolean receive,
            PostOp op,
            QueuePair a,
            QueuePair b,
            MemoryRegion local,
            MemoryRegion remote,
            boolean ext) {
        sends.clear();
        recvs.clear();
        if (receive) {
            b.postRecv(recvs.add(500).sge(remote, 12288, 4096));
        }
        op.post(sends, local, remote);
        if (ext) {
            a.postSendExtended(sends);
        } else {
            a.postSend(sends);
        }
    }

    /**
     * What differs between the extended ({@code ex}) and classic ({@code cl}) completions of one
     * case (sender's, and receiver's when {@code receive}) and between their buffers; printed, and
     * returned as one line, or null when nothing differs. A completion that did not succeed differs.
     */
    String compare(String what, boolean receive, Seen[] ex, Seen[] cl) {
        List<String> diffs = new ArrayList<>();
        for (int side = 0; side < (receive ? 2 : 1); side++) {
            String name = side == 0 ? "sender" : "receiver";
            if (cl[side] == null || !cl[side].equals(ex[side])) {
                diffs.add(name + ": classic " + cl[side] + ", extended " + ex[side]);
            } else if (ex[side].status() != CompletionStatus.SUCCESS) {
                diffs.add(name + ": both completed with status " + ex[side].status());
            }
        }
        String[] names = {"sender's buffer", "receiver's buffer"};
        for (int i = 0; i < 2; i++) {
            try {
                assertSameBytes(bufs[2 + i], bufs[i], names[i]);
            } catch (AssertionError e) {
                diffs.add(e.getMessage());
            }
        }
        String seen = what + ": " + ex[0] + (receive ? " / " + ex[1] : "");
        System.out.println("ibv_wr_* " + seen + (diffs.isEmpty() ? "" : "  DIFFERS " + diffs));
        return diffs.isEmpty() ? null : what + ": " + diffs;
    }
}
