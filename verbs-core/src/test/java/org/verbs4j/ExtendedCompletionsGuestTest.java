package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.ExtendedGuestFixture.ATOMIC_AT;
import static org.verbs4j.ExtendedGuestFixture.ATOMIC_START;
import static org.verbs4j.ExtendedGuestFixture.FIELDS;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.EnumSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.ExtendedGuestFixture.PostOp;
import org.verbs4j.ExtendedGuestFixture.Seen;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): extended completion queues on a real provider. Two RC loopback pairs on one
 * device: one made by {@code ibv_create_qp_ex}, posting through {@code ibv_wr_*} and completing
 * into extended CQs (polled with start/next/end poll), one posting through {@code ibv_post_send}
 * into classic CQs; every opcode of the classic chain runs on both with the same payloads, and
 * the extended completions (queue pair included) and the bytes they moved are compared with the
 * classic ones value for value and byte for byte. Also: a completion channel event for an
 * extended CQ, and what the device says to completion timestamps (printed, and refused with the
 * reason where it has none).
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ExtendedCompletionsGuestTest {
    private ExtendedGuestFixture f;
    private Context ctx;
    private CompletionQueueEx xA;
    private CompletionQueueEx xB;
    private CompletionQueue cA;
    private CompletionQueue cB;
    private QueuePair exA;
    private QueuePair exB;
    private QueuePair clA;
    private QueuePair clB;

    @BeforeAll
    void open() {
        f = new ExtendedGuestFixture();
        ctx = f.ctx;
        xA = ctx.createExtendedCompletionQueue(64, FIELDS, null, 0);
        xB = ctx.createExtendedCompletionQueue(64, FIELDS, null, 0);
        cA = ctx.createCompletionQueue(64);
        cB = ctx.createCompletionQueue(64);
        exA = f.extendedPair(xA);
        exB = f.extendedPair(xB);
        clA = f.classicPair(cA);
        clB = f.classicPair(cB);
        f.connect(exA, exB);
        f.connect(clA, clB);
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(clB, clA, exB, exA, cB, cA, xB, xA, f);
    }

    /**
     * Runs {@code op} on the extended pair (through {@code ibv_wr_*}) and on the classic pair with
     * the same payload, and compares the sender's (and with {@code receive}, the receiver's)
     * completions and all four buffers; each completion must have succeeded.
     */
    private void same(String what, boolean receive, PostOp op) {
        f.resetBuffers();
        f.post(receive, op, exA, exB, f.mrs[0], f.mrs[1], true);
        Seen[] ex = {f.extended(xA, exA, exB), receive ? f.extended(xB, exA, exB) : null};
        f.post(receive, op, clA, clB, f.mrs[2], f.mrs[3], false);
        Seen[] cl = {f.classic(cA, clA, clB), receive ? f.classic(cB, clA, clB) : null};
        assertNull(f.compare(what, receive, ex, cl));
    }

    @Test
    void everyOpcodeCompletesAsOnTheClassicPath() {
        for (ExtendedGuestFixture.Case c : ExtendedGuestFixture.EVERY_OPCODE) {
            same(c.what(), c.receive(), c.op());
        }
        assertEquals(ATOMIC_START + 5, f.bufs[1].get(ValueLayout.JAVA_LONG, ATOMIC_AT), "added to");
        assertEquals(ATOMIC_START, f.bufs[0].get(ValueLayout.JAVA_LONG, 10008), "the value fetched");
    }

    @Test
    void aCompletionChannelWakesAWaiterOnAnExtendedQueue() {
        try (CompletionChannel channel = ctx.createCompletionChannel();
                CompletionQueueEx cq = ctx.createExtendedCompletionQueue(16, FIELDS, channel, 0);
                QueuePair a = f.extendedPair(cq);
                QueuePair b = f.classicPair(cB)) {
            f.connect(a, b);
            CompletionWaiter waiter = new CompletionWaiter(cq.queue(), 0);
            f.sends.clear();
            a.postSendExtended(f.sends
                    .write(77, f.mrs[3].address(), f.mrs[3].rkey())
                    .sge(f.mrs[2], 0, 64)
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
            "atomics",
            "srq",
            "inline data",
            "extended CQ",
            "completion timestamps",
            "extended QP",
            "odp",
            "implicit odp",
            "memory windows",
            "xrc",
            "device memory",
            "multicast",
            "atomic write",
            "flush",
            "thread domains",
            "dma-buf"
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
