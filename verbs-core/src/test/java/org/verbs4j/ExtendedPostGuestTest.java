package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.ExtendedGuestFixture.FIELDS;
import static org.verbs4j.GuestSupport.assertSameBytes;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.ExtendedGuestFixture.PostOp;
import org.verbs4j.ExtendedGuestFixture.Seen;
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
    private ExtendedGuestFixture f;
    private MemorySegment[] bufs;
    private MemoryRegion[] mrs;

    @BeforeAll
    void open() {
        f = new ExtendedGuestFixture();
        bufs = f.bufs;
        mrs = f.mrs;
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(f);
    }

    /**
     * Runs {@code op} on a fresh extended pair (posting through {@code ibv_wr_*}, completing into
     * extended CQs) and a fresh classic pair; returns what differs, or null when nothing does.
     */
    private String same(String what, boolean receive, PostOp op) {
        f.resetBuffers();
        Seen[] ex;
        Seen[] cl;
        try (CompletionQueueEx xA = f.ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                CompletionQueueEx xB = f.ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                CompletionQueue cA = f.ctx.createCompletionQueue(16);
                CompletionQueue cB = f.ctx.createCompletionQueue(16);
                QueuePair exA = f.extendedPair(xA);
                QueuePair exB = f.extendedPair(xB);
                QueuePair clA = f.classicPair(cA);
                QueuePair clB = f.classicPair(cB)) {
            f.connect(exA, exB);
            f.connect(clA, clB);
            f.post(receive, op, exA, exB, mrs[0], mrs[1], true);
            ex = new Seen[] {f.extended(xA, exA, exB), receive ? f.extended(xB, exA, exB) : null};
            f.post(receive, op, clA, clB, mrs[2], mrs[3], false);
            cl = new Seen[] {f.classic(cA, clA, clB), receive ? f.classic(cB, clA, clB) : null};
        }
        return f.compare(what, receive, ex, cl);
    }

    @Test
    void everyOpcodeThroughWrMatchesTheClassicPath() {
        List<String> failed = new ArrayList<>();
        List<String> r = new ArrayList<>();
        for (ExtendedGuestFixture.Case c : ExtendedGuestFixture.EVERY_OPCODE) {
            r.add(same(c.what(), c.receive(), c.op()));
        }
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
                "RDMA_READ, two SGEs of unequal length",
                false,
                (s, l, x) -> s.read(9, x.address(), x.rkey())
                        .sge(l, 4096, 1500)
                        .sge(l, 8000, 90)
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
        AddressVector av = AddressVector.global(1, f.gid.gid(), f.gid.index());
        int[] lengths = new int[2];
        for (int round = 0; round < 2; round++) {
            boolean ext = round == 0;
            MemoryRegion local = mrs[ext ? 0 : 2];
            MemoryRegion remote = mrs[ext ? 1 : 3];
            pattern(local.segment().asSlice(0, len), 11);
            remote.segment().fill((byte) 0);
            try (CompletionQueueEx xS = f.ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                    CompletionQueue cS = f.ctx.createCompletionQueue(16);
                    CompletionQueue cR = f.ctx.createCompletionQueue(16);
                    QueuePair s = ext
                            ? f.pd.createExtendedQueuePair(
                                    QueuePairInit.of(QueuePairType.UD, xS.queue()),
                                    EnumSet.of(SendOperation.SEND, SendOperation.SEND_WITH_IMM))
                            : f.pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cS));
                    QueuePair r = f.pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cR));
                    AddressHandle ah = f.pd.createAddressHandle(av)) {
                s.activateUd(1, qkey, 0);
                r.activateUd(1, qkey, 0);
                r.postRecv(f.recvs.clear().add(401).sge(remote, 0, grh + 1024));
                f.sends
                        .clear()
                        .sendWithImmediate(402, 0x0A0B0C0D)
                        .sge(local, 0, len)
                        .destination(ah, r.qpNumber(), qkey)
                        .signaled();
                if (ext) {
                    s.postSendExtended(f.sends);
                } else {
                    s.postSend(f.sends);
                }
                GuestSupport.awaitSuccess(cR, f.wcs, 1);
                assertEquals(401, f.wcs.wrId(0));
                assertEquals(0x0A0B0C0D, f.wcs.immediate(0), "the immediate data");
                assertEquals(s.qpNumber(), f.wcs.sourceQp(0), "the sender");
                lengths[round] = f.wcs.byteLength(0);
                Seen sent = ext ? f.extended(xS, s, r) : f.classic(cS, s, r);
                assertEquals(
                        new Seen(402, CompletionStatus.SUCCESS, CompletionOpcode.SEND, sent.byteLen(), 0, 0), sent);
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
        f.resetBuffers();
        try (CompletionQueueEx xA = f.ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                CompletionQueueEx xB = f.ctx.createExtendedCompletionQueue(16, FIELDS, null, 0);
                QueuePair exA = f.extendedPair(xA);
                QueuePair exB = f.extendedPair(xB)) {
            f.connect(exA, exB);
            boolean flagged = exA.extended.sgeListMiscounted;
            System.out.println(f.ctx.deviceName() + " wr_set_sge_list miscounts unequal lengths (flagged): " + flagged);
            f.sends
                    .clear()
                    .write(20, mrs[1].address() + 4096, mrs[1].rkey())
                    .sge(mrs[0], 0, 2048)
                    .sge(mrs[0], 2048, 100)
                    .signaled();
            assertTrue(exA.extended.postsClassically(f.sends, 1) == flagged, "routed classically where flagged");
            assertEquals(0, exA.extended.post(f.sends, 1), "wr_complete"); // the builders themselves
            Seen seen = f.extended(xA, exA, exB);
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
