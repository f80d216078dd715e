package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.UserMessages;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.Errno;

/**
 * The catalogue of pool misuse, on the host (fake protection domain, no device): each case does
 * one wrong thing and asserts its documented outcome (docs/buffer-pool.md, "Misuse and what
 * happens"), and that the pool is intact afterwards where it stays open.
 */
class BufferPoolMisuseTest {
    private final FakeVerbs fake = new FakeVerbs();

    @AfterEach
    void closeFake() {
        fake.close();
    }

    /** One size class of {@code n} buffers of 256 bytes, no thread caches (slots come back LIFO). */
    private BufferPool small(int n) {
        return fake.pool().name("p").sizeClass(256, n).threadCacheSize(0).build();
    }

    /** {@link #small} with the unsafe shared flyweights (one object per slot, nothing allocated). */
    private BufferPool shared(int n) {
        return fake.pool()
                .name("shared")
                .sizeClass(256, n)
                .threadCacheSize(0)
                .unsafeSharedBuffers(true)
                .build();
    }

    /** The refusal {@code call} gets: of {@code type}, keeping every message rule ({@link UserMessages#check}). */
    static <T extends VerbsException> T refused(Class<T> type, Executable call) {
        return refused(type, call, "");
    }

    /** {@link #refused(Class, Executable)} and {@code message} holds {@code message}. */
    static <T extends VerbsException> T refused(Class<T> type, Executable call, String message) {
        T e = assertThrows(type, call, message);
        UserMessages.check(e);
        return e;
    }

    /** {@link #refused(Class, Executable)} by {@code verb} with {@code errno}, its message naming each of {@code says}. */
    static <T extends VerbsException> T refused(
            Class<T> type, String verb, int errno, Executable call, String... says) {
        T e = refused(type, call);
        assertEquals(verb, e.verb(), e.getMessage());
        assertEquals(errno, e.errno(), e.getMessage());
        for (String s : says) {
            assertTrue(e.getMessage().contains(s), "'" + s + "' not in: " + e.getMessage());
        }
        return e;
    }

    private static void assertIntact(BufferPool pool, int buffers) {
        List<Long> all = new ArrayList<>();
        for (int i = 0; i < buffers; i++) {
            all.add(pool.leaseToken(1));
        }
        assertEquals(BufferPool.NO_TOKEN, pool.tryLeaseToken(1), "no buffer handed out twice");
        all.forEach(pool::release);
        assertEquals(0, pool.metrics().bytesInUse());
    }

    // ---- double and stale release ----------------------------------------------------------

    @Test
    void doubleReleaseThroughTheSharedBufferIsRefused() {
        try (BufferPool pool = shared(2)) {
            PooledBuffer b = pool.lease(1);
            b.release();
            StaleLeaseException e = refused(StaleLeaseException.class, b::release);
            assertTrue(e.getMessage().contains("released twice"), e.getMessage());
            assertEquals(b.id(), e.bufferId());
            assertIntact(pool, 2);
        }
    }

    @Test
    void doubleReleaseOfATokenIsRefused() {
        try (BufferPool pool = small(2)) {
            long t = pool.leaseToken(1);
            pool.release(t);
            StaleLeaseException e = refused(StaleLeaseException.class, () -> pool.release(t));
            assertTrue(e.getMessage().contains("released twice"), e.getMessage());
            assertIntact(pool, 2);
        }
    }

    @Test
    void staleTokenReleaseAfterTheBufferWasLeasedAgainIsRefusedAndTheNewLeaseSurvives() {
        try (BufferPool pool = small(1)) {
            long first = pool.leaseToken(1);
            pool.release(first);
            long second = pool.leaseToken(1);
            assertEquals(first & 1, second & 1, "same slot (one slot: 1 slot bit)");
            assertNotEquals(first, second, "another lease");
            StaleLeaseException e = refused(StaleLeaseException.class, () -> pool.release(first));
            assertTrue(e.getMessage().contains("is stale"), e.getMessage());
            assertTrue(e.getMessage().contains("leased 1 more time(s)"), e.getMessage());
            assertTrue(e.getMessage().contains("leased by someone else"), e.getMessage());
            assertTrue(pool.isCurrent(second), "the new lease is untouched");
            assertEquals(BufferPool.NO_TOKEN, pool.tryLeaseToken(1), "and still leased");
            pool.release(second);
        }
    }

    @Test
    void staleTokenMessageCountsTheLeasesSinceAndSaysTheBufferIsFree() {
        try (BufferPool pool = small(1)) {
            long old = pool.leaseToken(1);
            pool.release(old);
            for (int i = 0; i < 3; i++) {
                pool.release(pool.leaseToken(1));
            }
            StaleLeaseException e = refused(StaleLeaseException.class, () -> pool.release(old));
            assertTrue(e.getMessage().contains("leased 3 more time(s)"), e.getMessage());
            assertTrue(e.getMessage().contains("free now"), e.getMessage());
        }
    }

    @Test
    void staleLeaseObjectReleaseIsRefusedAfterItsSlotWasLeasedAgain() {
        try (BufferPool pool = small(1)) {
            PooledBuffer a = pool.lease(1);
            a.release();
            PooledBuffer b = pool.lease(1);
            assertEquals(a.id(), b.id());
            assertNotEquals(a, b, "an object per lease");
            StaleLeaseException e = refused(StaleLeaseException.class, a::release);
            assertTrue(e.getMessage().contains("is stale"), e.getMessage());
            assertFalse(a.isLeased());
            assertTrue(b.isLeased());
            b.release();
            assertIntact(pool, 1);
        }
    }

    @Test
    void staleLeaseObjectSegmentAndTokenAreRefused() {
        try (BufferPool pool = small(1)) {
            PooledBuffer a = pool.lease(1);
            a.release();
            PooledBuffer b = pool.lease(1);
            refused(StaleLeaseException.class, a::segment);
            refused(StaleLeaseException.class, a::token);
            b.segment().set(ValueLayout.JAVA_INT, 0, 7); // the current lease works
            assertEquals(b.token(), pool.buffer(b.token()).token());
            b.release();
        }
    }

    @Test
    void sharedFlyweightCannotTellItsHoldersApartButTheNewHoldersTokenShowsIt() {
        // the documented limit of the unsafe shared flyweights (opted into): after the slot was
        // leased again, a stale release through the shared object releases the new lease; the
        // new holder's token then tells it so instead of acting on a buffer someone else leases
        try (BufferPool pool = shared(1)) {
            PooledBuffer stale = pool.lease(1);
            stale.release();
            PooledBuffer now = pool.lease(1);
            assertSame(stale, now, "one shared object per slot");
            long token = now.token();
            stale.release(); // not detectable through the shared object
            StaleLeaseException e = refused(StaleLeaseException.class, () -> pool.release(token));
            assertTrue(e.getMessage().contains("released twice"), e.getMessage());
        }
    }

    @Test
    void segmentOfAReleasedSharedBufferIsRefused() {
        try (BufferPool pool = shared(1)) {
            PooledBuffer b = pool.lease(1);
            b.release();
            StaleLeaseException e = refused(StaleLeaseException.class, b::segment);
            assertTrue(e.getMessage().contains("segment()"), e.getMessage());
        }
    }

    @Test
    void workRequestHelpersRefuseAStaleLeaseObject() {
        try (BufferPool pool = small(1);
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            PooledBuffer a = pool.lease(1);
            a.release();
            PooledBuffer b = pool.lease(1);
            VerbsException e = assertThrows(
                    VerbsException.class, () -> PoolWorkRequests.sge(wrs.clear().send(1), a, 8));
            assertTrue(e.getMessage().contains("is stale"), e.getMessage());
            PoolWorkRequests.sge(wrs.clear().send(2), b, 8);
            b.release();
        }
    }

    @Test
    void workRequestHelpersRefuseAStaleTokenAndTakeACurrentOne() {
        try (BufferPool pool = small(1);
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            long old = pool.leaseToken(1);
            pool.release(old);
            long now = pool.leaseToken(1);
            VerbsException e = assertThrows(
                    VerbsException.class, () -> PoolWorkRequests.sge(wrs.clear().send(old), pool, old, 8));
            assertTrue(e.getMessage().contains("is stale"), e.getMessage());
            PoolWorkRequests.sge(wrs.clear().send(now), pool, now, 8);
            assertEquals(1, wrs.size());
            assertThrows(
                    VerbsException.class, () -> PoolWorkRequests.sge(wrs.clear().send(now), pool, now, 257));
            pool.release(now);
        }
    }

    @Test
    void bufferOfAStaleTokenIsRefusedAndOfACurrentOneIsItsBuffer() {
        try (BufferPool pool = small(2)) {
            long t = pool.leaseToken(100);
            PooledBuffer b = pool.buffer(t);
            assertEquals(256, b.capacity());
            assertEquals(t, b.token());
            pool.release(t);
            refused(StaleLeaseException.class, () -> pool.buffer(t));
        }
    }

    @Test
    void isCurrentFollowsTheLease() {
        try (BufferPool pool = small(1)) {
            long t = pool.leaseToken(1);
            assertTrue(pool.isCurrent(t));
            pool.release(t);
            assertFalse(pool.isCurrent(t));
            long u = pool.leaseToken(1);
            assertFalse(pool.isCurrent(t));
            assertTrue(pool.isCurrent(u));
            assertFalse(pool.isCurrent(BufferPool.NO_TOKEN));
            pool.release(u);
        }
    }

    @Test
    void tokenOfTheSharedBufferIsTheCurrentLeaseAndRefusedOnceReleased() {
        try (BufferPool pool = shared(1)) {
            PooledBuffer b = pool.lease(1);
            long t = b.token();
            assertTrue(pool.isCurrent(t));
            b.release();
            refused(StaleLeaseException.class, b::token);
        }
    }

    // ---- foreign and invalid tokens --------------------------------------------------------

    @Test
    void foreignTokenIsRefusedAndChangesNothing() {
        try (BufferPool mine = small(2);
                BufferPool other = small(2)) {
            long theirs = other.leaseToken(1);
            InvalidRequestException e = refused(InvalidRequestException.class, () -> mine.release(theirs));
            assertTrue(e.getMessage().contains("was not issued by pool"), e.getMessage());
            assertFalse(mine.isCurrent(theirs));
            assertTrue(other.isCurrent(theirs));
            other.release(theirs);
            assertIntact(mine, 2);
        }
    }

    @Test
    void foreignLeaseObjectIsRefused() {
        try (BufferPool mine = small(1);
                BufferPool other = small(1)) {
            PooledBuffer theirs = other.lease(1);
            InvalidRequestException e = refused(InvalidRequestException.class, () -> mine.release(theirs));
            assertTrue(e.getMessage().contains("belongs to pool"), e.getMessage());
            theirs.release();
        }
    }

    @Test
    void tokenNamingNoSlotOfThePoolIsRefused() {
        try (BufferPool pool = small(3)) {
            refused(InvalidRequestException.class, () -> pool.release(3L)); // slot 3 of 3
            refused(InvalidRequestException.class, () -> pool.buffer(0x7FL));
            refused(InvalidRequestException.class, () -> pool.release(0L)); // slot 0, generation 0: never issued
        }
    }

    @Test
    void noTokenIsRefusedWithItsOwnMessage() {
        try (BufferPool pool = small(1)) {
            InvalidRequestException e = refused(InvalidRequestException.class, () -> pool.release(BufferPool.NO_TOKEN));
            assertTrue(e.getMessage().contains("NO_TOKEN"), e.getMessage());
        }
    }

    // ---- close ------------------------------------------------------------------------------

    @Test
    void leaseAfterCloseFailsInEveryForm() {
        BufferPool pool = small(2);
        pool.close();
        for (Runnable r : List.<Runnable>of(
                () -> pool.lease(1),
                () -> pool.tryLease(1),
                () -> pool.leaseToken(1),
                () -> pool.tryLeaseToken(1),
                () -> pool.lease(1, Duration.ofMillis(5)))) {
            VerbsException e = refused(VerbsException.class, r::run);
            assertTrue(e.getMessage().contains("is closed"), e.getMessage());
            assertFalse(e instanceof StaleLeaseException);
        }
    }

    @Test
    void releaseAfterCloseIsRefusedAndSaysThePoolIsClosed() {
        BufferPool pool = small(2);
        PooledBuffer b = pool.lease(1);
        long t = pool.leaseToken(1);
        b.release();
        pool.release(t);
        pool.close();
        VerbsException viaObject = refused(VerbsException.class, b::release);
        assertTrue(viaObject.getMessage().contains("is closed"), viaObject.getMessage());
        VerbsException viaToken = refused(VerbsException.class, () -> pool.release(t));
        assertTrue(viaToken.getMessage().contains("is closed"), viaToken.getMessage());
    }

    @Test
    void segmentAfterCloseThrowsInsteadOfReadingFreedMemory() {
        BufferPool pool = small(2);
        PooledBuffer b = pool.lease(1);
        MemorySegment kept = b.segment();
        kept.set(ValueLayout.JAVA_LONG, 0, 42L);
        b.release();
        pool.close();
        assertFalse(kept.scope().isAlive());
        assertThrows(IllegalStateException.class, () -> kept.get(ValueLayout.JAVA_LONG, 0));
        VerbsException e = refused(VerbsException.class, b::segment);
        assertTrue(e.getMessage().contains("is closed"), e.getMessage());
    }

    @Test
    void closeWithLeasesIsRefusedForObjectsAndTokensAndThePoolStaysUsable() {
        BufferPool pool = small(3);
        PooledBuffer b = pool.lease(1);
        long t = pool.leaseToken(1);
        VerbsException e = refused(VerbsException.class, pool::close);
        assertTrue(e.getMessage().contains("still has 2 leased buffer(s)"), e.getMessage());
        assertFalse(pool.isClosed());
        b.segment().set(ValueLayout.JAVA_INT, 0, 1); // the memory is still there
        pool.release(pool.leaseToken(1));
        b.release();
        pool.release(t);
        pool.close();
        assertTrue(pool.isClosed());
    }

    @Test
    void secondCloseThrows() {
        BufferPool pool = small(1);
        pool.close();
        VerbsException e = refused(VerbsException.class, pool::close);
        assertTrue(e.getMessage().contains("is closed"), e.getMessage());
    }

    // ---- release order: views, deregistration, then memory, for every allocator ------------------

    /**
     * Wraps an allocator so that each allocation's free checks, at that moment, that the region
     * registered over it is already deregistered; regions are recorded by address.
     */
    private static final class OrderCheck {
        final Map<Long, MemoryRegion> regions = new ConcurrentHashMap<>();
        final List<String> violations = new CopyOnWriteArrayList<>();
        final AtomicInteger frees = new AtomicInteger();

        Registrar registrar(Registrar inner) {
            return (pd, mem, access) -> {
                MemoryRegion r = inner.register(pd, mem, access);
                regions.put(mem.address(), r);
                return r;
            };
        }

        RegionAllocator allocator(RegionAllocator inner) {
            return new RegionAllocator() {
                @Override
                public Allocation allocate(long byteSize, long alignment) {
                    Allocation a = inner.allocate(byteSize, alignment);
                    long address = a.segment().address();
                    return new Allocation(a.segment(), a.description(), () -> {
                        MemoryRegion r = regions.get(address);
                        if (r == null || r.isOpen()) {
                            violations.add("memory at 0x" + Long.toHexString(address) + " freed while registered");
                        }
                        frees.incrementAndGet();
                        a.close();
                    });
                }

                @Override
                public String description() {
                    return "order-checked " + inner.description();
                }
            };
        }
    }

    private void closeDeregistersBeforeFreeing(RegionAllocator allocator) {
        OrderCheck check = new OrderCheck();
        List<String> events = new CopyOnWriteArrayList<>();
        BufferPool pool = fake.pool()
                .sizeClass(64, 4)
                .sizeClass(8192, 2)
                .registrar(check.registrar(fake.registrar))
                .regionAllocator(check.allocator(allocator))
                .releaseObserver(events::add)
                .build();
        PooledBuffer b = pool.lease(1);
        b.segment().fill((byte) 1);
        b.release();
        pool.close();
        assertEquals(
                List.of(
                        "views closed",
                        "deregistered region 1",
                        "deregistered region 0",
                        "freed allocation 1",
                        "freed allocation 0"),
                events);
        assertEquals(2, check.frees.get());
        assertTrue(check.violations.isEmpty(), check.violations::toString);
        assertTrue(pool.regions().stream().noneMatch(MemoryRegion::isOpen));
    }

    @Test
    void closeDeregistersBeforeFreeingHostMemory() {
        closeDeregistersBeforeFreeing(RegionAllocator.host());
    }

    @Test
    void closeDeregistersBeforeFreeingAutoMemory() {
        closeDeregistersBeforeFreeing(RegionAllocator.auto());
    }

    @Test
    void closeDeregistersBeforeFreeingHugePageMemory() {
        closeDeregistersBeforeFreeing(RegionAllocator.hugePages());
    }

    @Test
    void closeDeregistersBeforeFreeingMemoryBoundedBySharedAndConfinedArenas() {
        try (Arena shared = Arena.ofShared()) {
            closeDeregistersBeforeFreeing(RegionAllocator.of(shared));
        }
        try (Arena confined = Arena.ofConfined()) {
            closeDeregistersBeforeFreeing(RegionAllocator.of(confined));
        }
    }

    @Test
    void confinedCallerArenaClosedFirstDeregistersThenFreesAndEndsThePool() {
        callerArenaClosedFirst(Arena.ofConfined());
    }

    @Test
    void sharedCallerArenaClosedFirstDeregistersThenFreesAndEndsThePool() {
        callerArenaClosedFirst(Arena.ofShared());
    }

    private void callerArenaClosedFirst(Arena arena) {
        // the pool's allocation is the arena's first one: a confined arena runs its first-registered
        // close action first, so memory of the arena itself would be freed before any later action
        List<String> events = new CopyOnWriteArrayList<>();
        BufferPool pool = fake.pool()
                .name("bounded")
                .sizeClass(64, 2)
                .sizeClass(4096, 1)
                .regionAllocator(RegionAllocator.of(arena))
                .releaseObserver(events::add)
                .build();
        MemorySegment other = arena.allocate(64); // the arena's own memory, freed by its close
        other.fill((byte) 3);
        PooledBuffer b = pool.lease(1);
        MemorySegment kept = b.segment();
        arena.close();
        assertEquals(
                List.of(
                        "views closed",
                        "deregistered region 1",
                        "deregistered region 0",
                        "freed allocation 1",
                        "freed allocation 0"),
                events);
        assertTrue(pool.isClosed());
        assertTrue(pool.regions().stream().noneMatch(MemoryRegion::isOpen));
        assertThrows(IllegalStateException.class, () -> kept.get(ValueLayout.JAVA_BYTE, 0));
        VerbsException seg = refused(VerbsException.class, b::segment);
        assertTrue(seg.getMessage().contains("arena"), seg.getMessage());
        VerbsException lease = refused(VerbsException.class, () -> pool.lease(1));
        assertTrue(lease.getMessage().contains("RegionAllocator.of(arena)"), lease.getMessage());
        refused(VerbsException.class, b::release, "the lease ended with the arena");
        refused(VerbsException.class, pool::close);
    }

    @Test
    void anAlreadyClosedCallerArenaIsRefusedAtBuild() {
        Arena arena = Arena.ofConfined();
        arena.close();
        VerbsException e = assertThrows(
                VerbsException.class,
                () -> fake.pool()
                        .sizeClass(64, 1)
                        .regionAllocator(RegionAllocator.of(arena))
                        .build());
        assertTrue(e.getMessage().contains("already closed"), e.getMessage());
        assertEquals(0, fake.registrations.get());
    }

    @Test
    void aPoolRegionClosedDirectlyIsRefusedForPostsAndTheCloseStillFreesItsMemory() {
        List<String> events = new CopyOnWriteArrayList<>();
        BufferPool pool =
                fake.pool().sizeClass(64, 2).releaseObserver(events::add).build();
        pool.regions().getFirst().close(); // misuse: the pool's regions are the pool's
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            PooledBuffer b = pool.lease(1);
            assertThrows(
                    VerbsException.class, () -> PoolWorkRequests.sge(wrs.clear().send(1), b, 8));
            b.release();
        }
        pool.close();
        assertEquals(List.of("views closed", "region 0 was already deregistered", "freed allocation 0"), events);
    }

    // ---- a dropped pool ------------------------------------------------------------------------

    private int buildAndDrop(List<String> events, List<MemoryRegion> regions, boolean leaveATokenLeased) {
        Registrar recording = (pd, mem, access) -> {
            MemoryRegion r = fake.registrar.register(pd, mem, access);
            regions.add(r);
            return r;
        };
        BufferPool pool = fake.pool()
                .name("dropped")
                .sizeClass(64, 2)
                .sizeClass(1024, 2)
                .registrar(recording)
                .releaseObserver(events::add)
                .build();
        PooledBuffer b = pool.lease(1);
        b.segment().fill((byte) 9);
        b.release();
        if (leaveATokenLeased) {
            pool.leaseToken(1000); // a token does not keep the pool reachable
        }
        return pool.capacity();
    }

    private static void awaitCleaner(List<String> events) throws InterruptedException {
        for (int i = 0; i < 500 && !events.contains("freed allocation 0"); i++) {
            System.gc();
            Thread.sleep(10);
        }
    }

    @Test
    void aDroppedPoolIsReclaimedDeregisteringBeforeFreeing() throws Exception {
        List<String> events = new CopyOnWriteArrayList<>();
        List<MemoryRegion> regions = new CopyOnWriteArrayList<>();
        assertEquals(4, buildAndDrop(events, regions, false));
        awaitCleaner(events);
        assertEquals(
                List.of(
                        "views closed",
                        "deregistered region 1",
                        "deregistered region 0",
                        "freed allocation 1",
                        "freed allocation 0"),
                events,
                "the cleaner reclaimed the pool, in order");
        assertEquals(2, regions.size());
        assertTrue(regions.stream().noneMatch(MemoryRegion::isOpen));
    }

    @Test
    void aDroppedPoolWithATokenStillLeasedIsReclaimedDeregisteringFirst() throws Exception {
        List<String> events = new CopyOnWriteArrayList<>();
        List<MemoryRegion> regions = new CopyOnWriteArrayList<>();
        buildAndDrop(events, regions, true);
        awaitCleaner(events);
        assertEquals("views closed", events.getFirst());
        assertTrue(events.indexOf("deregistered region 0") < events.indexOf("freed allocation 0"), events::toString);
        assertTrue(events.indexOf("deregistered region 1") < events.indexOf("freed allocation 1"), events::toString);
        assertTrue(regions.stream().noneMatch(MemoryRegion::isOpen));
    }

    @Test
    void aLeasedBufferKeepsItsPoolAlive() throws Exception {
        List<String> events = new CopyOnWriteArrayList<>();
        PooledBuffer held = leaseFromADroppedPool(events);
        for (int i = 0; i < 20; i++) {
            System.gc();
            Thread.sleep(5);
        }
        assertTrue(events.isEmpty(), "reclaimed while a buffer is leased: " + events);
        held.segment().set(ValueLayout.JAVA_LONG, 0, 1L);
        assertFalse(held.pool().isClosed());
        held.release();
        held.pool().close();
    }

    private PooledBuffer leaseFromADroppedPool(List<String> events) {
        return fake.pool().sizeClass(64, 1).releaseObserver(events::add).build().lease(1);
    }

    // ---- dropped leases --------------------------------------------------------------------------

    @Test
    void aDroppedTrackedLeaseIsReportedAndQuarantinedAndItsTokenThenRefused() throws Exception {
        try (BufferPool pool = fake.pool().sizeClass(128, 2).leakTracking(true).build()) {
            long[] token = new long[1];
            dropATrackedLease(pool, token);
            int found = 0;
            for (int i = 0; i < 300 && found == 0; i++) {
                System.gc();
                Thread.sleep(10);
                found = pool.detectLeaks();
            }
            assertEquals(1, found);
            assertEquals(1, pool.metrics().leaked());
            StaleLeaseException e = refused(StaleLeaseException.class, () -> pool.buffer(token[0]));
            assertTrue(e.getMessage().contains("quarantined"), e.getMessage());
            PooledBuffer last = pool.lease(1);
            assertNull(pool.tryLease(1), "the leaked slot is never leased again");
            last.release();
        }
    }

    private static void dropATrackedLease(BufferPool pool, long[] token) {
        PooledBuffer b = pool.lease(1);
        // the token of the lease, read without untracking it (the object stays the lease's owner)
        token[0] = pool.currentToken(b);
    }

    @Test
    void aLeaseHandedToItsTokenIsNotReportedAsALeakWhenTheObjectIsDropped() throws Exception {
        try (BufferPool pool = fake.pool().sizeClass(128, 2).leakTracking(true).build()) {
            long t = pool.lease(1).token(); // the object is dropped at once; the token owns the lease
            for (int i = 0; i < 10; i++) {
                System.gc();
                Thread.sleep(5);
                assertEquals(0, pool.detectLeaks());
            }
            assertTrue(pool.isCurrent(t));
            pool.release(t);
        }
    }

    // ---- exhaustion ------------------------------------------------------------------------------

    @Test
    void failFastExhaustionThrowsAtOnceForObjectsAndTokens() {
        try (BufferPool pool = small(1)) {
            long t = pool.leaseToken(1);
            long t0 = System.nanoTime();
            assertThrows(PoolExhaustedException.class, () -> pool.lease(1));
            assertThrows(PoolExhaustedException.class, () -> pool.leaseToken(1));
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(1));
            assertNull(pool.tryLease(1));
            assertEquals(BufferPool.NO_TOKEN, pool.tryLeaseToken(1));
            pool.release(t);
        }
    }

    @Test
    void awaitTimeoutReturnsByItsDeadlineWithManyWaiters() throws Exception {
        int waiters = 16;
        long timeoutMs = 300;
        try (BufferPool pool = fake.pool()
                .sizeClass(64, 1)
                .exhaustion(ExhaustionPolicy.await(Duration.ofMillis(timeoutMs)))
                .build()) {
            long held = pool.leaseToken(1);
            CyclicBarrier start = new CyclicBarrier(waiters);
            ConcurrentLinkedQueue<Long> waitedMs = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<Throwable> wrong = new ConcurrentLinkedQueue<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < waiters; i++) {
                boolean token = (i & 1) == 0;
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        long t0 = System.nanoTime();
                        try {
                            if (token) {
                                pool.leaseToken(1);
                            } else {
                                pool.lease(1);
                            }
                            wrong.add(new AssertionError("a lease succeeded although nothing was released"));
                        } catch (PoolExhaustedException expected) {
                            waitedMs.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
                        }
                    } catch (Throwable e) {
                        wrong.add(e);
                    }
                }));
            }
            for (Thread t : threads) {
                t.join(10_000);
                assertFalse(t.isAlive(), "a waiter is still waiting long after its deadline");
            }
            assertTrue(wrong.isEmpty(), wrong::toString);
            assertEquals(waiters, waitedMs.size());
            for (long ms : waitedMs) {
                assertTrue(ms >= timeoutMs - 5, "returned before its deadline: " + ms + " ms");
                assertTrue(ms < timeoutMs + 2_000, "returned long after its deadline: " + ms + " ms");
            }
            pool.release(held);
        }
    }

    @Test
    void manyWaitersAreEachServedAsBuffersComeBack() throws Exception {
        int waiters = 8;
        try (BufferPool pool = fake.pool()
                .sizeClass(64, 2)
                .exhaustion(ExhaustionPolicy.await(Duration.ofSeconds(30)))
                .build()) {
            long a = pool.leaseToken(1);
            long b = pool.leaseToken(1);
            AtomicInteger served = new AtomicInteger();
            ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < waiters; i++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        long t = pool.leaseToken(1);
                        served.incrementAndGet();
                        Thread.sleep(2);
                        pool.release(t);
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                }));
            }
            Thread.sleep(50);
            pool.release(a);
            pool.release(b);
            for (Thread t : threads) {
                t.join(20_000);
            }
            assertTrue(errors.isEmpty(), errors::toString);
            assertEquals(waiters, served.get());
            assertIntact(pool, 2);
        }
    }

    @Test
    void anInterruptedWaiterGivesUpAndKeepsItsInterrupt() throws Exception {
        try (BufferPool pool = fake.pool()
                .sizeClass(64, 1)
                .exhaustion(ExhaustionPolicy.await(Duration.ofSeconds(30)))
                .build()) {
            long held = pool.leaseToken(1);
            CountDownLatch done = new CountDownLatch(1);
            AtomicBoolean flagKept = new AtomicBoolean();
            AtomicReferenceHolder<Throwable> thrown = new AtomicReferenceHolder<>();
            Thread w = Thread.ofPlatform().start(() -> {
                try {
                    pool.lease(1);
                } catch (Throwable e) {
                    thrown.value = e;
                    flagKept.set(Thread.currentThread().isInterrupted());
                }
                done.countDown();
            });
            Thread.sleep(50);
            w.interrupt();
            assertTrue(done.await(10, TimeUnit.SECONDS));
            assertTrue(thrown.value instanceof PoolExhaustedException, String.valueOf(thrown.value));
            assertTrue(thrown.value.getMessage().contains("interrupted"), thrown.value.getMessage());
            assertTrue(flagKept.get());
            pool.release(held);
        }
    }

    private static final class AtomicReferenceHolder<T> {
        volatile T value;
    }

    // ---- sizes -----------------------------------------------------------------------------------

    @Test
    void zeroSizeLeasesFromTheSmallestClass() {
        try (BufferPool pool = fake.pool().sizeClass(64, 1).sizeClass(4096, 1).build()) {
            PooledBuffer b = pool.lease(0);
            assertEquals(64, b.capacity());
            b.release();
            pool.release(pool.leaseToken(0));
        }
    }

    @Test
    void negativeSizesAreRefusedInEveryForm() {
        try (BufferPool pool = small(1)) {
            for (int size : new int[] {-1, Integer.MIN_VALUE}) {
                for (Runnable r : List.<Runnable>of(
                        () -> pool.lease(size),
                        () -> pool.tryLease(size),
                        () -> pool.leaseToken(size),
                        () -> pool.tryLeaseToken(size))) {
                    InvalidRequestException e = refused(InvalidRequestException.class, r::run);
                    assertTrue(e.getMessage().contains("negative"), e.getMessage());
                }
            }
            assertIntact(pool, 1);
        }
    }

    @Test
    void sizesAboveTheLargestClassAreRefusedNamingIt() {
        try (BufferPool pool = fake.pool().sizeClass(64, 1).sizeClass(4096, 1).build()) {
            for (int size : new int[] {4097, 1 << 20, Integer.MAX_VALUE}) {
                InvalidRequestException e = refused(InvalidRequestException.class, () -> pool.leaseToken(size));
                assertTrue(e.getMessage().contains("the largest is 4096"), e.getMessage());
                refused(InvalidRequestException.class, () -> pool.tryLease(size));
            }
        }
    }

    @Test
    void builderRefusesBadSizeClasses() {
        for (int[] bad : new int[][] {{0, 1}, {-1, 1}, {64, 0}, {64, -5}}) {
            refused(InvalidRequestException.class, () -> fake.pool().sizeClass(bad[0], bad[1]));
        }
        assertThrows(
                InvalidRequestException.class,
                () -> fake.pool().sizeClass(64, 1).sizeClass(64, 2));
        refused(VerbsException.class, () -> fake.pool().build());
        refused(
                InvalidRequestException.class,
                "BufferPool.build",
                Errno.EINVAL,
                () -> fake.pool().sizeClass(1, Integer.MAX_VALUE).build(),
                "too many buffers",
                String.valueOf(BufferPool.MAX_BUFFERS));
        // 2 PiB of host memory: more than the address space, refused by malloc, never an OutOfMemoryError
        refused(
                VerbsException.class,
                "BufferPool.build",
                Errno.ENOMEM,
                () -> fake.pool().sizeClass(1 << 30, 1 << 21).build(),
                "could not allocate a region of " + (1L << 51) + " bytes");
        refused(InvalidRequestException.class, () -> fake.pool().threadCacheSize(-1));
        assertEquals(0, fake.registrations.get(), "nothing registered by refused builds");
    }

    // ---- concurrency -----------------------------------------------------------------------------

    @Test
    void concurrentCloseVersusLeaseAndReleaseHasADefinedOutcome() throws Exception {
        int threads = 4;
        BufferPool pool =
                fake.pool().name("racy").sizeClass(64, 8).sizeClass(1024, 4).build();
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        AtomicLong leases = new AtomicLong();
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            int me = i;
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    while (!stop.get()) {
                        try {
                            if ((me & 1) == 0) {
                                long t = pool.leaseToken(1 + (me * 300));
                                pool.release(t);
                            } else {
                                PooledBuffer b = pool.lease(1);
                                // a successful lease holds the close off: the memory must be there
                                b.segment().set(ValueLayout.JAVA_INT, 0, me);
                                if (b.segment().get(ValueLayout.JAVA_INT, 0) != me) {
                                    errors.add(new AssertionError("buffer memory changed under its lease"));
                                }
                                b.release();
                            }
                            leases.incrementAndGet();
                        } catch (VerbsException e) {
                            if (!(e.getMessage().contains("is closed")
                                            || e.getMessage().contains("being closed"))
                                    || e instanceof StaleLeaseException) {
                                errors.add(e);
                                return;
                            }
                            if (!pool.resources.isEnding()) { // a refused close fails nothing
                                errors.add(new AssertionError("failed on an open pool", e));
                                return;
                            }
                            return; // the defined outcome of a close that goes ahead
                        }
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        start.await();
        Thread.sleep(20);
        int refusals = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                pool.close();
                break;
            } catch (VerbsException e) {
                assertTrue(e.getMessage().contains("still has"), e.getMessage());
                refusals++;
                if (System.nanoTime() > deadline) {
                    stop.set(true); // let the workers drain, then close must succeed
                }
                Thread.onSpinWait();
            }
        }
        for (Thread t : workers) {
            t.join(10_000);
            assertFalse(t.isAlive());
        }
        assertTrue(errors.isEmpty(), errors::toString);
        assertTrue(pool.isClosed());
        assertTrue(pool.regions().stream().noneMatch(MemoryRegion::isOpen));
        assertEquals(0, pool.metrics().bytesInUse());
        System.out.printf(
                "close raced with %d leases: %d refused close(s) before it went through%n", leases.get(), refusals);
    }

    @Test
    void staleReleasesRacingWithNewLeasesNeverReleaseThem() throws Exception {
        int rounds = 20_000;
        try (BufferPool pool = fake.pool()
                .sizeClass(64, 1)
                .threadCacheSize(0)
                .exhaustion(ExhaustionPolicy.await(Duration.ofSeconds(30)))
                .build()) {
            ConcurrentLinkedQueue<Long> released = new ConcurrentLinkedQueue<>();
            AtomicBoolean done = new AtomicBoolean();
            AtomicLong refused = new AtomicLong();
            ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
            Thread rogue = Thread.ofPlatform().start(() -> {
                while (!done.get()) {
                    Long old = released.poll();
                    if (old == null) {
                        Thread.onSpinWait();
                        continue;
                    }
                    try {
                        pool.release(old);
                        errors.add(new AssertionError("a stale token released a lease"));
                    } catch (StaleLeaseException expected) {
                        refused.incrementAndGet();
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                }
            });
            for (int i = 0; i < rounds; i++) {
                long t = pool.leaseToken(1);
                if (!pool.isCurrent(t)) {
                    errors.add(new AssertionError("the holder's lease was ended by someone else"));
                    break;
                }
                pool.release(t); // must never be refused: only stale tokens are released by the rogue
                released.add(t);
            }
            while (!released.isEmpty() && errors.isEmpty()) {
                Thread.onSpinWait();
            }
            done.set(true);
            rogue.join(10_000);
            assertTrue(errors.isEmpty(), errors::toString);
            assertEquals(rounds, refused.get(), "every stale release refused");
        }
    }

    @Test
    void racingReleasesOfOneTokenSucceedExactlyOnce() throws Exception {
        int threads = 8;
        try (BufferPool pool = small(2)) {
            for (int round = 0; round < 200; round++) {
                long t = pool.leaseToken(1);
                CyclicBarrier start = new CyclicBarrier(threads);
                AtomicInteger ok = new AtomicInteger();
                AtomicInteger stale = new AtomicInteger();
                List<Thread> ts = new ArrayList<>();
                for (int i = 0; i < threads; i++) {
                    ts.add(Thread.ofPlatform().start(() -> {
                        try {
                            start.await();
                            pool.release(t);
                            ok.incrementAndGet();
                        } catch (StaleLeaseException e) {
                            stale.incrementAndGet();
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    }));
                }
                for (Thread x : ts) {
                    x.join();
                }
                assertEquals(1, ok.get());
                assertEquals(threads - 1, stale.get());
            }
            assertIntact(pool, 2);
        }
    }

    @Test
    void racingReleasesOfOneLeaseObjectSucceedExactlyOnce() throws Exception {
        int threads = 8;
        try (BufferPool pool = small(1)) {
            for (int round = 0; round < 100; round++) {
                PooledBuffer b = pool.lease(1);
                CyclicBarrier start = new CyclicBarrier(threads);
                AtomicInteger ok = new AtomicInteger();
                List<Thread> ts = new ArrayList<>();
                Consumer<PooledBuffer> race = x -> {
                    try {
                        start.await();
                        x.release();
                        ok.incrementAndGet();
                    } catch (StaleLeaseException expected) {
                        // the losers
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                };
                for (int i = 0; i < threads; i++) {
                    ts.add(Thread.ofPlatform().start(() -> race.accept(b)));
                }
                for (Thread x : ts) {
                    x.join();
                }
                assertEquals(1, ok.get());
            }
            assertIntact(pool, 1);
        }
    }

    @Test
    void tokensOfEveryLeaseDifferAndDecodeToTheirBuffer() {
        try (BufferPool pool = small(4)) {
            java.util.Set<Long> seen = new java.util.HashSet<>();
            for (int i = 0; i < 1000; i++) {
                long t = pool.leaseToken(1);
                assertTrue(seen.add(t), "a token was issued twice");
                assertEquals(pool.buffer(t).id(), (int) (t & 7));
                assertNotEquals(BufferPool.NO_TOKEN, t);
                pool.release(t);
            }
            assertNotNull(pool.metrics());
        }
    }

    // ---- the safe default: a segment or a reference kept past its lease -------------------------

    @Test
    void aSegmentKeptPastItsLeaseIsClosedByTheReleaseAndNeverReachesTheNextHolder() {
        try (BufferPool pool = small(1)) {
            PooledBuffer first = pool.lease(1);
            MemorySegment kept = first.segment();
            assertSame(kept, first.segment(), "one view per lease");
            kept.set(ValueLayout.JAVA_INT, 0, 1);
            first.release();
            assertFalse(kept.scope().isAlive(), "the lease's view died with the lease");
            PooledBuffer next = pool.lease(1);
            assertEquals(first.id(), next.id(), "the same buffer, leased again");
            next.segment().set(ValueLayout.JAVA_INT, 0, 2);
            assertThrows(IllegalStateException.class, () -> kept.set(ValueLayout.JAVA_INT, 0, 99));
            StaleLeaseException e = refused(StaleLeaseException.class, first::release);
            assertTrue(e.getMessage().contains("is stale"), e.getMessage());
            refused(StaleLeaseException.class, first::segment);
            assertTrue(next.isLeased(), "the next holder's lease survives both");
            assertEquals(2, next.segment().get(ValueLayout.JAVA_INT, 0), "and so does its data");
            next.release();
            assertIntact(pool, 1);
        }
    }

    @Test
    void aSegmentTakenThroughATokenDiesWhenTheTokenIsReleased() {
        try (BufferPool pool = small(1)) {
            long t = pool.leaseToken(1);
            MemorySegment kept = pool.buffer(t).segment();
            assertSame(kept, pool.buffer(t).segment(), "every object of one lease shares its view");
            pool.release(t);
            assertFalse(kept.scope().isAlive());
            long u = pool.leaseToken(1);
            assertThrows(IllegalStateException.class, () -> kept.get(ValueLayout.JAVA_INT, 0));
            refused(StaleLeaseException.class, () -> pool.buffer(t));
            pool.buffer(u).segment().set(ValueLayout.JAVA_INT, 0, 3);
            pool.release(u);
        }
    }

    // ---- checked access: no segment handed out -------------------------------------------------

    @Test
    void checkedAccessThroughAReferenceKeptPastItsLeaseIsRefusedAndNeverReachesTheNextHolder() {
        try (BufferPool pool = small(1)) {
            PooledBuffer first = pool.lease(1);
            first.set(ValueLayout.JAVA_INT, 0, 1);
            assertEquals(1, first.get(ValueLayout.JAVA_INT, 0));
            first.release();
            PooledBuffer next = pool.lease(1);
            assertEquals(first.id(), next.id(), "the same buffer, leased again");
            next.set(ValueLayout.JAVA_LONG, 0, 2L);
            byte[] bytes = {9, 9, 9, 9};
            MemorySegment out = Arena.ofAuto().allocate(8);
            refused(
                    StaleLeaseException.class,
                    "PooledBuffer.set",
                    Errno.EBADF,
                    () -> first.set(ValueLayout.JAVA_INT, 0, 99),
                    "is stale");
            refused(
                    StaleLeaseException.class,
                    "PooledBuffer.set",
                    Errno.EBADF,
                    () -> first.set(ValueLayout.JAVA_BYTE, 0, (byte) 99));
            refused(
                    StaleLeaseException.class,
                    "PooledBuffer.set",
                    Errno.EBADF,
                    () -> first.set(ValueLayout.JAVA_SHORT, 0, (short) 99));
            refused(
                    StaleLeaseException.class,
                    "PooledBuffer.set",
                    Errno.EBADF,
                    () -> first.set(ValueLayout.JAVA_LONG, 0, 99L));
            refused(StaleLeaseException.class, "PooledBuffer.write", Errno.EBADF, () -> first.write(0, bytes, 0, 4));
            refused(StaleLeaseException.class, "PooledBuffer.write", Errno.EBADF, () -> first.write(0, out, 0, 8));
            refused(
                    StaleLeaseException.class,
                    "PooledBuffer.get",
                    Errno.EBADF,
                    () -> first.get(ValueLayout.JAVA_LONG, 0));
            refused(StaleLeaseException.class, "PooledBuffer.read", Errno.EBADF, () -> first.read(0, bytes, 0, 4));
            refused(StaleLeaseException.class, "PooledBuffer.read", Errno.EBADF, () -> first.read(0, out, 0, 8));
            assertEquals(2L, next.get(ValueLayout.JAVA_LONG, 0), "the next holder's data is untouched");
            assertEquals(9, bytes[0], "nothing was read into the caller's array");
            next.release();
            assertIntact(pool, 1);
        }
    }

    @Test
    void checkedAccessOutsideTheBufferOrMisalignedIsRefusedWithTheLimitNamed() {
        try (BufferPool pool = small(1)) {
            PooledBuffer b = pool.lease(1);
            MemorySegment src = Arena.ofAuto().allocate(16);
            byte[] arr = new byte[16];
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.set",
                    Errno.EINVAL,
                    () -> b.set(ValueLayout.JAVA_INT, -4, 1),
                    "[0, 256)");
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.get",
                    Errno.EINVAL,
                    () -> b.get(ValueLayout.JAVA_LONG, 252),
                    "offset 252");
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.get",
                    Errno.EINVAL,
                    () -> b.get(ValueLayout.JAVA_BYTE, Long.MAX_VALUE));
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.write",
                    Errno.EINVAL,
                    () -> b.write(250, src, 0, 16),
                    "capacity");
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.write",
                    Errno.EINVAL,
                    () -> b.write(0, src, 8, 16),
                    "of src");
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.write",
                    Errno.EINVAL,
                    () -> b.write(0, arr, -1, 4),
                    "of src");
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.read",
                    Errno.EINVAL,
                    () -> b.read(0, arr, 0, Integer.MAX_VALUE),
                    "of dst");
            refused(InvalidRequestException.class, "PooledBuffer.read", Errno.EINVAL, () -> b.read(0, src, 0, -1));
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.read",
                    Errno.EINVAL,
                    () -> b.read(0, src.asReadOnly(), 0, 4),
                    "read-only");
            refused(
                    InvalidRequestException.class,
                    "PooledBuffer.set",
                    Errno.EINVAL,
                    () -> b.set(ValueLayout.JAVA_INT, 2, 1),
                    "aligned",
                    "JAVA_INT_UNALIGNED");
            b.set(ValueLayout.JAVA_INT_UNALIGNED, 2, 0x01020304);
            assertEquals(0x01020304, b.get(ValueLayout.JAVA_INT_UNALIGNED, 2));
            b.write(240, src.fill((byte) 7), 0, 16);
            b.read(240, arr, 0, 16);
            assertEquals(7, arr[15]);
            b.release();
            assertIntact(pool, 1);
        }
    }

    @Test
    void aReleaseOnAnotherThreadWaitsForAnAccessUnderWayBeforeTheBufferCanBeLeasedAgain() throws Exception {
        try (BufferPool pool = small(1)) {
            PooledBuffer b = pool.lease(1);
            long token = b.token();
            assertTrue(pool.pin(b.id(), token), "an access under way (as inside set/get/write/read)");
            Thread releaser = Thread.ofPlatform().start(b::release);
            // whether or not the release has ended the lease yet, the buffer is not leasable while pinned
            assertEquals(BufferPool.NO_TOKEN, pool.tryLeaseToken(1), "the buffer is handed out while accessed");
            pool.unpin(b.id());
            releaser.join();
            assertFalse(pool.pin(b.id(), token), "an access after the release is refused");
            refused(StaleLeaseException.class, () -> b.set(ValueLayout.JAVA_INT, 0, 1));
            assertIntact(pool, 1);
        }
    }

    @Test
    void checkedAccessAfterCloseSaysThePoolIsClosed() {
        BufferPool pool = small(1);
        PooledBuffer b = pool.lease(1);
        b.release();
        pool.close();
        refused(
                ResourceClosedException.class,
                "PooledBuffer.get",
                Errno.EBADF,
                () -> b.get(ValueLayout.JAVA_INT, 0),
                "is closed");
    }

    @Test
    void theUnsafeSharedBuffersAliasAKeptSegmentAsDocumented() {
        // the opt-in's stated cost: a segment kept past its release is the next holder's memory
        try (BufferPool pool = shared(1)) {
            PooledBuffer first = pool.lease(1);
            MemorySegment kept = first.segment();
            first.release();
            PooledBuffer next = pool.lease(1);
            assertSame(first, next, "one object per slot");
            next.segment().set(ValueLayout.JAVA_INT, 0, 2);
            assertTrue(kept.scope().isAlive());
            assertEquals(2, kept.get(ValueLayout.JAVA_INT, 0), "the kept segment sees the next holder's data");
            long token = next.token();
            next.release();
            refused(StaleLeaseException.class, () -> pool.release(token), "tokens stay checked");
        }
    }

    // ---- unchecked mode keeps every check that guards another holder's buffer ------------------

    /**
     * Walks the pool's part of "what unchecked mode keeps" (docs/memory-safety.md): each check
     * is exercised and refuses, in whichever mode this run is in (this class runs in both), and
     * the current holder's lease and data are untouched after each.
     */
    @Test
    void everyCheckUncheckedModeKeepsStillRefuses() {
        try (BufferPool pool = small(1);
                BufferPool other = small(1);
                SendWorkRequests send = new SendWorkRequests(4, 1);
                org.verbs4j.ReceiveWorkRequests recv = new org.verbs4j.ReceiveWorkRequests(4, 1)) {
            PooledBuffer stale = pool.lease(1);
            MemorySegment staleSegment = stale.segment();
            long staleToken = stale.token();
            stale.release();
            PooledBuffer now = pool.lease(1);
            long nowToken = now.token();
            now.segment().set(ValueLayout.JAVA_INT, 0, 42);
            PooledBuffer theirs = other.lease(1);
            Map<String, Class<? extends Throwable>> cases = new java.util.LinkedHashMap<>();
            Map<String, org.junit.jupiter.api.function.Executable> calls = new java.util.LinkedHashMap<>();
            cases.put("release of a stale token", StaleLeaseException.class);
            calls.put("release of a stale token", () -> pool.release(staleToken));
            cases.put("release of a stale lease object", StaleLeaseException.class);
            calls.put("release of a stale lease object", stale::release);
            cases.put("buffer(stale token)", StaleLeaseException.class);
            calls.put("buffer(stale token)", () -> pool.buffer(staleToken));
            cases.put("segment() of a stale lease object", StaleLeaseException.class);
            calls.put("segment() of a stale lease object", stale::segment);
            cases.put("access through a segment kept past its lease", IllegalStateException.class);
            calls.put(
                    "access through a segment kept past its lease", () -> staleSegment.set(ValueLayout.JAVA_INT, 0, 7));
            cases.put("send SGE of a stale token", InvalidRequestException.class);
            calls.put(
                    "send SGE of a stale token",
                    () -> PoolWorkRequests.sge(send.clear().send(1), pool, staleToken, 8));
            cases.put("receive SGE of a stale token", InvalidRequestException.class);
            calls.put(
                    "receive SGE of a stale token",
                    () -> PoolWorkRequests.sge(recv.clear().add(1), pool, staleToken, 8));
            cases.put("send SGE of a stale lease object", InvalidRequestException.class);
            calls.put(
                    "send SGE of a stale lease object",
                    () -> PoolWorkRequests.sge(send.clear().send(1), stale, 8));
            cases.put("receive SGE of a stale lease object", InvalidRequestException.class);
            calls.put(
                    "receive SGE of a stale lease object",
                    () -> PoolWorkRequests.sge(recv.clear().add(1), stale));
            cases.put("SGE beyond the buffer (object)", InvalidRequestException.class);
            calls.put(
                    "SGE beyond the buffer (object)",
                    () -> PoolWorkRequests.sge(recv.clear().add(1), now, 257));
            cases.put("SGE beyond the buffer (token)", InvalidRequestException.class);
            calls.put(
                    "SGE beyond the buffer (token)",
                    () -> PoolWorkRequests.sge(send.clear().send(1), pool, nowToken, 257));
            cases.put("SGE of NO_TOKEN", InvalidRequestException.class);
            calls.put(
                    "SGE of NO_TOKEN", () -> PoolWorkRequests.sge(send.clear().send(1), pool, BufferPool.NO_TOKEN, 8));
            cases.put("SGE of another pool's token", InvalidRequestException.class);
            calls.put(
                    "SGE of another pool's token",
                    () -> PoolWorkRequests.sge(send.clear().send(1), pool, theirs.token(), 8));
            cases.put("release to another pool", InvalidRequestException.class);
            calls.put("release to another pool", () -> pool.release(theirs));
            for (Map.Entry<String, Class<? extends Throwable>> c : cases.entrySet()) {
                Throwable e = assertThrows(c.getValue(), calls.get(c.getKey()), c.getKey());
                assertNotNull(e.getMessage(), c.getKey());
                assertTrue(pool.isCurrent(nowToken), c.getKey() + ": the current lease is untouched");
                assertEquals(42, now.segment().get(ValueLayout.JAVA_INT, 0), c.getKey() + ": and its data");
            }
            PoolWorkRequests.sge(send.clear().send(2), now, 256); // the current lease still posts
            PoolWorkRequests.sge(recv.clear().add(2), pool, nowToken, 256);
            assertEquals(1, send.size());
            now.release();
            theirs.release();
            assertIntact(pool, 1);
        }
    }

    // ---- a refused close leaves the pool fully usable ----------------------------------------

    @Test
    void aRefusedCloseFailsNoLeaseOrWaiterThatRacedIt() throws Exception {
        BufferPool pool = fake.pool()
                .name("busy")
                .sizeClass(64, 8)
                .sizeClass(1024, 1)
                .exhaustion(ExhaustionPolicy.await(Duration.ofSeconds(30)))
                .build();
        long anchor = pool.leaseToken(1); // held throughout: every close is refused
        int leasers = 2, waiters = 2, rounds = 3_000;
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        AtomicInteger done = new AtomicInteger();
        CyclicBarrier start = new CyclicBarrier(leasers + waiters + 1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < leasers + waiters; i++) {
            boolean waiter = i >= leasers;
            threads.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int r = 0; r < rounds; r++) {
                        if (waiter) { // one 1024-byte buffer for two threads: they wait for each other
                            long t = pool.leaseToken(1000);
                            pool.release(t);
                        } else {
                            PooledBuffer b = pool.lease(1);
                            b.release();
                            PooledBuffer n = pool.tryLease(1);
                            if (n != null) {
                                n.release();
                            }
                        }
                    }
                } catch (Throwable e) {
                    errors.add(e);
                } finally {
                    done.incrementAndGet();
                }
            }));
        }
        start.await();
        int refused = 0;
        while (done.get() < threads.size()) {
            ResourceBusyException e = refused(ResourceBusyException.class, pool::close);
            assertTrue(e.getMessage().contains("still has"), e.getMessage());
            refused++;
        }
        for (Thread t : threads) {
            t.join(30_000);
            assertFalse(t.isAlive());
        }
        int closes = refused;
        assertTrue(errors.isEmpty(), () -> closes + " refused closes failed what raced them: " + errors);
        assertFalse(pool.isClosed());
        pool.release(anchor);
        assertIntact(pool, 8);
        pool.close();
        assertTrue(pool.isClosed());
    }

    // ---- messages ------------------------------------------------------------------------------

    @Test
    void twoPoolsOfOneNameAreToldApartInMessages() {
        try (BufferPool a = small(1);
                BufferPool b = small(1)) {
            PooledBuffer theirs = b.lease(1);
            InvalidRequestException e = refused(InvalidRequestException.class, () -> a.release(theirs));
            assertTrue(
                    e.getMessage().contains("belongs to pool 'p' (#" + b.id + "), not to pool 'p' (#" + a.id + ")"),
                    e.getMessage());
            InvalidRequestException t = refused(InvalidRequestException.class, () -> a.release(theirs.token()));
            assertTrue(t.getMessage().contains("not issued by pool 'p' (#" + a.id + ")"), t.getMessage());
            theirs.release();
        }
    }
}
