package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.GuestSupport.assertSameBytes;
import static org.verbs4j.GuestSupport.awaitSuccess;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): extended completion queues on a real provider. Two RC loopback pairs on one
 * device, one completing into extended CQs (polled with start/next/end poll), one into classic
 * CQs; every opcode of the classic chain runs on both with the same payloads, and the extended
 * completions and the bytes they moved are compared with the classic ones value for value and
 * byte for byte. Also: a completion channel event for an extended CQ, and what the device says
 * to completion timestamps (printed, and refused with the reason where it has none).
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ExtendedCompletionsGuestTest {
    private static final int SIZE = 16 * 1024;
    private static final Set<Access> ALL =
            EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    private static final Set<Access> REMOTE = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    private static final Set<CompletionField> FIELDS =
            EnumSet.of(CompletionField.BYTE_LEN, CompletionField.IMM, CompletionField.QP_NUM);

    private Context ctx;
    private ProtectionDomain pd;
    private Arena arena;
    private CompletionQueueEx xA;
    private CompletionQueueEx xB;
    private CompletionQueue cA;
    private CompletionQueue cB;
    private QueuePair exA;
    private QueuePair exB;
    private QueuePair clA;
    private QueuePair clB;
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
        xA = ctx.createExtendedCompletionQueue(64, FIELDS, null, 0);
        xB = ctx.createExtendedCompletionQueue(64, FIELDS, null, 0);
        cA = ctx.createCompletionQueue(64);
        cB = ctx.createCompletionQueue(64);
        exA = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, xA.queue()).maxSendSge(2));
        exB = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, xB.queue()).maxSendSge(2));
        clA = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cA).maxSendSge(2));
        clB = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cB).maxSendSge(2));
        GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        ConnectOptions o = ConnectOptions.roce(gid.index());
        GuestSupport.connect(exA, exB, gid, REMOTE, o);
        GuestSupport.connect(clA, clB, gid, REMOTE, o);
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
        GuestSupport.closeAll(clB, clA, exB, exA, cB, cA, xB, xA, pd, ctx, arena);
    }

    /** One completion from each path; the extended one must equal the classic one in every field they share. */
    private record Seen(long wrId, int status, int opcode, int byteLen, int qpRole, int imm, boolean hasImm) {}

    private Seen classic(CompletionQueue cq, QueuePair a, QueuePair b) {
        awaitSuccess(cq, wcs, 1);
        int qpn = wcs.qpNumber(0);
        return new Seen(
                wcs.wrId(0),
                wcs.status(0),
                wcs.opcode(0),
                wcs.byteLength(0),
                qpn == a.qpNumber() ? 0 : qpn == b.qpNumber() ? 1 : -1,
                wcs.hasImmediate(0) ? wcs.immediate(0) : 0,
                wcs.hasImmediate(0));
    }

    private Seen extended(CompletionQueueEx cq, QueuePair a, QueuePair b) {
        assertEquals(1, cq.poll(out, 1, GuestSupport.WAIT), "one extended completion");
        assertEquals(CompletionStatus.SUCCESS, out.status(0), "status " + out.status(0));
        int qpn = out.qpNumber(0);
        boolean hasImm = out.hasImmediate(0);
        return new Seen(
                out.wrId(0),
                out.status(0),
                out.opcode(0),
                out.byteLength(0),
                qpn == a.qpNumber() ? 0 : qpn == b.qpNumber() ? 1 : -1,
                hasImm ? out.immediateData(0) : 0,
                hasImm);
    }

    /**
     * Runs {@code op} (which posts on {@code from} to {@code to}, with the local and remote buffer
     * and region) on the extended pair and on the classic pair with the same payload, and compares
     * the sender's (and with {@code receive}, the receiver's) completions and all four buffers.
     */
    private void same(String what, boolean receive, PostOp op) {
        for (int i = 0; i < 4; i++) {
            bufs[i].fill((byte) 0);
            pattern(bufs[i].asSlice(0, 4096), 7 + (i & 1));
        }
        bufs[1].set(ValueLayout.JAVA_LONG, 8192, 41);
        bufs[3].set(ValueLayout.JAVA_LONG, 8192, 41);
        Seen[] ex = run(receive, op, exA, exB, mrs[0], mrs[1], true);
        Seen[] cl = run(receive, op, clA, clB, mrs[2], mrs[3], false);
        assertEquals(cl[0], ex[0], what + ": the sender's completion");
        if (receive) {
            assertEquals(cl[1], ex[1], what + ": the receiver's completion");
        }
        assertSameBytes(bufs[2], bufs[0], what + ": the extended sender's buffer");
        assertSameBytes(bufs[3], bufs[1], what + ": the extended receiver's buffer");
    }

    @FunctionalInterface
    interface PostOp {
        void post(SendWorkRequests s, MemoryRegion local, MemoryRegion remote);
    }

    private Seen[] run(
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
        a.postSend(sends);
        Seen s = ext ? extended(xA, a, b) : classic(cA, a, b);
        Seen r = receive ? (ext ? extended(xB, a, b) : classic(cB, a, b)) : null;
        return new Seen[] {s, r};
    }

    @Test
    void everyOpcodeCompletesAsOnTheClassicPath() {
        same("SEND", true, (s, l, r) -> s.send(1).sge(l, 0, 1000).signaled());
        same(
                "SEND_WITH_IMM",
                true,
                (s, l, r) -> s.sendWithImmediate(2, 0xCAFEBABE).sge(l, 0, 300).signaled());
        same(
                "RDMA_WRITE",
                false,
                (s, l, r) -> s.write(3, r.address() + 4096, r.rkey())
                        .sge(l, 0, 2048)
                        .sge(l, 2048, 100)
                        .signaled());
        same(
                "RDMA_WRITE_WITH_IMM",
                true,
                (s, l, r) -> s.writeWithImmediate(4, r.address() + 6000, r.rkey(), 0x1234)
                        .sge(l, 0, 777)
                        .signaled());
        same(
                "RDMA_READ",
                false,
                (s, l, r) -> s.read(5, r.address(), r.rkey()).sge(l, 4096, 3000).signaled());
        same(
                "COMP_SWAP",
                false,
                (s, l, r) -> s.compareAndSwap(6, r.address() + 8192, r.rkey(), 41, 99)
                        .sge(l, 10000, 8)
                        .signaled());
        same(
                "FETCH_ADD",
                false,
                (s, l, r) -> s.fetchAndAdd(7, r.address() + 8192, r.rkey(), 5)
                        .sge(l, 10008, 8)
                        .signaled());
        assertEquals(41 + 5, bufs[1].get(ValueLayout.JAVA_LONG, 8192), "added to");
        assertEquals(41, bufs[0].get(ValueLayout.JAVA_LONG, 10008), "the value fetched");
    }

    @Test
    void aCompletionChannelWakesAWaiterOnAnExtendedQueue() {
        try (CompletionChannel channel = ctx.createCompletionChannel();
                CompletionQueueEx cq = ctx.createExtendedCompletionQueue(16, FIELDS, channel, 0);
                QueuePair a = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq.queue()));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cB))) {
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
            GuestSupport.connect(a, b, gid, REMOTE, ConnectOptions.roce(gid.index()));
            CompletionWaiter waiter = new CompletionWaiter(cq.queue(), 0);
            sends.clear();
            a.postSend(sends.write(77, mrs[3].address(), mrs[3].rkey())
                    .sge(mrs[2], 0, 64)
                    .signaled());
            try (WorkCompletions one = new WorkCompletions(1)) {
                assertEquals(1, waiter.await(one, 1, Duration.ofSeconds(10)));
                assertEquals(77, one.wrId(0));
            }
        }
    }

    @Test
    void completionTimestampsAreDeliveredOrRefusedWithTheReason() {
        long[] attrs = CompletionQueueEx.timestampAttributes(ctx);
        System.out.printf(
                "%s extended CQ: completion_timestamp_mask 0x%x, hca_core_clock %d kHz%n",
                ctx.deviceName(), attrs[0], attrs[1]);
        try (CompletionQueueEx cq =
                ctx.createExtendedCompletionQueue(16, EnumSet.of(CompletionField.COMPLETION_TIMESTAMP), null, 0)) {
            assertTrue(attrs[0] != 0, "created only where the device makes timestamps");
            System.out.println(
                    ctx.deviceName() + " completion timestamps: yes, 1e6 ticks = " + cq.clockNanos(1_000_000) + " ns");
        } catch (VerbsException e) {
            assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
            assertEquals("ibv_create_cq_ex", e.verb(), e.getMessage());
            UserMessages.check(e);
            assertTrue(
                    attrs[0] == 0
                            ? e.getMessage().contains("completion_timestamp_mask 0")
                            : e.getMessage().contains("refused wc_flags"),
                    e.getMessage());
            System.out.println(ctx.deviceName() + " completion timestamps: no (" + e.getMessage() + ")");
        }
        try {
            System.out.println(ctx.deviceName() + " ibv_query_rt_values_ex raw clock: " + xA.rawClock());
        } catch (VerbsException e) {
            assertTrue(e.errno() == Errno.EOPNOTSUPP || e.errno() == Errno.ENOSYS, e.getMessage());
            System.out.println(ctx.deviceName() + " ibv_query_rt_values_ex: no (" + e.getMessage() + ")");
        }
    }

    @Test
    void theCapabilityReportAnswersEveryFeatureWithAReason() {
        CapabilityReport r = ctx.capabilities();
        System.out.print("capability report:\n" + r.format());
        assertEquals(ctx.deviceName(), r.device());
        for (String name : new String[] {
            "atomics", "srq", "inline data", "extended CQ", "completion timestamps", "extended QP", "odp",
            "implicit odp", "memory windows", "xrc", "device memory", "multicast", "thread domains", "dma-buf"
        }) {
            CapabilityReport.Feature f = r.feature(name).orElseThrow(() -> new AssertionError("no " + name));
            assertTrue(!f.detail().isBlank(), name + " says why");
        }
        assertTrue(r.feature("extended CQ").orElseThrow().supported(), "this class polls extended CQs");
        assertEquals(
                ctx.queryDevice().atomicCap() != DeviceAttributes.ATOMIC_NONE,
                r.feature("atomics").orElseThrow().supported());
        assertEquals(ctx.queryDevice().physPortCount(), r.ports().size());
    }
}
