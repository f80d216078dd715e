package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Concurrency stress on the host: many threads leasing and releasing (some releasing buffers that
 * other threads leased), each lease claiming its buffer in a per-buffer atomic ownership array and
 * stamping the buffer's memory, so a buffer handed out twice is caught; at the end every buffer is
 * back and can be leased exactly once.
 */
class BufferPoolStressTest {
    private static final int THREADS = 8;
    private static final int OPS = 200_000;

    private final FakeVerbs fake = new FakeVerbs();

    @AfterEach
    void closeFake() {
        fake.close();
    }

    @Test
    void noBufferHandedOutTwiceNoneLostWithUnsafeSharedBuffers() throws Exception {
        stress(false, true, OPS);
    }

    @Test
    void noBufferHandedOutTwiceNoneLostWithSafeLeases() throws Exception {
        // each lease's first segment() makes a shared arena and its release closes it: fewer rounds
        stress(false, false, OPS / 20);
    }

    @Test
    void noBufferHandedOutTwiceNoneLostWithLeakTracking() throws Exception {
        stress(true, true, OPS / 8);
    }

    private void stress(boolean tracking, boolean shared, int ops) throws Exception {
        // 21 buffers per class: fewer than 8 threads can hold at once (2 held + 1 being leased each, and 4
        // in the hand-off queue) and fewer than their caches (4 each) can park, so classes run dry: leases
        // steal from other threads' caches, and now and then wait for a release
        try (BufferPool pool = fake.pool()
                .sizeClass(64, 21)
                .sizeClass(1024, 21)
                .threadCacheSize(4)
                .leakTracking(tracking)
                .leakSites(false)
                .unsafeSharedBuffers(shared)
                .exhaustion(ExhaustionPolicy.await(Duration.ofSeconds(30)))
                .build()) {
            AtomicIntegerArray owner = new AtomicIntegerArray(pool.capacity());
            ArrayBlockingQueue<PooledBuffer> handoff = new ArrayBlockingQueue<>(4);
            ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
            AtomicLong leases = new AtomicLong();
            CyclicBarrier start = new CyclicBarrier(THREADS);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                int me = t + 1;
                threads.add(Thread.ofPlatform().name("stress-" + me).start(() -> {
                    try {
                        start.await();
                        java.util.SplittableRandom rnd = new java.util.SplittableRandom(me);
                        PooledBuffer[] held = new PooledBuffer[2];
                        for (int i = 0; i < ops; i++) {
                            int size = rnd.nextInt(4) == 0 ? 1 + rnd.nextInt(1024) : 1 + rnd.nextInt(64);
                            PooledBuffer b = pool.lease(size);
                            leases.incrementAndGet();
                            if (!owner.compareAndSet(b.id(), 0, me)) {
                                throw new AssertionError("buffer " + b.id() + " handed to thread " + me
                                        + " while thread " + owner.get(b.id()) + " holds it");
                            }
                            MemorySegment s = b.segment();
                            s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, me);
                            s.set(ValueLayout.JAVA_INT_UNALIGNED, b.capacity() - 4, i);
                            int slot = rnd.nextInt(2);
                            PooledBuffer old = held[slot];
                            held[slot] = b;
                            if (old != null) {
                                releaseChecked(old, owner, me);
                            }
                            // now and then hand a buffer to whichever thread comes next
                            if ((i & 255) == 0) {
                                PooledBuffer h = held[0];
                                if (h != null && owner.compareAndSet(h.id(), me, -1)) {
                                    if (handoff.offer(h)) {
                                        held[0] = null;
                                    } else {
                                        owner.set(h.id(), me);
                                    }
                                }
                                PooledBuffer got = handoff.poll();
                                if (got != null) {
                                    releaseChecked(got, owner, -1);
                                }
                            }
                        }
                        for (PooledBuffer h : held) {
                            if (h != null) {
                                releaseChecked(h, owner, me);
                            }
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                }));
            }
            for (Thread t : threads) {
                t.join();
            }
            for (PooledBuffer h; (h = handoff.poll()) != null; ) {
                releaseChecked(h, owner, -1);
            }
            assertTrue(errors.isEmpty(), () -> "stress failures: " + errors);
            for (int i = 0; i < owner.length(); i++) {
                assertEquals(0, owner.get(i), "buffer " + i + " still owned");
            }
            PoolMetrics m = pool.metrics();
            assertEquals(0, m.bytesInUse());
            assertEquals(leases.get(), m.leases());
            assertEquals((long) THREADS * ops, m.leases());
            assertEquals(0, m.leaked());
            assertEquals(2, m.registrations());
            assertTrue(pool.outstandingLeases().isEmpty());
            // every buffer is back, exactly once
            Set<Integer> ids = new HashSet<>();
            List<PooledBuffer> all = new ArrayList<>();
            for (int i = 0; i < 21; i++) {
                PooledBuffer b = pool.tryLease(64);
                assertTrue(ids.add(b.id()));
                all.add(b);
            }
            for (int i = 0; i < 21; i++) {
                PooledBuffer b = pool.tryLease(1024);
                assertTrue(ids.add(b.id()));
                all.add(b);
            }
            assertNull(pool.tryLease(64));
            assertNull(pool.tryLease(1024));
            assertEquals(pool.capacity(), ids.size());
            all.forEach(PooledBuffer::release);
            System.out.printf(
                    "stress (tracking " + tracking + "): %d leases, %d cache misses, %d exhaustions, high-water %d B%n",
                    m.leases(),
                    m.cacheMisses(),
                    m.exhaustions(),
                    m.highWaterMarkBytes());
        }
        assertEquals(2, fake.registrations.get());
    }

    private static void releaseChecked(PooledBuffer b, AtomicIntegerArray owner, int me) {
        if (me > 0 && b.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0) != me) {
            throw new AssertionError("buffer " + b.id() + " was written by thread "
                    + b.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0) + " while thread " + me + " held it");
        }
        if (!owner.compareAndSet(b.id(), me, 0)) {
            throw new AssertionError("buffer " + b.id() + " owned by " + owner.get(b.id()) + ", not " + me);
        }
        b.release();
    }
}
