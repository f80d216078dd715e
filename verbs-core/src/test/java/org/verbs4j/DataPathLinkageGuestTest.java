package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.EnumSet;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier, rxe: libibverbs names the provider "rxe", whose post is a {@code write(2)}, so the
 * data path of its contexts is linked as ordinary downcalls; a loopback RDMA WRITE loop then runs
 * through them. The same loop through a borrowed wrapper of the same context linked critical is
 * timed beside it and printed (a comparison on the emulator, not a test of speed).
 */
@RdmaTest
class DataPathLinkageGuestTest {
    private static final int ROUNDS = 2000;

    @Test
    void rxeIsNamedAndPostsThroughOrdinaryDowncalls() {
        try (Context ctx = LoopbackPair.openTestDevice()) {
            assertEquals(Optional.of("rxe"), ctx.providerName(), "the guest's device is Soft-RoCE");
            assertFalse(ctx.criticalDataPath);
            assertFalse(InlineVerbs.criticalDataPath("rxe"));
            long standard = nanosPerWrite(ctx);
            Context critical = ForeignHandles.context(ctx.handle(), ctx.deviceName(), true);
            long criticalNanos;
            try {
                assertTrue(critical.criticalDataPath);
                criticalNanos = nanosPerWrite(critical);
            } finally {
                critical.close();
            }
            System.out.printf(
                    "[DataPathLinkageGuestTest] rxe, %d signaled 64 B RDMA WRITEs (post + poll): "
                            + "ordinary downcalls %d ns/op, critical %d ns/op (TCG; ratio %.2f)%n",
                    ROUNDS, standard, criticalNanos, (double) criticalNanos / standard);
        }
    }

    /** ROUNDS loopback 64-byte writes, each posted and its completion polled; ns per round (after a warm-up). */
    private static long nanosPerWrite(Context ctx) {
        try (LoopbackPairOn pair = new LoopbackPairOn(ctx);
                SendWorkRequests wrs = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(1)) {
            wrs.write(1, pair.bMr.address(), pair.bMr.rkey())
                    .sge(pair.aMr, 0, 64)
                    .signaled();
            for (int i = 0; i < ROUNDS / 4; i++) {
                pair.a.postSend(wrs);
                GuestSupport.awaitSuccess(pair.cqA, wcs, 1);
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < ROUNDS; i++) {
                pair.a.postSend(wrs);
                while (pair.cqA.poll(wcs) == 0) {
                    Thread.onSpinWait();
                }
                assertTrue(wcs.isSuccess(0));
            }
            return (System.nanoTime() - t0) / ROUNDS;
        }
    }

    /** An RC loopback pair on a given context (LoopbackPair opens its own). */
    private static final class LoopbackPairOn implements AutoCloseable {
        final ProtectionDomain pd;
        final CompletionQueue cqA;
        final CompletionQueue cqB;
        final QueuePair a;
        final QueuePair b;
        final MemoryRegion aMr;
        final MemoryRegion bMr;

        LoopbackPairOn(Context ctx) {
            pd = ctx.allocateProtectionDomain();
            cqA = ctx.createCompletionQueue(64);
            cqB = ctx.createCompletionQueue(64);
            a = pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.RC, cqA).maxSendWr(16).maxRecvWr(16));
            b = pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.RC, cqB).maxSendWr(16).maxRecvWr(16));
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
            GuestSupport.connect(a, b, gid, EnumSet.of(Access.REMOTE_WRITE));
            aMr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
            bMr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        }

        @Override
        public void close() {
            GuestSupport.closeAll(a, b, aMr, bMr, cqA, cqB, pd);
        }
    }
}
