package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.VerbsException;

/** Host tests of the pool's contract, over a fake protection domain (no RDMA device needed). */
class BufferPoolTest {
    private final FakeVerbs fake = new FakeVerbs();

    @AfterEach
    void closeFake() {
        fake.close();
    }

    @Test
    void leasesFromTheSmallestFittingClassWithConsistentKeysAndAddresses() {
        try (BufferPool pool = fake.pool()
                .sizeClass(4096, 8)
                .sizeClass(65536, 2)
                .access(Access.LOCAL_WRITE, Access.REMOTE_READ)
                .build()) {
            assertEquals(2, fake.registrations.get());
            assertEquals(2, pool.registrations());
            assertEquals(10, pool.capacity());
            PooledBuffer small = pool.lease(1);
            PooledBuffer exact = pool.lease(4096);
            PooledBuffer big = pool.lease(4097);
            assertEquals(4096, small.capacity());
            assertEquals(4096, exact.capacity());
            assertEquals(65536, big.capacity());
            assertNotEquals(small.address(), exact.address());
            for (PooledBuffer b : List.of(small, exact, big)) {
                MemoryRegion r = b.region();
                assertEquals(r.address() + b.offset(), b.address());
                assertEquals(b.address(), b.segment().address());
                assertEquals(b.capacity(), b.segment().byteSize());
                assertEquals(r.lkey(), b.lkey());
                assertEquals(r.rkey(), b.rkey());
                assertEquals(r.iova() + b.offset(), b.remoteAddress());
                assertTrue(r.contains(b.offset(), b.capacity()));
                assertTrue(b.isLeased());
                assertSame(pool, b.pool());
                assertEquals(Set.of(Access.LOCAL_WRITE, Access.REMOTE_READ), r.access());
            }
            assertNotEquals(small.lkey(), big.lkey(), "one region per class");
            small.segment().set(ValueLayout.JAVA_LONG, 0, 42L);
            assertEquals(42L, small.segment().get(ValueLayout.JAVA_LONG, 0));
            small.release();
            exact.close();
            pool.release(big);
            assertFalse(small.isLeased());
            assertThrows(InvalidRequestException.class, () -> pool.lease(65537));
            assertThrows(InvalidRequestException.class, () -> pool.lease(-1));
        }
        assertEquals(2, fake.registrations.get(), "no registration after start-up");
    }

    @Test
    void singleRegionRegistersOnceAndKeepsClassesApart() {
        try (BufferPool pool = fake.pool()
                .sizeClass(100, 3)
                .sizeClass(8192, 2)
                .singleRegion(true)
                .build()) {
            assertEquals(1, pool.registrations());
            assertEquals(1, pool.regions().size());
            Set<Long> ranges = new HashSet<>();
            List<PooledBuffer> all = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                all.add(pool.lease(100));
            }
            all.add(pool.lease(8192));
            all.add(pool.lease(8000));
            for (PooledBuffer b : all) {
                assertTrue(pool.regions().getFirst().contains(b.offset(), b.capacity()));
                assertTrue(ranges.add(b.address()));
            }
            // no two buffers overlap
            all.sort((x, y) -> Long.compare(x.address(), y.address()));
            for (int i = 1; i < all.size(); i++) {
                assertTrue(all.get(i - 1).address() + all.get(i - 1).capacity()
                        <= all.get(i).address());
            }
            assertEquals(0, all.get(3).offset() % 4096, "each class starts on a page");
            all.forEach(PooledBuffer::release);
        }
    }

    @Test
    void registrationsStayAtStartUpCountAfterManyLeases() {
        try (BufferPool pool =
                fake.pool().sizeClass(4096, 4).sizeClass(65536, 2).build()) {
            for (int i = 0; i < 100_000; i++) {
                PooledBuffer a = pool.lease(i % 4096);
                PooledBuffer b = pool.lease(5000 + i % 60000);
                b.release();
                a.release();
            }
            PoolMetrics m = pool.metrics();
            assertEquals(2, m.registrations());
            assertEquals(200_000, m.leases());
            assertEquals(0, m.bytesInUse());
            assertEquals(4096 + 65536, m.highWaterMarkBytes());
        }
        assertEquals(2, fake.registrations.get());
    }

    @Test
    void failFastExhaustionThrowsAndTryLeaseReturnsNull() {
        try (BufferPool pool = fake.pool().name("rx").sizeClass(1024, 2).build()) {
            PooledBuffer a = pool.lease(1024);
            PooledBuffer b = pool.lease(1024);
            PoolExhaustedException e = assertThrows(PoolExhaustedException.class, () -> pool.lease(10));
            assertTrue(e.getMessage().contains("all 2 buffers of the 1024-byte class are leased"), e.getMessage());
            assertEquals(1024, e.bufferSize());
            assertEquals(2, e.buffers());
            assertNull(pool.tryLease(1));
            PoolMetrics m = pool.metrics();
            assertEquals(2, m.exhaustions());
            assertEquals(2048, m.bytesInUse());
            a.release();
            PooledBuffer c = pool.tryLease(1);
            assertNotNull(c);
            c.release();
            b.release();
        }
    }

    @Test
    void waitingLeaseTimesOutWhenNothingIsReleased() {
        try (BufferPool pool = fake.pool()
                .sizeClass(1024, 1)
                .exhaustion(ExhaustionPolicy.await(Duration.ofMillis(150)))
                .build()) {
            PooledBuffer a = pool.lease(1);
            long t0 = System.nanoTime();
            PoolExhaustedException e = assertThrows(PoolExhaustedException.class, () -> pool.lease(1));
            long waited = System.nanoTime() - t0;
            assertTrue(waited >= TimeUnit.MILLISECONDS.toNanos(140), "waited only " + waited + " ns");
            assertTrue(e.getMessage().contains("none was released within"), e.getMessage());
            a.release();
        }
    }

    @Test
    void waitingLeaseReturnsWhenAnotherThreadReleases() throws Exception {
        try (BufferPool pool = fake.pool()
                .sizeClass(1024, 1)
                .exhaustion(ExhaustionPolicy.await(Duration.ofSeconds(20)))
                .build()) {
            PooledBuffer held = pool.lease(1);
            CountDownLatch started = new CountDownLatch(1);
            CompletableFuture<PooledBuffer> waiter = CompletableFuture.supplyAsync(() -> {
                started.countDown();
                return pool.lease(1);
            });
            started.await();
            Thread.sleep(100);
            assertFalse(waiter.isDone(), "the lease must wait");
            long t0 = System.nanoTime();
            held.release();
            PooledBuffer got = waiter.get(10, TimeUnit.SECONDS);
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5));
            assertEquals(held.id(), got.id(), "the one buffer went to the waiter");
            assertTrue(got.isLeased());
            got.release();
            // the per-call timeout overrides the policy
            PooledBuffer again = pool.lease(1);
            assertThrows(PoolExhaustedException.class, () -> pool.lease(1, Duration.ofMillis(20)));
            again.release();
        }
    }

    @Test
    void doubleReleaseIsRefusedWithAClearMessage() {
        try (BufferPool pool = fake.pool().sizeClass(512, 2).build()) {
            PooledBuffer b = pool.lease(1);
            b.release();
            VerbsException e = assertThrows(VerbsException.class, b::release);
            assertTrue(e.getMessage().contains("released twice"), e.getMessage());
            // the pool is intact: both buffers can be leased once each
            PooledBuffer x = pool.lease(1);
            PooledBuffer y = pool.lease(1);
            assertNotEquals(x.id(), y.id());
            assertNull(pool.tryLease(1));
            x.release();
            y.release();
            assertEquals(0, pool.metrics().bytesInUse());
        }
    }

    @Test
    void releaseOfAForeignBufferIsRefused() {
        try (BufferPool mine = fake.pool().name("mine").sizeClass(512, 2).build();
                BufferPool other = fake.pool().name("other").sizeClass(512, 2).build()) {
            PooledBuffer foreign = other.lease(1);
            InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> mine.release(foreign));
            assertTrue(e.getMessage().contains("belongs to pool 'other'"), e.getMessage());
            assertTrue(foreign.isLeased(), "the refused release changed nothing");
            foreign.release();
            assertEquals(0, mine.metrics().bytesInUse());
        }
    }

    @Test
    void closeRefusesWhileBuffersAreLeasedAndLeasesAfterCloseFail() {
        BufferPool pool = fake.pool().sizeClass(512, 2).build();
        PooledBuffer b = pool.lease(1);
        VerbsException e = assertThrows(VerbsException.class, pool::close);
        assertTrue(e.getMessage().contains("still has 1 leased buffer(s) (ids " + b.id() + ")"), e.getMessage());
        assertFalse(pool.isClosed());
        assertEquals(1, pool.outstandingLeases().size());
        // the PD refuses to close while the pool's regions are registered
        assertThrows(VerbsException.class, fake.pd::close);
        b.release();
        pool.close();
        assertTrue(pool.isClosed());
        assertTrue(pool.regions().stream().noneMatch(MemoryRegion::isOpen));
        assertThrows(VerbsException.class, () -> pool.lease(1));
        assertThrows(VerbsException.class, pool::close);
    }

    @Test
    void buffersCachedByOneThreadCanBeLeasedByAnother() throws Exception {
        try (BufferPool pool = fake.pool().sizeClass(256, 8).threadCacheSize(8).build()) {
            // this thread leases all and releases them into its own cache
            List<PooledBuffer> all = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                all.add(pool.lease(1));
            }
            all.forEach(PooledBuffer::release);
            // another thread still gets all eight (it steals from this thread's cache)
            List<PooledBuffer> other = CompletableFuture.supplyAsync(() -> {
                        List<PooledBuffer> got = new ArrayList<>();
                        for (int i = 0; i < 8; i++) {
                            got.add(pool.lease(1));
                        }
                        return got;
                    })
                    .get(10, TimeUnit.SECONDS);
            assertEquals(8, new HashSet<>(other).size());
            assertNull(pool.tryLease(1));
            other.forEach(PooledBuffer::release);
        }
    }

    @Test
    void cachesOfDeadThreadsAreDrained() throws Exception {
        try (BufferPool pool = fake.pool().sizeClass(256, 4).threadCacheSize(4).build()) {
            Thread t = Thread.ofPlatform().start(() -> {
                List<PooledBuffer> got = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    got.add(pool.lease(1));
                }
                got.forEach(PooledBuffer::release);
            });
            t.join();
            for (int round = 0; round < 3; round++) {
                List<PooledBuffer> got = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    got.add(pool.lease(1));
                }
                got.forEach(PooledBuffer::release);
            }
            assertEquals(12 + 4, pool.metrics().leases());
        }
    }

    @Test
    void virtualThreadsAndDisabledCachesWork() throws Exception {
        try (BufferPool pool = fake.pool().sizeClass(256, 4).threadCacheSize(0).build()) {
            for (int i = 0; i < 1000; i++) {
                pool.lease(1).release();
            }
            assertEquals(1000, pool.metrics().cacheMisses());
        }
        try (BufferPool pool = fake.pool().sizeClass(256, 4).build()) {
            Thread v = Thread.ofVirtual().start(() -> {
                for (int i = 0; i < 1000; i++) {
                    pool.lease(1).release();
                }
            });
            v.join();
            assertEquals(1000, pool.metrics().leases());
        }
    }

    @Test
    void workRequestHelpersCheckLengthAndLease() {
        try (BufferPool pool = fake.pool().sizeClass(4096, 2).build();
                SendWorkRequests wrs = new SendWorkRequests(4, 2)) {
            PooledBuffer b = pool.lease(4096);
            PoolWorkRequests.sge(wrs.clear().send(1), b, 4096);
            PoolWorkRequests.sge(wrs, b);
            assertEquals(1, wrs.size());
            VerbsException tooLong = assertThrows(
                    VerbsException.class, () -> PoolWorkRequests.sge(wrs.clear().send(2), b, 4097));
            assertTrue(tooLong.getMessage().contains("exceeds the pooled buffer"), tooLong.getMessage());
            b.release();
            VerbsException released = assertThrows(
                    VerbsException.class, () -> PoolWorkRequests.sge(wrs.clear().send(3), b, 10));
            assertTrue(released.getMessage().contains("is not leased"), released.getMessage());
        }
    }

    @Test
    void builderRejectsBadConfigurations() {
        assertThrows(VerbsException.class, () -> fake.pool().build());
        assertThrows(InvalidRequestException.class, () -> fake.pool().sizeClass(0, 1));
        assertThrows(
                InvalidRequestException.class,
                () -> fake.pool().sizeClass(64, 1).sizeClass(64, 2));
        assertThrows(
                InvalidRequestException.class,
                () -> fake.pool().sizeClass(64, 1).access(Access.REMOTE_WRITE).build());
        assertEquals(0, fake.registrations.get());
    }

    @Test
    void aFailingRegistrationUndoesTheEarlierOnes() {
        int[] calls = {0};
        List<MemoryRegion> made = new ArrayList<>();
        Registrar failSecond = (pd, mem, access) -> {
            if (++calls[0] == 2) {
                throw new VerbsException("ibv_reg_mr", 12, "test", null);
            }
            MemoryRegion r = fake.registrar.register(pd, mem, access);
            made.add(r);
            return r;
        };
        assertThrows(
                VerbsException.class,
                () -> BufferPool.builder(fake.pd)
                        .registrar(failSecond)
                        .sizeClass(64, 1)
                        .sizeClass(128, 1)
                        .build());
        assertEquals(1, made.size());
        assertFalse(made.getFirst().isOpen(), "the first region was deregistered again");
    }

    @Test
    void hugePageAllocatorWorksOrFallsBackToHostMemory() {
        try (BufferPool pool = fake.pool()
                .sizeClass(4096, 600)
                .regionAllocator(RegionAllocator.hugePages())
                .build()) {
            assertTrue(pool.regions().getFirst().length() >= 2L << 20);
            assertEquals(0, pool.regions().getFirst().address() % 4096);
            PooledBuffer b = pool.lease(4096);
            b.segment().fill((byte) 7);
            assertEquals(7, b.segment().get(ValueLayout.JAVA_BYTE, 4095));
            b.release();
            assertNotNull(pool.memoryDescription());
        }
    }

    @Test
    void autoAndCallerArenaAllocatorsWork() {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            try (BufferPool pool = fake.pool()
                    .sizeClass(64, 4)
                    .regionAllocator(RegionAllocator.of(arena))
                    .build()) {
                pool.lease(1).release();
            }
        }
        try (BufferPool pool = fake.pool()
                .sizeClass(64, 4)
                .regionAllocator(RegionAllocator.auto())
                .build()) {
            pool.lease(1).release();
        }
    }
}
