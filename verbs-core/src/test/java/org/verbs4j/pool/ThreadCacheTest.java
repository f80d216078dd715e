package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/** One thread's cache of free slot indices ({@link ThreadCache}): owner push/pop, stealing, hits. */
class ThreadCacheTest {

    @Test
    void theOwnerPopsWhatItPushedLastFirstAndCountsHits() {
        ThreadCache c = new ThreadCache(4, Thread.currentThread());
        assertEquals(FreeStack.EMPTY, c.pop(), "a new cache is empty");
        assertEquals(0, c.hits(), "an empty pop is no hit");
        assertTrue(c.push(7));
        assertTrue(c.push(2));
        assertTrue(c.push(9));
        assertEquals(9, c.pop());
        assertEquals(2, c.pop());
        assertTrue(c.push(4));
        assertEquals(4, c.pop());
        assertEquals(7, c.pop());
        assertEquals(FreeStack.EMPTY, c.pop());
        assertEquals(4, c.hits(), "one hit per index served");
    }

    @Test
    void aFullCacheRefusesAPush() {
        ThreadCache c = new ThreadCache(2, Thread.currentThread());
        assertTrue(c.push(1));
        assertTrue(c.push(2));
        assertFalse(c.push(3), "full: the caller frees the index to the shared list");
        assertEquals(2, c.pop());
        assertTrue(c.push(3));
        assertEquals(3, c.pop());
        assertEquals(1, c.pop());
    }

    @Test
    void aStealTakesTheNewestEntryAndTheOwnerSkipsTheHole() {
        ThreadCache c = new ThreadCache(4, Thread.currentThread());
        c.push(10);
        c.push(11);
        c.push(12);
        assertEquals(12, c.steal());
        assertEquals(11, c.steal());
        c.push(13); // above the holes
        assertEquals(13, c.pop());
        assertEquals(10, c.pop(), "the owner skips the stolen entries");
        assertEquals(FreeStack.EMPTY, c.pop());
        assertEquals(FreeStack.EMPTY, c.steal(), "nothing left to steal");
        assertEquals(2, c.hits(), "stolen entries are not hits");
    }

    @Test
    void ownerDeadOnceTheOwningThreadHasEnded() throws InterruptedException {
        assertFalse(new ThreadCache(1, Thread.currentThread()).ownerDead());
        Thread t = Thread.ofPlatform().start(() -> {});
        t.join();
        ThreadCache c = new ThreadCache(1, t);
        assertTrue(c.ownerDead());
    }

    /**
     * The owner pushes every index once (popping some back) while two threads steal: each index
     * ends up taken exactly once, by the owner, a stealer, or left in the cache.
     */
    @Test
    void stealingWhileTheOwnerWorksNeitherLosesNorDuplicates() throws InterruptedException {
        int n = 200_000;
        ThreadCache[] cache = new ThreadCache[1];
        ConcurrentLinkedQueue<Integer> stolen = new ConcurrentLinkedQueue<>();
        List<Integer> ownerTook = new ArrayList<>();
        List<Integer> refused = new ArrayList<>();
        AtomicBoolean done = new AtomicBoolean();
        Thread owner = Thread.ofPlatform().unstarted(() -> {
            ThreadCache c = cache[0];
            for (int i = 0; i < n; i++) {
                if (!c.push(i)) {
                    refused.add(i);
                }
                if (i % 3 == 0) {
                    int v = c.pop();
                    if (v != FreeStack.EMPTY) {
                        ownerTook.add(v);
                    }
                }
            }
        });
        cache[0] = new ThreadCache(8, owner);
        List<Thread> stealers = new ArrayList<>();
        for (int s = 0; s < 2; s++) {
            stealers.add(Thread.ofPlatform().start(() -> {
                List<Integer> mine = new ArrayList<>();
                while (!done.get()) {
                    int v = cache[0].steal();
                    if (v != FreeStack.EMPTY) {
                        mine.add(v);
                    } else {
                        Thread.onSpinWait();
                    }
                }
                stolen.addAll(mine);
            }));
        }
        owner.start();
        owner.join();
        done.set(true);
        for (Thread t : stealers) {
            t.join();
        }
        List<Integer> left = new ArrayList<>();
        for (int v; (v = cache[0].steal()) != FreeStack.EMPTY; ) {
            left.add(v);
        }
        boolean[] seen = new boolean[n];
        int total = 0;
        for (List<Integer> part : List.of(ownerTook, refused, new ArrayList<>(stolen), left)) {
            for (int v : part) {
                assertFalse(seen[v], "index " + v + " taken twice");
                seen[v] = true;
                total++;
            }
        }
        assertEquals(n, total, "every index accounted for");
        assertTrue(cache[0].ownerDead());
    }
}
