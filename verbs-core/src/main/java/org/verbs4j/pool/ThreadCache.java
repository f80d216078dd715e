package org.verbs4j.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.WeakReference;

/**
 * One thread's cache of free slot indices for one size class (a "magazine"): a small LIFO the
 * owner pushes and pops without contention, from which other threads may steal when the shared
 * free list of the class is empty, so that buffers parked in caches (of idle or dead threads)
 * never make a class look exhausted.
 *
 * <p>Only the owner thread calls {@link #pop()} and {@link #push(int)}; any thread may call
 * {@link #steal()}. Every entry is taken with an atomic exchange, so an index is never taken
 * twice; entries at or above {@code top} are always {@link FreeStack#EMPTY} (stealers leave holes
 * below it, which the owner skips). Allocation-free.
 */
final class ThreadCache {
    private static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(int[].class);
    private static final VarHandle HITS;

    static {
        try {
            HITS = MethodHandles.lookup().findVarHandle(ThreadCache.class, "hits", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int[] slots;
    private int top; // owner only

    @SuppressWarnings("unused") // through HITS: written by the owner, read by metrics
    private long hits;

    final WeakReference<Thread> owner;

    ThreadCache(int capacity, Thread owner) {
        slots = new int[capacity];
        java.util.Arrays.fill(slots, FreeStack.EMPTY);
        this.owner = new WeakReference<>(owner);
    }

    /** Owner: the most recently cached index, or EMPTY. */
    int pop() {
        while (top > 0) {
            int v = (int) SLOTS.getAndSet(slots, --top, FreeStack.EMPTY);
            if (v != FreeStack.EMPTY) {
                HITS.setOpaque(this, (long) HITS.getOpaque(this) + 1);
                return v;
            }
        }
        return FreeStack.EMPTY;
    }

    /** Owner: caches {@code index}; false when full (the caller frees it to the shared list). */
    boolean push(int index) {
        if (top == slots.length) {
            return false;
        }
        SLOTS.setRelease(slots, top++, index);
        return true;
    }

    /** Any thread: takes some cached index, or EMPTY. */
    int steal() {
        for (int i = slots.length - 1; i >= 0; i--) {
            if ((int) SLOTS.getVolatile(slots, i) != FreeStack.EMPTY) {
                int v = (int) SLOTS.getAndSet(slots, i, FreeStack.EMPTY);
                if (v != FreeStack.EMPTY) {
                    return v;
                }
            }
        }
        return FreeStack.EMPTY;
    }

    /** Leases served from this cache. */
    long hits() {
        return (long) HITS.getOpaque(this);
    }

    /** Whether the owning thread is gone (its cache may be drained by anyone). */
    boolean ownerDead() {
        Thread t = owner.get();
        return t == null || !t.isAlive();
    }
}
