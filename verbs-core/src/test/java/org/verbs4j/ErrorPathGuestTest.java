package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.GuestSupport.assertAll;
import static org.verbs4j.GuestSupport.awaitAny;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier: failures reported as completions on rxe0, each on a fresh loopback pair (an error
 * completion moves an RC queue pair to ERR): a wrong rkey, a write past the end of a region that
 * sits inside a larger allocation (the guard bytes around it stay untouched), and receives
 * flushed by a move to ERR, each with its own wr_id and libibverbs' status text; a SEND that
 * finds no receive (RNR retries exhausted by default, waited out with an unbounded RNR retry).
 */
@RdmaTest
class ErrorPathGuestTest {

    private static void awaitState(QueuePair qp, QueuePairState want) throws InterruptedException {
        long deadline = System.nanoTime() + GuestSupport.WAIT.toNanos();
        QueuePairState s = qp.query().state();
        while (s != want && System.nanoTime() < deadline) {
            Thread.sleep(20);
            s = qp.query().state();
        }
        assertEquals(want, s, "state of QP " + qp.qpNumber());
        assertEquals(want, qp.state());
    }

    @Test
    void aWrongRkeyIsARemoteAccessErrorAndTheQueuePairGoesToErr() throws InterruptedException {
        try (LoopbackPair pair = LoopbackPair.rc();
                Arena arena = Arena.ofShared();
                SendWorkRequests sends = new SendWorkRequests(2, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            MemorySegment a = arena.allocate(4096, 4096);
            MemorySegment b = arena.allocate(4096, 4096);
            pattern(a, 1);
            try (MemoryRegion aMr = pair.pd.register(arena, a, Access.LOCAL_WRITE);
                    MemoryRegion bMr = pair.pd.register(arena, b, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                int wrongRkey = bMr.rkey() ^ 0x00ff_ff00;
                pair.a.postSend(sends.write(77, bMr.address(), wrongRkey)
                        .sge(aMr, 0, 256)
                        .signaled());
                awaitAny(pair.cqA, wcs, 1);
                assertEquals(77, wcs.wrId(0));
                assertEquals(CompletionStatus.REM_ACCESS_ERR, wcs.status(0), wcs.statusText(0));
                assertEquals(10, wcs.status(0));
                assertEquals(LibIbverbs.wcStatusStr(10), wcs.statusText(0));
                assertEquals("remote access error", wcs.statusText(0));
                assertAll(b, (byte) 0, "nothing was written with a wrong rkey");
                awaitState(pair.a, QueuePairState.ERR);

                if (Verbs.CHECKED) {
                    // checked mode refuses posts to a queue pair that had an error completion (they would only be
                    // flushed)
                    InvalidRequestException e = assertThrows(
                            InvalidRequestException.class,
                            () -> pair.a.postSend(sends.clear()
                                    .write(78, bMr.address(), bMr.rkey())
                                    .sge(aMr, 0, 64)
                                    .signaled()));
                    assertTrue(e.getMessage().contains("queue pair is in error"), e.getMessage());
                } else {
                    // a queue pair in ERR flushes what is posted to it afterwards
                    pair.a.postSend(sends.clear()
                            .write(78, bMr.address(), bMr.rkey())
                            .sge(aMr, 0, 64)
                            .signaled());
                    awaitAny(pair.cqA, wcs, 1);
                    assertEquals(78, wcs.wrId(0));
                    assertEquals(CompletionStatus.WR_FLUSH_ERR, wcs.status(0), wcs.statusText(0));
                }
                assertAll(b, (byte) 0, "nothing was written by a flushed request");
            }
            pair.cqB.poll(wcs); // the responder side may or may not report anything; drain it
        }
    }

    @Test
    void aSendWithoutAReceiveFailsAfterBoundedRnrRetriesAndWaitsForOneWithRnrRetryForever()
            throws InterruptedException {
        try (Arena arena = Arena.ofShared();
                SendWorkRequests sends = new SendWorkRequests(2, 1);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(2, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            MemorySegment a = arena.allocate(4096, 4096);
            MemorySegment b = arena.allocate(4096, 4096);
            pattern(a, 5);
            // the defaults: 6 RNR retries of the receiver's timer, then RNR_RETRY_EXC_ERR (13)
            try (LoopbackPair pair = LoopbackPair.rc();
                    MemoryRegion aMr = pair.pd.register(arena, a, Access.LOCAL_WRITE)) {
                assertEquals(6, pair.a.query().rnrRetry());
                pair.a.postSend(sends.clear().send(81).sge(aMr, 0, 64).signaled());
                awaitAny(pair.cqA, wcs, 1);
                assertEquals(81, wcs.wrId(0));
                assertEquals(CompletionStatus.RNR_RETRY_EXC_ERR, wcs.status(0), wcs.statusText(0));
                assertEquals(13, wcs.status(0));
            }
            // withRnrRetryForever (7, perftest's setting): the send waits for the receive, then completes.
            // rxe keeps its ACK timer running meanwhile: the wait ends in RETRY_EXC_ERR after retryCount
            // ACK timeouts (6 x 67 ms by default), so this pair waits 6 x 1.07 s (timeout 18)
            try (LoopbackPair pair = LoopbackPair.open(
                            QueuePairType.RC,
                            java.util.EnumSet.noneOf(Access.class),
                            i -> i,
                            o -> o.withRnrRetryForever().withTimeout(18));
                    MemoryRegion aMr = pair.pd.register(arena, a, Access.LOCAL_WRITE);
                    MemoryRegion bMr = pair.pd.register(arena, b, Access.LOCAL_WRITE)) {
                assertEquals(7, pair.a.query().rnrRetry());
                assertEquals(6, pair.a.query().retryCount());
                pair.a.postSend(sends.clear().send(82).sge(aMr, 0, 64).signaled());
                // far longer than 6 retries of the 0.64 ms RNR timer (and than rxe's own timer slack)
                assertEquals(
                        0, pair.cqA.poll(wcs, 1, Duration.ofMillis(300)), "no completion while no receive is posted");
                pair.b.postRecv(recvs.clear().add(83).sge(bMr, 0, 64));
                awaitAny(pair.cqA, wcs, 1);
                assertEquals(82, wcs.wrId(0));
                assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                awaitAny(pair.cqB, wcs, 1);
                assertEquals(83, wcs.wrId(0));
                assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                assertEquals(64, wcs.byteLength(0));
                assertEquals(-1, MemorySegment.mismatch(a, 0, 64, b, 0, 64), "the payload arrived");
            }
        }
    }

    @Test
    void aWritePastTheEndOfARegionLeavesTheGuardBytesUntouched() throws InterruptedException {
        try (LoopbackPair pair = LoopbackPair.rc();
                Arena arena = Arena.ofShared();
                SendWorkRequests sends = new SendWorkRequests(2, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            MemorySegment src = arena.allocate(4096, 4096);
            pattern(src, 2);
            MemorySegment whole = arena.allocate(3 * 4096, 4096);
            whole.fill((byte) 0x5A);
            MemorySegment inner = whole.asSlice(4096, 4096); // the registered region; a page of guard on each side
            try (MemoryRegion aMr = pair.pd.register(arena, src, Access.LOCAL_WRITE);
                    MemoryRegion bMr = pair.pd.register(arena, inner, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                // 128 bytes starting 64 before the end: half of it would land in the guard page after the region
                pair.a.postSend(sends.write(88, bMr.address() + 4096 - 64, bMr.rkey())
                        .sge(aMr, 0, 128)
                        .signaled());
                awaitAny(pair.cqA, wcs, 1);
                assertEquals(88, wcs.wrId(0));
                assertEquals(CompletionStatus.REM_ACCESS_ERR, wcs.status(0), wcs.statusText(0));
                assertAll(whole.asSlice(0, 4096), (byte) 0x5A, "the guard page before the region");
                assertAll(whole.asSlice(8192, 4096), (byte) 0x5A, "the guard page after the region");
                long written = 0;
                for (long i = 0; i < 4096; i++) {
                    written += inner.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 0x5A ? 1 : 0;
                }
                System.out.println("out-of-bounds write: " + written + " bytes inside the region changed");
                awaitState(pair.a, QueuePairState.ERR);
            }
            pair.cqB.poll(wcs);
        }
    }

    @Test
    void movingToErrFlushesEveryPostedReceiveWithItsOwnWrId() {
        try (LoopbackPair pair = LoopbackPair.rc();
                Arena arena = Arena.ofShared();
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(8, 1);
                WorkCompletions wcs = new WorkCompletions(16)) {
            MemorySegment buf = arena.allocate(8 * 256, 4096);
            try (MemoryRegion mr = pair.pd.register(arena, buf, Access.LOCAL_WRITE)) {
                for (int i = 0; i < 8; i++) {
                    recvs.add(500 + i).sge(mr, 256L * i, 256);
                }
                pair.b.postRecv(recvs);
                assertEquals(0, pair.cqB.poll(wcs, 1, Duration.ofMillis(100)), "nothing completes before the flush");
                pair.b.toError();
                assertEquals(QueuePairState.ERR, pair.b.query().state());
                awaitAny(pair.cqB, wcs, 8);
                String flushText = LibIbverbs.wcStatusStr(CompletionStatus.WR_FLUSH_ERR);
                assertEquals("Work Request Flushed Error", flushText);
                for (int i = 0; i < 8; i++) {
                    assertEquals(500 + i, wcs.wrId(i), "flushed in posting order");
                    assertEquals(CompletionStatus.WR_FLUSH_ERR, wcs.status(i));
                    assertEquals(5, wcs.status(i));
                    assertEquals(flushText, wcs.statusText(i));
                    assertEquals(pair.b.qpNumber(), wcs.qpNumber(i));
                }
                assertEquals(0, pair.cqB.poll(wcs, 1, Duration.ofMillis(200)), "exactly one flush per receive");
            }
        }
    }
}
