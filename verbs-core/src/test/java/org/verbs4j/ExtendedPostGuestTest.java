package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.GuestSupport.assertSameBytes;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): every opcode posted through {@code ibv_wr_*} ({@link QueuePair#postSendExtended}
 * on a queue pair made by {@code ibv_create_qp_ex}) and polled through {@code ibv_cq_ex}, against
 * the same request posted through {@code ibv_post_send} and polled classically, on the same boot.
 * Each case runs on a fresh pair of each kind, so one failing case cannot hide another; the
 * completions are compared value for value and all four buffers byte for byte. SGE lists of
 * unequal lengths and inline data (one piece, and pieces mixed with a region SGE) are included,
 * as is a UD send through {@code wr_set_ud_addr}.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ExtendedPostGuestTest {
    private static final int SIZE = 16 * 1024;
    private static final Set<Access> ALL =
            EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    private static final Set<Access> REMOTE = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    private static final Set<CompletionField> FIELDS =
            EnumSet.of(CompletionField.BYTE_LEN, CompletionField.IMM, CompletionField.QP_NUM);

    private Context ctx;
    private ProtectionDomain pd;
    private Arena arena;
    private GidEntry gid;
    private MemorySegment[] bufs;
    private MemoryRegion[] mrs;
    private SendWorkRequests sends;
    private ReceiveWorkRequests recvs;
    private WorkCompletions wcs;
    private ExtendedCompletions out;

    @BeforeAll
    void open() {
        ctx = LoopbackPair.openTestDevice();
        pd = ctx.allocateProtectionDomain();
        arena = Arena.ofShared();
        gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        bufs = new MemorySegment[4]; // extended A, extended B, classic A, classic B
        mrs = new MemoryRegion[4];
        for (int i = 0; i < 4; i++) {
            bufs[i] = arena.allocate(SIZE, 4096);
            mrs[i] = pd.register(arena, bufs[i], ALL);
        }
        sends = new SendWorkRequests(4, 2);
        recvs = new ReceiveWorkRequests(4, 1);
        wcs = new WorkCompletions(8);
        out = new ExtendedCompletions(8);
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(wcs, recvs, sends);
        for (int i = 3; mrs != null && i >= 0; i--) {
            GuestSupport.closeAll(mrs[i]);
        }
        GuestSupport.closeAll(pd, ctx, arena);
    }

    /** One completion, in the fields both paths report; status and length included, so a failure shows. */
    private record Seen(long wrId, int status, int opcode, int byteLen, int imm) {}

    @FunctionalInterface
    interface PostOp {
        void post(SendWorkRequests s, MemoryRegion local, MemoryRegion remote);
    }

    private Seen classic(CompletionQueue cq) {
        if (cq.poll(wcs, 1, GuestSupport.WAIT) != 1) {
            return null;
        }
        return new Seen(
                wcs.wrId(0),
                wcs.status(0),
                wcs.status(0) == CompletionStatus.SUCCESS ? wcs.opcode(0) : -1,
                wcs.status(0) == CompletionStatus.SUCCESS ? wcs.byteLength(0) : -1,
                wcs.hasImmediate(0) ? wcs.immediate(0) : 0);
    }

    private Seen extended(CompletionQueueEx cq) {
        if (cq.poll(out, 1, GuestSupport.WAIT) != 1) {
            return null;
        }
        boolean ok = out.status(0) == CompletionStatus.SUCCESS;
        return new Seen(
                out.wrId(0),
                out.status(0),
                ok ? out.opcode(0) : -1,
                ok ? out.byteLength(0) : -1,
                ok && out.hasImmediate(0) ? out.immediateData(0) : 0);
    }

    /**
     * Runs {@code op} on a fresh extended pair (posting through {@code ibv_wr_*}, completing into
     * extended CQs) and a fresh classic pair; returns what differs, or null when nothing does.
     */
    private String same(String what, boolean receive, PostOp op) {
        for (int i = 0; i < 4; i++) {
            bufs[i].fill((byte) 0);
            pattern(bufs[i].asSlice(0, 4096), 7 + (i & 1));
        }
        bufs[1].set(ValueLayout.JAVA_LONG, 8192, 41);
        bufs[3].set(ValueLayout.JAVA_LONG, 8192, 41);
        Seen[] ex;
        Seen[] cl;
        try (CompletionQueueEx xA = ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                CompletionQueueEx xB = ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                CompletionQueue cA = ctx.createCompletionQueue(16);
                CompletionQueue cB = ctx.createCompletionQueue(16);
                QueuePair exA = extendedPair(xA);
                QueuePair exB = extendedPair(xB);
                QueuePair clA = pd.createQueuePair(
                        QueuePairInit.of(QueuePairType.RC, cA).maxSendSge(2).maxInlineData(64));
                QueuePair clB = pd.createQueuePair(
                        QueuePairInit.of(QueuePairType.RC, cB).maxSendSge(2).maxInlineData(64))) {
            ConnectOptions o = ConnectOptions.roce(gid.index());
            GuestSupport.connect(exA, exB, gid, REMOTE, o);
            GuestSupport.connect(clA, clB, gid, REMOTE, o);
            post(receive, op, exA, exB, mrs[0], mrs[1], true);
            ex = new Seen[] {extended(xA), receive ? extended(xB) : null};
            post(receive, op, clA, clB, mrs[2], mrs[3], false);
            cl = new Seen[] {classic(cA), receive ? classic(cB) : null};
        }
        List<String> diffs = new ArrayList<>();
        if (cl[0] == null || !cl[0].equals(ex[0])) {
            diffs.add("sender: classic " + cl[0] + ", extended " + ex[0]);
        }
        if (receive && (cl[1] == null || !cl[1].equals(ex[1]))) {
            diffs.add("receiver: classic " + cl[1] + ", extended " + ex[1]);
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

    private QueuePair extendedPair(CompletionQueueEx cq) {
        return pd.createExtendedQueuePair(
                QueuePairInit.of(QueuePairType.RC, cq.queue()).maxSendSge(2).maxInlineData(64),
                EnumSet.allOf(SendOperation.class));
    }

    private void post(
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

    @Test
    void everyOpcodeThroughWrMatchesTheClassicPath() {
        List<String> failed = new ArrayList<>();
        List<String> r = new ArrayList<>();
        r.add(same("SEND", true, (s, l, x) -> s.send(1).sge(l, 0, 1000).signaled()));
        r.add(same(
                "SEND_WITH_IMM",
                true,
                (s, l, x) -> s.sendWithImmediate(2, 0xCAFEBABE).sge(l, 0, 300).signaled()));
        r.add(same(
                "SEND, two SGEs of equal length",
                true,
                (s, l, x) -> s.send(3).sge(l, 0, 400).sge(l, 1000, 400).signaled()));
        r.add(same(
                "SEND, two SGEs of unequal length",
                true,
                (s, l, x) -> s.send(4).sge(l, 0, 700).sge(l, 1000, 100).signaled()));
        r.add(same(
                "RDMA_WRITE",
                false,
                (s, l, x) ->
                        s.write(5, x.address() + 4096, x.rkey()).sge(l, 0, 2048).signaled()));
        r.add(same(
                "RDMA_WRITE, two SGEs of unequal length",
                false,
                (s, l, x) -> s.write(6, x.address() + 4096, x.rkey())
                        .sge(l, 0, 2048)
                        .sge(l, 2048, 100)
                        .signaled()));
        r.add(same(
                "RDMA_WRITE_WITH_IMM",
                true,
                (s, l, x) -> s.writeWithImmediate(7, x.address() + 6000, x.rkey(), 0x1234)
                        .sge(l, 0, 777)
                        .signaled()));
        r.add(same(
                "RDMA_READ",
                false,
                (s, l, x) -> s.read(8, x.address(), x.rkey()).sge(l, 4096, 3000).signaled()));
        r.add(same(
                "RDMA_READ, two SGEs of unequal length",
                false,
                (s, l, x) -> s.read(9, x.address(), x.rkey())
                        .sge(l, 4096, 1500)
                        .sge(l, 8000, 90)
                        .signaled()));
        r.add(same(
                "ATOMIC_CMP_AND_SWP",
                false,
                (s, l, x) -> s.compareAndSwap(10, x.address() + 8192, x.rkey(), 41, 99)
                        .sge(l, 10000, 8)
                        .signaled()));
        r.add(same(
                "ATOMIC_FETCH_AND_ADD",
                false,
                (s, l, x) -> s.fetchAndAdd(11, x.address() + 8192, x.rkey(), 5)
                        .sge(l, 10008, 8)
                        .signaled()));
        r.add(same(
                "SEND inline, two pieces (wr_set_inline_data)",
                true,
                (s, l, x) -> s.send(12)
                        .inline(l.segment().asSlice(0, 40))
                        .inline(l.segment().asSlice(40, 24))
                        .signaled()));
        r.add(same(
                "SEND inline, a region's bytes then a piece (wr_set_inline_data_list)",
                true,
                (s, l, x) -> s.send(16)
                        .sge(l, 100, 24)
                        .inline(l.segment().asSlice(0, 40))
                        .signaled()));
        r.add(same(
                "three RDMA_WRITEs in one post, the last signaled",
                false,
                (s, l, x) -> s.write(13, x.address(), x.rkey())
                        .sge(l, 0, 512)
                        .write(14, x.address() + 1024, x.rkey())
                        .sge(l, 1024, 512)
                        .write(15, x.address() + 2048, x.rkey())
                        .sge(l, 2048, 512)
                        .signaled()));
        for (String s : r) {
            if (s != null) {
                failed.add(s);
            }
        }
        assertTrue(failed.isEmpty(), "through ibv_wr_*, unlike ibv_post_send: " + failed + kernelLog());
    }

    @Test
    void udSendThroughWrSetUdAddrMatchesTheClassicPath() {
        final int qkey = 0x1234;
        final int grh = 40;
        final int len = 512;
        AddressVector av = AddressVector.global(1, gid.gid(), gid.index());
        int[] lengths = new int[2];
        for (int round = 0; round < 2; round++) {
            boolean ext = round == 0;
            MemoryRegion local = mrs[ext ? 0 : 2];
            MemoryRegion remote = mrs[ext ? 1 : 3];
            pattern(local.segment().asSlice(0, len), 11);
            remote.segment().fill((byte) 0);
            try (CompletionQueueEx xS = ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                    CompletionQueue cS = ctx.createCompletionQueue(16);
                    CompletionQueue cR = ctx.createCompletionQueue(16);
                    QueuePair s = ext
                            ? pd.createExtendedQueuePair(
                                    QueuePairInit.of(QueuePairType.UD, xS.queue()),
                                    EnumSet.of(SendOperation.SEND, SendOperation.SEND_WITH_IMM))
                            : pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cS));
                    QueuePair r = pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cR));
                    AddressHandle ah = pd.createAddressHandle(av)) {
                s.activateUd(1, qkey, 0);
                r.activateUd(1, qkey, 0);
                r.postRecv(recvs.clear().add(401).sge(remote, 0, grh + 1024));
                sends.clear()
                        .sendWithImmediate(402, 0x0A0B0C0D)
                        .sge(local, 0, len)
                        .destination(ah, r.qpNumber(), qkey)
                        .signaled();
                if (ext) {
                    s.postSendExtended(sends);
                } else {
                    s.postSend(sends);
                }
                GuestSupport.awaitSuccess(cR, wcs, 1);
                assertEquals(401, wcs.wrId(0));
                assertEquals(0x0A0B0C0D, wcs.immediate(0), "the immediate data");
                assertEquals(s.qpNumber(), wcs.sourceQp(0), "the sender");
                lengths[round] = wcs.byteLength(0);
                Seen sent = ext ? extended(xS) : classic(cS);
                assertEquals(new Seen(402, CompletionStatus.SUCCESS, CompletionOpcode.SEND, sent.byteLen(), 0), sent);
            }
        }
        assertEquals(grh + len, lengths[0], "the GRH precedes the payload");
        assertEquals(lengths[1], lengths[0]);
        assertSameBytes(mrs[0].segment().asSlice(0, len), mrs[1].segment().asSlice(grh, len), "UD payload (ibv_wr_*)");
        // the GRH areas differ (the IPv4 header's identification), the payloads and what follows must not
        assertSameBytes(
                mrs[3].segment().asSlice(grh), mrs[1].segment().asSlice(grh), "the receivers' buffers after the GRH");
    }

    /**
     * What postSendExtended works around: on a provider whose {@code wr_set_sge_list} miscounts
     * (rxe before rdma-core 64), the list of unequal lengths posted through the builders
     * themselves does not move what the classic post moves. Elsewhere the flag must be off.
     */
    @Test
    void anSgeListOfUnequalLengthsThroughTheBuildersIsMiscountedWhereFlagged() {
        for (int i = 0; i < 4; i++) {
            bufs[i].fill((byte) 0);
            pattern(bufs[i].asSlice(0, 4096), 7 + (i & 1));
        }
        try (CompletionQueueEx xA = ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                CompletionQueueEx xB = ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                QueuePair exA = extendedPair(xA);
                QueuePair exB = extendedPair(xB)) {
            GuestSupport.connect(exA, exB, gid, REMOTE, ConnectOptions.roce(gid.index()));
            boolean flagged = exA.extended.sgeListMiscounted;
            System.out.println(ctx.deviceName() + " wr_set_sge_list miscounts unequal lengths (flagged): " + flagged);
            sends.clear()
                    .write(20, mrs[1].address() + 4096, mrs[1].rkey())
                    .sge(mrs[0], 0, 2048)
                    .sge(mrs[0], 2048, 100)
                    .signaled();
            assertTrue(exA.extended.postsClassically(sends, 1) == flagged, "routed classically where flagged");
            assertEquals(0, exA.extended.post(sends, 1), "wr_complete"); // the builders themselves
            Seen seen = extended(xA);
            boolean moved = seen != null
                    && seen.status() == CompletionStatus.SUCCESS
                    && bufs[1].asSlice(4096, 2148).mismatch(bufs[0].asSlice(0, 2148)) < 0
                    && bufs[1].get(ValueLayout.JAVA_BYTE, 4096 + 2148) != bufs[0].get(ValueLayout.JAVA_BYTE, 2148);
            System.out.println("through wr_set_sge_list itself: " + seen + ", moved exactly 2148 bytes: " + moved);
            if (flagged) {
                assertTrue(!moved, "flagged, yet the provider counted right: " + seen);
            } else {
                assertTrue(moved, "not flagged, yet the provider miscounted: " + seen + kernelLog());
            }
        }
    }

    /** The kernel's last lines (rxe logs why it failed a request), for a failure message. */
    private static String kernelLog() {
        try {
            Process p = new ProcessBuilder("dmesg").redirectErrorStream(true).start();
            String all = new String(p.getInputStream().readAllBytes());
            p.waitFor();
            String[] lines = all.split("\n");
            return "\nkernel log:\n"
                    + String.join("\n", List.of(lines).subList(Math.max(0, lines.length - 15), lines.length));
        } catch (Exception e) {
            return " (no kernel log: " + e + ")";
        }
    }
}
