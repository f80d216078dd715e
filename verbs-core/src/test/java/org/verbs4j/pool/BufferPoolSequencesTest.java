package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterProperty;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.SendWorkRequests;

/**
 * Random sequences of pool calls on three threads at once, on the safe default pool: lease (by
 * object or token), write (through the segment or the checked accessors), post (an SGE through the pool's checks), release, stale release and
 * stale writes through segments and checked accessors kept past their lease (each thread's own, or
 * another thread's), and closes (refused while anything is leased). Invariants: every holder
 * finds exactly its own stamp in its buffer at every step (no write through a stale reference
 * ever lands in it), no buffer is held by two threads, every stale use is refused, a refused
 * close changes nothing, and at the end the counters match (nothing in use, every buffer
 * leasable once). The seed is fixed, so a failure reproduces.
 */
class BufferPoolSequencesTest {
    private static final int THREADS = 3;

    enum Op {
        LEASE,
        LEASE_TOKEN,
        WRITE,
        POST,
        RELEASE,
        STALE_RELEASE,
        STALE_WRITE,
        CLOSE
    }

    private final FakeVerbs fake = new FakeVerbs();

    @AfterProperty
    void closeFake() {
        fake.close();
    }

    @Provide
    Arbitrary<List<List<Op>>> schedules() {
        Arbitrary<Op> op = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(4, Arbitraries.just(Op.LEASE)),
                net.jqwik.api.Tuple.of(3, Arbitraries.just(Op.LEASE_TOKEN)),
                net.jqwik.api.Tuple.of(3, Arbitraries.just(Op.WRITE)),
                net.jqwik.api.Tuple.of(2, Arbitraries.just(Op.POST)),
                net.jqwik.api.Tuple.of(5, Arbitraries.just(Op.RELEASE)),
                net.jqwik.api.Tuple.of(2, Arbitraries.just(Op.STALE_RELEASE)),
                net.jqwik.api.Tuple.of(2, Arbitraries.just(Op.STALE_WRITE)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Op.CLOSE)));
        return op.list().ofMinSize(5).ofMaxSize(60).list().ofSize(THREADS);
    }

    /** A lease a thread holds: its object (null for a token lease), token, stamp and segment. */
    private record Held(PooledBuffer buffer, long token, int stamp, MemorySegment segment) {}

    /** What a lease left behind once released: a reference, a token and a segment kept past it. */
    private record Kept(PooledBuffer buffer, long token, MemorySegment segment) {}

    @Property(tries = 150, seed = "20261206")
    void threadsNeverSeeEachOthersLeasesAndTheCountersAgree(@ForAll("schedules") List<List<Op>> schedule)
            throws Exception {
        BufferPool pool = fake.pool()
                .name("seq")
                .sizeClass(64, 3)
                .sizeClass(256, 2)
                .threadCacheSize(1)
                .build();
        ConcurrentLinkedQueue<Kept> kept = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        AtomicLong leases = new AtomicLong();
        AtomicLong closes = new AtomicLong();
        CyclicBarrier start = new CyclicBarrier(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            List<Op> ops = schedule.get(t);
            int me = t + 1;
            threads.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    run(pool, me, ops, kept, leases, closes);
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        assertTrue(errors.isEmpty(), errors::toString);
        if (closes.get() > 0) {
            assertEquals(1, closes.get(), "one close went through");
            assertTrue(pool.isClosed());
            assertEquals(0, pool.metrics().bytesInUse());
            kept.forEach(k -> assertFalse(k.segment.scope().isAlive()));
            return;
        }
        // counters: nothing in use, nothing outstanding, every buffer leasable exactly once
        assertEquals(0, pool.metrics().bytesInUse(), "bytes in use after every lease was released");
        assertTrue(
                pool.outstandingLeases().isEmpty(),
                () -> pool.outstandingLeases().toString());
        Set<Integer> ids = new HashSet<>();
        List<Long> all = new ArrayList<>();
        for (int size : new int[] {64, 64, 64, 256, 256}) {
            long token = pool.leaseToken(size);
            assertTrue(ids.add(pool.buffer(token).id()), "a buffer handed out twice");
            all.add(token);
        }
        assertEquals(BufferPool.NO_TOKEN, pool.tryLeaseToken(1));
        all.forEach(pool::release);
        for (Kept k : kept) { // every reference kept past its lease is still refused
            assertFalse(pool.isCurrent(k.token));
            if (k.segment != null) {
                assertFalse(k.segment.scope().isAlive());
            }
        }
        pool.close();
    }

    private static void run(
            BufferPool pool,
            int me,
            List<Op> ops,
            ConcurrentLinkedQueue<Kept> kept,
            AtomicLong leases,
            AtomicLong closes) {
        ArrayDeque<Held> held = new ArrayDeque<>();
        int stamps = 0;
        try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
            for (Op op : ops) {
                switch (op) {
                    case LEASE, LEASE_TOKEN -> {
                        int size = (stamps & 1) == 0 ? 64 : 200;
                        try {
                            PooledBuffer b;
                            long token;
                            if (op == Op.LEASE) {
                                b = pool.lease(size);
                                token = b.token();
                            } else {
                                token = pool.leaseToken(size);
                                b = pool.buffer(token);
                            }
                            int stamp = me << 24 | ++stamps;
                            MemorySegment s = b.segment();
                            s.set(ValueLayout.JAVA_INT, 0, stamp);
                            held.push(new Held(op == Op.LEASE ? b : null, token, stamp, s));
                            leases.incrementAndGet();
                        } catch (PoolExhaustedException e) {
                            // fail-fast: the class is leased out; nothing changed
                        } catch (ResourceClosedException e) {
                            assertTrue(pool.resources.isEnding(), () -> "a lease failed on an open pool: " + e);
                        }
                    }
                    case WRITE -> {
                        Held h = held.peek();
                        if (h != null) {
                            verify(h);
                            if (h.buffer != null && (h.stamp & 1) == 0) { // the checked accessors
                                h.buffer.set(ValueLayout.JAVA_INT, 4, h.stamp);
                                assertEquals(h.stamp, h.buffer.get(ValueLayout.JAVA_INT, 0));
                            } else {
                                h.segment.set(ValueLayout.JAVA_INT, 4, h.stamp);
                            }
                        }
                    }
                    case POST -> {
                        Held h = held.peek();
                        if (h != null) {
                            verify(h);
                            if (h.buffer != null) {
                                PoolWorkRequests.sge(wrs.clear().send(h.token), h.buffer, 8);
                            } else {
                                PoolWorkRequests.sge(wrs.clear().send(h.token), pool, h.token, 8);
                            }
                            assertEquals(1, wrs.size());
                        }
                    }
                    case RELEASE -> {
                        Held h = held.poll();
                        if (h != null) {
                            verify(h);
                            if (h.buffer != null) {
                                h.buffer.release();
                            } else {
                                pool.release(h.token);
                            }
                            assertFalse(h.segment.scope().isAlive(), "a lease's segment dies at its release");
                            kept.add(new Kept(h.buffer, h.token, h.segment));
                        }
                    }
                    case STALE_RELEASE -> {
                        Kept k = kept.peek();
                        if (k != null) {
                            try {
                                if (k.buffer != null) {
                                    k.buffer.release();
                                } else {
                                    pool.release(k.token);
                                }
                                throw new AssertionError("a stale release went through: " + k);
                            } catch (StaleLeaseException e) {
                                assertEquals((int) (k.token & pool.slotMask), e.bufferId());
                            } catch (ResourceClosedException e) {
                                assertTrue(pool.resources.isEnding(), e::toString);
                            }
                        }
                    }
                    case STALE_WRITE -> {
                        Kept k = kept.peek();
                        if (k != null) {
                            try {
                                k.segment.set(ValueLayout.JAVA_INT, 0, -1);
                                throw new AssertionError("a write through a stale segment went through: " + k);
                            } catch (IllegalStateException expected) {
                                // closed with its lease
                            }
                            if (k.buffer != null) { // a checked write through a kept reference
                                try {
                                    k.buffer.set(ValueLayout.JAVA_INT, 0, -1);
                                    throw new AssertionError("a checked write through a stale reference went through");
                                } catch (StaleLeaseException e) {
                                    assertEquals((int) (k.token & pool.slotMask), e.bufferId());
                                } catch (ResourceClosedException e) {
                                    // a close going ahead (its views close before it says RELEASING)
                                    assertFalse(pool.resources.isOpen(), e::toString);
                                }
                            }
                        }
                    }
                    case CLOSE -> {
                        try {
                            pool.close();
                            closes.incrementAndGet();
                            assertTrue(held.isEmpty(), "a close went through while this thread held leases");
                        } catch (ResourceBusyException e) {
                            // refused (leases out, or another thread's close under way): changes nothing
                        } catch (ResourceClosedException e) {
                            assertTrue(pool.resources.isEnding(), e::toString);
                        }
                    }
                }
            }
            while (!held.isEmpty()) {
                Held h = held.poll();
                verify(h);
                if (h.buffer != null) {
                    h.buffer.release();
                } else {
                    pool.release(h.token);
                }
            }
        }
    }

    /** The holder finds its own stamp: nothing else wrote into its buffer during its lease. */
    private static void verify(Held h) {
        int at0 = h.segment.get(ValueLayout.JAVA_INT, 0);
        assertEquals(h.stamp, at0, "another holder's write landed in this lease's buffer");
    }
}
