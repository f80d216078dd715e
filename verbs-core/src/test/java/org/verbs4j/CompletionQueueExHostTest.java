package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.CompletionExLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the extended completion queue over the stand-in provider, whose create_cq_ex makes
 * an {@code ibv_cq_ex} with start_poll/next_poll/end_poll and field readers over its completion
 * queue (and counts any call out of the start/next/end order): each poll reads the current
 * completion's requested fields, ends every poll that start_poll began and no other, converts
 * timestamps with hca_core_clock, shares the classic CQ's gate and checked-mode accounting, and
 * refuses misuse (closed queue, a second poller, fields not asked for).
 */
@NeedsNativeToolchain
class CompletionQueueExHostTest {
    private StandInObjects o;
    private StandInProvider p;
    private Context ctx;

    @BeforeEach
    void open() {
        o = StandInObjects.open();
        p = o.p;
        ctx = o.ctx;
    }

    @AfterEach
    void close() {
        assertEquals(0, p.pollProtocolErrors(), "start/next/end poll called out of order");
        assertFalse(p.inPoll(), "a poll was left open");
        o.close();
    }

    private CompletionQueueEx create(Set<CompletionField> fields) {
        return CompletionQueueEx.create(ctx, 64, fields, null, 0, InlineVerbs::createCqEx, h -> p.free(h));
    }

    private void queue(int n) {
        for (int i = 0; i < n; i++) {
            assertEquals(
                    0,
                    p.queueCompletion(
                            100 + i,
                            CompletionStatus.SUCCESS,
                            CompletionOpcode.RDMA_READ,
                            32 + i,
                            StandInProvider.QP_NUM));
        }
    }

    @Test
    void pollReadsTheRequestedFieldsAndEndsEachPollItBegan() {
        try (CompletionQueueEx cq =
                create(EnumSet.of(CompletionField.BYTE_LEN, CompletionField.QP_NUM, CompletionField.SRC_QP))) {
            long asked = CompletionExLayout.WC_EX_WITH_BYTE_LEN
                    | CompletionExLayout.WC_EX_WITH_QP_NUM
                    | CompletionExLayout.WC_EX_WITH_SRC_QP;
            assertEquals(asked, p.lastCreateCqExWcFlags());
            assertEquals(64, cq.capacity());
            queue(5);
            ExtendedCompletions out = new ExtendedCompletions(3);
            assertEquals(3, cq.poll(out), "a full batch: start_poll, next_poll twice, end_poll");
            assertEquals(2, cq.poll(out), "the rest: next_poll says ENOENT, then end_poll");
            for (int i = 0; i < 2; i++) {
                assertEquals(103 + i, out.wrId(i));
                assertEquals(CompletionStatus.SUCCESS, out.status(i));
                assertEquals(CompletionOpcode.RDMA_READ, out.opcode(i));
                assertEquals(35 + i, out.byteLength(i));
                assertEquals(StandInProvider.QP_NUM, out.qpNumber(i));
                assertEquals(StandInProvider.QP_NUM + 1000, out.sourceQpNumber(i));
                assertEquals(0, out.vendorError(i));
                assertTrue(out.has(CompletionField.BYTE_LEN));
                assertFalse(out.has(CompletionField.IMM));
            }
            assertEquals(0, cq.poll(out), "empty: start_poll says ENOENT and no end_poll follows");
            assertEquals(0, out.count());
            assertEquals(3, p.calls(StandInProvider.Op.POLL_CQ), "three start_polls");
        }
    }

    @Test
    void fieldsNotAskedForAndIndexesPastTheCountAreRefused() {
        try (CompletionQueueEx cq = create(EnumSet.of(CompletionField.BYTE_LEN))) {
            queue(1);
            ExtendedCompletions out = new ExtendedCompletions(4);
            assertEquals(1, cq.poll(out));
            InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> out.immediateData(0));
            assertTrue(e.getMessage().contains("CompletionField.IMM"), e.getMessage());
            assertThrows(InvalidRequestException.class, () -> out.completionTimestamp(0));
            e = assertThrows(InvalidRequestException.class, () -> out.wrId(1));
            assertTrue(e.getMessage().contains("index 1"), e.getMessage());
            assertThrows(InvalidRequestException.class, () -> new ExtendedCompletions(0));
        }
    }

    @Test
    void aFailedCompletionCarriesItsVendorError() {
        try (CompletionQueueEx cq = create(EnumSet.noneOf(CompletionField.class))) {
            p.queueCompletion(7, CompletionStatus.REM_ACCESS_ERR, 0, 0, StandInProvider.QP_NUM);
            ExtendedCompletions out = new ExtendedCompletions(2);
            assertEquals(1, cq.poll(out));
            assertEquals(7, out.wrId(0));
            assertEquals(CompletionStatus.REM_ACCESS_ERR, out.status(0));
            assertEquals(0x5a, out.vendorError(0));
        }
    }

    @Test
    void timestampsAreRawTicksAndConvertWithTheCoreClock() {
        try (CompletionQueueEx cq = create(
                EnumSet.of(CompletionField.COMPLETION_TIMESTAMP, CompletionField.COMPLETION_TIMESTAMP_WALLCLOCK))) {
            queue(3);
            ExtendedCompletions out = new ExtendedCompletions(8);
            assertEquals(3, cq.poll(out, 3, Duration.ofSeconds(5)));
            for (int i = 0; i < 3; i++) {
                long ticks = p.completionTimestamp(i);
                assertEquals(ticks, out.completionTimestamp(i));
                // a 1 MHz clock: one tick is 1000 ns
                assertEquals(ticks * 1000, cq.clockNanos(out.completionTimestamp(i)));
                assertEquals(ticks * 1000, out.completionWallclockNanos(i));
            }
            assertEquals(3000, cq.clockNanos(out.completionTimestamp(1) - out.completionTimestamp(0)), "3 ticks apart");
            assertEquals(p.completionTimestamp(3), cq.rawClock(), "the clock now: the next completion's tick");
            assertEquals(Long.MAX_VALUE / 1000 * 1_000_000L, cq.clockNanos(Long.MAX_VALUE / 1000 * 1000));
        }
    }

    @Test
    void clockConversionWithoutTimestampsIsRefused() {
        try (CompletionQueueEx cq = create(EnumSet.noneOf(CompletionField.class))) {
            refused("ibv_query_device_ex", Errno.EOPNOTSUPP, () -> cq.clockNanos(5), "hca_core_clock");
        }
    }

    @Test
    void aStartPollErrorIsReportedAndNoPollIsLeftOpen() {
        try (CompletionQueueEx cq = create(EnumSet.noneOf(CompletionField.class))) {
            queue(1);
            p.failPoll(-Errno.EIO);
            refused("ibv_start_poll", Errno.EIO, () -> cq.poll(new ExtendedCompletions(2)), "polling the CQ");
            p.failPoll(0);
            assertEquals(1, cq.poll(new ExtendedCompletions(2)), "the completion is still there");
        }
    }

    @Test
    void pollingAClosedQueueIsRefused() {
        CompletionQueueEx cq = create(EnumSet.noneOf(CompletionField.class));
        cq.close();
        assertFalse(cq.isOpen());
        refused("ibv_start_poll", Errno.EBADF, () -> cq.poll(new ExtendedCompletions(2)), "closed");
        refused("ibv_destroy_cq", Errno.EBADF, cq::close, "already closed");
    }

    @Test
    void aSecondPollerIsRefusedWhileTheFirstIsInside() throws Exception {
        try (CompletionQueueEx cq = create(EnumSet.noneOf(CompletionField.class))) {
            CountDownLatch inside = new CountDownLatch(1);
            CountDownLatch leave = new CountDownLatch(1);
            CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
                cq.queue().enterPoll("ibv_start_poll"); // stands for a poll inside the provider
                try {
                    inside.countDown();
                    leave.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    cq.queue().leavePoll();
                }
            });
            assertTrue(inside.await(30, TimeUnit.SECONDS));
            VerbsException e = assertThrows(ResourceBusyException.class, () -> cq.poll(new ExtendedCompletions(2)));
            assertEquals("ibv_start_poll", e.verb(), e.getMessage());
            assertEquals(0, p.calls(StandInProvider.Op.POLL_CQ), "the provider was not entered");
            leave.countDown();
            first.get(30, TimeUnit.SECONDS);
            assertEquals(0, cq.poll(new ExtendedCompletions(2)), "the gate is free again");
        }
    }

    @Test
    void aQueueWithQueuePairsRefusesToCloseAndItsPollsCreditThem() {
        CompletionQueueEx cq = create(EnumSet.noneOf(CompletionField.class));
        QueuePair qp = ForeignHandles.queuePair(
                o.pd,
                p.qp(),
                QueuePairInit.of(QueuePairType.RC, cq.queue())
                        .maxSendWr(2)
                        .maxRecvWr(1)
                        .maxSendSge(1)
                        .maxRecvSge(1),
                QueuePairState.RTS);
        try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
            wrs.write(1, 0x1000, 0xabcd).sge(o.mr, 0, 8).signaled();
            wrs.write(2, 0x1000, 0xabcd).sge(o.mr, 8, 8).signaled();
            qp.postSend(wrs);
            refused("ibv_destroy_cq", Errno.EBUSY, cq::close, "queue pair");
            if (Verbs.CHECKED) {
                assertThrows(QueueFullException.class, () -> qp.postSend(wrs), "two outstanding of two");
            }
            ExtendedCompletions out = new ExtendedCompletions(4);
            assertEquals(2, cq.poll(out));
            assertEquals(1, out.wrId(0));
            assertEquals(CompletionOpcode.RDMA_WRITE, out.opcode(0));
            assertTrue(out.has(CompletionField.QP_NUM) == Verbs.CHECKED, "checked mode reads the QP number");
            qp.postSend(wrs); // credited by the extended poll: room for two more
            assertEquals(2, cq.poll(out, 2, Duration.ofSeconds(5)));
        } finally {
            qp.close();
        }
        cq.close();
    }
}
