package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.LoopbackPair;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.VerbsException;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.RdmaTest;

/**
 * The pool on a real device (the Soft-RoCE guest): RDMA WRITE and READ between pooled buffers over
 * two connected RC queue pairs, data checked, and the registration count fixed at start-up after
 * thousands of leases; and the misuse cases that need a device: a lease token carried in a wr_id
 * (a second release of a completion's token refused), close refused while a receive is posted
 * into a pooled buffer, and a pool dropped with a receive posted into it (the cleaner
 * deregisters before freeing: the receive fails instead of writing into freed memory).
 */
@RdmaTest
class BufferPoolRdmaTest {

    private static BufferPool pool(LoopbackPair p, boolean single) {
        return BufferPool.builder(p.pd)
                .name("rdma")
                .sizeClass(4096, 32)
                .sizeClass(65536, 8)
                .singleRegion(single)
                .access(Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE)
                .build();
    }

    private static void fill(MemorySegment s, int len, int seed) {
        for (int i = 0; i < len; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed * 31 + i * 7));
        }
    }

    private static void check(MemorySegment s, int len, int seed) {
        for (int i = 0; i < len; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) (seed * 31 + i * 7)) {
                throw new AssertionError("byte " + i + " of " + len + " differs (seed " + seed + ")");
            }
        }
    }

    private static void complete(CompletionQueue cq, WorkCompletions wcs, long wrId) {
        int n = cq.poll(wcs, 1, Duration.ofSeconds(30));
        assertEquals(1, n, "no completion within 30 s");
        assertTrue(wcs.isSuccess(0), () -> "completion failed: " + wcs.statusText(0));
        assertEquals(wrId, wcs.wrId(0));
    }

    @Test
    void rdmaWriteAndReadBetweenPooledBuffers() {
        try (LoopbackPair p = LoopbackPair.rc();
                SendWorkRequests wrs = new SendWorkRequests(4, 2);
                WorkCompletions wcs = new WorkCompletions(8)) {
            try (BufferPool pool = pool(p, false)) {
                long startUp = pool.registrations();
                assertEquals(2, startUp);
                int[] sizes = {1, 100, 4096, 4097, 65536};
                for (int round = 0; round < sizes.length; round++) {
                    int len = sizes[round];
                    // WRITE: a's src -> b's dst
                    PooledBuffer src = pool.lease(len);
                    PooledBuffer dst = pool.lease(len);
                    fill(src.segment(), len, round);
                    dst.segment().fill((byte) 0);
                    PoolWorkRequests.sge(
                            PoolWorkRequests.write(wrs.clear(), src.id(), dst).signaled(), src, len);
                    p.a.postSend(wrs);
                    complete(p.cqA, wcs, src.id());
                    check(dst.segment(), len, round);
                    // READ: b reads a's buffer into a fresh one
                    PooledBuffer into = pool.lease(len);
                    into.segment().fill((byte) 0);
                    PoolWorkRequests.sge(
                            PoolWorkRequests.read(wrs.clear(), into.id(), src).signaled(), into, len);
                    p.b.postSend(wrs);
                    complete(p.cqB, wcs, into.id());
                    check(into.segment(), len, round);
                    into.release();
                    dst.release();
                    src.release();
                }
                assertEquals(startUp, pool.metrics().registrations());
            }
        }
    }

    @Test
    void registrationsNeverGrowAfterStartUp() {
        try (LoopbackPair p = LoopbackPair.rc();
                SendWorkRequests wrs = new SendWorkRequests(16, 1);
                WorkCompletions wcs = new WorkCompletions(16)) {
            try (BufferPool pool = pool(p, true)) {
                assertEquals(1, pool.registrations());
                int ops = 0;
                for (int round = 0; round < 250; round++) {
                    // 8 writes per round, each between two freshly leased buffers, all checked
                    List<PooledBuffer[]> pairs = new ArrayList<>();
                    wrs.clear();
                    for (int i = 0; i < 8; i++) {
                        int len = (round * 8 + i) % 3 == 0 ? 5000 : 64 + i;
                        PooledBuffer src = pool.lease(len);
                        PooledBuffer dst = pool.lease(len);
                        fill(src.segment(), len, round + i);
                        PoolWorkRequests.sge(PoolWorkRequests.write(wrs, i, dst), src, len);
                        if (i == 7) {
                            wrs.signaled();
                        }
                        pairs.add(new PooledBuffer[] {src, dst});
                        ops += 2;
                    }
                    p.a.postSend(wrs);
                    complete(p.cqA, wcs, 7);
                    for (int i = 0; i < 8; i++) {
                        PooledBuffer[] pr = pairs.get(i);
                        int len = (round * 8 + i) % 3 == 0 ? 5000 : 64 + i;
                        check(pr[1].segment(), len, round + i);
                        pr[0].release();
                        pr[1].release();
                    }
                }
                PoolMetrics m = pool.metrics();
                assertEquals(ops, m.leases());
                assertTrue(m.leases() >= 4000);
                assertEquals(1, m.registrations(), "registrations stay at the start-up count");
                assertEquals(0, m.bytesInUse());
            }
        }
    }

    @Test
    void aLeaseTokenInAWrIdIsReleasedOnceAndAStaleOneIsRefused() {
        try (LoopbackPair p = LoopbackPair.rc();
                SendWorkRequests wrs = new SendWorkRequests(4, 1);
                WorkCompletions wcs = new WorkCompletions(4);
                BufferPool pool = BufferPool.builder(p.pd)
                        .name("tokens")
                        .sizeClass(4096, 2)
                        .access(Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE)
                        .build()) {
            long src = pool.leaseToken(100);
            long dst = pool.leaseToken(100);
            fill(pool.buffer(src).segment(), 100, 5);
            PoolWorkRequests.sge(
                    PoolWorkRequests.write(wrs.clear(), src, pool.buffer(dst)).signaled(), pool.buffer(src), 100);
            p.a.postSend(wrs);
            complete(p.cqA, wcs, src);
            check(pool.buffer(dst).segment(), 100, 5);
            long fromCompletion = wcs.wrId(0);
            pool.release(fromCompletion);
            // the same completion handled twice: refused, whatever happened to the buffer since
            assertThrows(StaleLeaseException.class, () -> pool.release(fromCompletion));
            long again = pool.leaseToken(100);
            StaleLeaseException stale = assertThrows(StaleLeaseException.class, () -> pool.release(fromCompletion));
            assertTrue(stale.getMessage().contains("is stale"), stale.getMessage());
            assertTrue(pool.isCurrent(again));
            pool.release(again);
            pool.release(dst);
        }
    }

    @Test
    void closeIsRefusedWhileAReceiveIsPostedIntoAPooledBuffer() {
        try (LoopbackPair p = LoopbackPair.rc();
                SendWorkRequests wrs = new SendWorkRequests(4, 1);
                ReceiveWorkRequests rwrs = new ReceiveWorkRequests(4, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            BufferPool pool =
                    BufferPool.builder(p.pd).name("rx").sizeClass(4096, 4).build();
            long rx = pool.leaseToken(4096);
            PoolWorkRequests.sge(rwrs.clear().add(rx), pool.buffer(rx));
            p.b.postRecv(rwrs);
            VerbsException refused = assertThrows(VerbsException.class, pool::close);
            assertTrue(refused.getMessage().contains("still has 1 leased"), refused.getMessage());
            long tx = pool.leaseToken(64);
            fill(pool.buffer(tx).segment(), 64, 9);
            PoolWorkRequests.sge(wrs.clear().send(tx).signaled(), pool.buffer(tx), 64);
            p.a.postSend(wrs);
            complete(p.cqA, wcs, tx);
            complete(p.cqB, wcs, rx);
            check(pool.buffer(rx).segment(), 64, 9);
            pool.release(wcs.wrId(0));
            pool.release(tx);
            pool.close();
            assertTrue(pool.isClosed());
        }
    }

    @Test
    void aDroppedPoolIsDeregisteredBeforeFreeingSoAPostedReceiveFailsInsteadOfWriting() throws Exception {
        try (LoopbackPair p = LoopbackPair.rc();
                SendWorkRequests wrs = new SendWorkRequests(4, 1);
                ReceiveWorkRequests rwrs = new ReceiveWorkRequests(4, 1);
                WorkCompletions wcs = new WorkCompletions(4);
                BufferPool sender =
                        BufferPool.builder(p.pd).name("tx").sizeClass(4096, 1).build()) {
            List<String> events = new CopyOnWriteArrayList<>();
            long rx = postReceiveIntoADroppedPool(p, rwrs, events);
            for (int i = 0; i < 500 && !events.contains("freed allocation 0"); i++) {
                System.gc();
                Thread.sleep(10);
            }
            assertEquals(
                    List.of("views closed", "deregistered region 0", "freed allocation 0"),
                    events,
                    "the cleaner reclaimed the dropped pool, deregistering first");
            long tx = sender.leaseToken(64);
            fill(sender.buffer(tx).segment(), 64, 3);
            PoolWorkRequests.sge(wrs.clear().send(tx).signaled(), sender.buffer(tx), 64);
            p.a.postSend(wrs);
            int n = p.cqB.poll(wcs, 1, Duration.ofSeconds(30));
            assertEquals(1, n, "the posted receive completes");
            assertEquals(rx, wcs.wrId(0));
            assertFalse(wcs.isSuccess(0), "a receive into deregistered memory must fail, not write");
            p.cqA.poll(wcs, 1, Duration.ofSeconds(30)); // the send's completion (an error, or not): drained
            sender.release(tx);
        }
    }

    /** Builds a pool, posts a receive into one of its buffers and drops the pool (keeping only the token). */
    private static long postReceiveIntoADroppedPool(LoopbackPair p, ReceiveWorkRequests rwrs, List<String> events) {
        BufferPool pool = BufferPool.builder(p.pd)
                .name("dropped")
                .sizeClass(4096, 2)
                .releaseObserver(events::add)
                .build();
        long rx = pool.leaseToken(4096);
        pool.buffer(rx).segment().fill((byte) 0);
        PoolWorkRequests.sge(rwrs.clear().add(rx), pool.buffer(rx));
        p.b.postRecv(rwrs);
        return rx;
    }
}
