package org.verbs4j.pool;

import java.util.ArrayList;
import java.util.List;

/**
 * The per-thread caches of one pool: a platform thread's first lease makes its caches (one per
 * size class, found afterwards through one {@link ThreadLocal} lookup), registers them with the
 * classes for stealing, and drains the caches of threads that have died into the shared lists.
 * Virtual threads use no cache. Any thread.
 */
final class ThreadCaches {
    private final SizeClass[] classes;
    private final int cacheSize;
    private final ThreadLocal<ThreadCache[]> local = ThreadLocal.withInitial(this::register);
    private long retiredHits; // hits of pruned caches, under this

    ThreadCaches(SizeClass[] classes, int cacheSize) {
        this.classes = classes;
        this.cacheSize = cacheSize;
    }

    /** The calling thread's cache of class {@code k}, or null (virtual threads). */
    ThreadCache of(SizeClass k) {
        if (Thread.currentThread().isVirtual()) {
            return null;
        }
        return local.get()[k.index];
    }

    /** Leases served from thread caches, those of dead threads included. */
    synchronized long hits() {
        long hits = retiredHits;
        for (SizeClass k : classes) {
            for (ThreadCache c : k.caches) {
                hits += c.hits();
            }
        }
        return hits;
    }

    /** Forgets the calling thread's caches (the pool closed). */
    void removeCurrent() {
        local.remove();
    }

    private synchronized ThreadCache[] register() {
        Thread me = Thread.currentThread();
        ThreadCache[] mine = new ThreadCache[classes.length];
        for (SizeClass k : classes) {
            List<ThreadCache> keep = new ArrayList<>(k.caches.length + 1);
            for (ThreadCache c : k.caches) {
                if (c.ownerDead()) {
                    for (int v; (v = c.steal()) != FreeStack.EMPTY; ) {
                        k.shared.push(v);
                    }
                    retiredHits += c.hits();
                } else {
                    keep.add(c);
                }
            }
            ThreadCache c = new ThreadCache(Math.min(cacheSize, k.count), me);
            keep.add(c);
            mine[k.index] = c;
            k.caches = keep.toArray(SizeClass.NO_CACHES);
        }
        return mine;
    }
}
