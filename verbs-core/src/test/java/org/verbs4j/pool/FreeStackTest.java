package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The pool's lock-free free list of slot indices ({@link FreeStack}). */
class FreeStackTest {

    private static List<Integer> drain(FreeStack s) {
        List<Integer> out = new ArrayList<>();
        for (int i; (i = s.pop()) != FreeStack.EMPTY; ) {
            out.add(i);
        }
        return out;
    }

    @Test
    void aNewStackHoldsEveryIndexWithZeroOnTop() {
        FreeStack s = new FreeStack(5);
        assertFalse(s.isEmpty());
        assertEquals(List.of(0, 1, 2, 3, 4), drain(s));
        assertTrue(s.isEmpty());
        assertEquals(FreeStack.EMPTY, s.pop(), "popping an empty stack gives EMPTY and changes nothing");
        assertTrue(s.isEmpty());
    }

    @Test
    void aStackOfCapacityZeroIsEmpty() {
        FreeStack s = new FreeStack(0);
        assertTrue(s.isEmpty());
        assertEquals(FreeStack.EMPTY, s.pop());
    }

    @Test
    void pushAndPopAreLastInFirstOut() {
        FreeStack s = new FreeStack(6);
        drain(s);
        s.push(3);
        assertFalse(s.isEmpty());
        s.push(1);
        s.push(5);
        assertEquals(5, s.pop());
        s.push(0);
        assertEquals(List.of(0, 1, 3), drain(s));
        assertTrue(s.isEmpty());
    }

    @Test
    void indicesPushedBackOnAPartlyFullStackGoAboveTheRest() {
        FreeStack s = new FreeStack(4);
        assertEquals(0, s.pop());
        assertEquals(1, s.pop());
        s.push(0);
        assertEquals(List.of(0, 2, 3), drain(s));
    }

    /**
     * Threads pop indices, hold a few (so that others pop and push underneath them, the ABA
     * pattern), and push them back in another order. An index held by two threads at once, an
     * index lost or an index duplicated in the stack fails the test.
     */
    @Test
    void concurrentPopsAndPushesNeitherLoseNorDuplicateAnIndex() throws InterruptedException {
        int capacity = 16;
        int threads = 4;
        int rounds = 20_000;
        FreeStack s = new FreeStack(capacity);
        AtomicIntegerArray held = new AtomicIntegerArray(capacity);
        AtomicLong pops = new AtomicLong();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            ts.add(Thread.ofPlatform().start(() -> {
                int[] mine = new int[3];
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int r = 0; r < rounds && errors.isEmpty(); r++) {
                    int want = 1 + (r + seed) % mine.length;
                    int n = 0;
                    while (n < want) {
                        int i = s.pop();
                        if (i == FreeStack.EMPTY) {
                            break;
                        }
                        if (i < 0 || i >= capacity) {
                            errors.add("popped " + i);
                            return;
                        }
                        if (!held.compareAndSet(i, 0, 1)) {
                            errors.add("index " + i + " popped while another thread held it");
                            return;
                        }
                        pops.incrementAndGet();
                        mine[n++] = i;
                    }
                    for (int k = (r & 1) == 0 ? 0 : n - 1; n > 0 && k >= 0 && k < n; k += (r & 1) == 0 ? 1 : -1) {
                        held.set(mine[k], 0);
                        s.push(mine[k]);
                    }
                }
            }));
        }
        start.countDown();
        for (Thread t : ts) {
            t.join(TimeUnit.SECONDS.toMillis(60));
            assertFalse(t.isAlive(), "a thread is stuck");
        }
        assertTrue(errors.isEmpty(), errors.toString());
        assertTrue(pops.get() >= rounds, "the threads popped " + pops.get() + " times");
        List<Integer> left = drain(s);
        assertEquals(capacity, left.size(), "every index is back exactly once: " + left);
        assertEquals(capacity, left.stream().distinct().count(), "no duplicate: " + left);
        assertTrue(s.isEmpty());
    }
}
