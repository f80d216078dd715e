package org.verbs4j.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;

/**
 * One size class of a {@link BufferPool}: its slots {@code [base, base + count)}, its shared free
 * list, the thread caches over it and the threads waiting for one of its buffers. Any thread.
 */
final class SizeClass {
    static final ThreadCache[] NO_CACHES = new ThreadCache[0];
    private static final VarHandle WAITING;

    static {
        try {
            WAITING = MethodHandles.lookup().findVarHandle(SizeClass.class, "waiting", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final int index;
    final int size;
    final int count;
    final int base;
    final FreeStack shared;
    /** Every live thread's cache of this class (replaced under the pool's {@link ThreadCaches} lock). */
    volatile ThreadCache[] caches = NO_CACHES;

    @SuppressWarnings("unused") // through WAITING
    private volatile int waiting;

    private final ConcurrentLinkedQueue<Thread> waiters = new ConcurrentLinkedQueue<>();

    SizeClass(int index, int size, int count, int base) {
        this.index = index;
        this.size = size;
        this.count = count;
        this.base = base;
        this.shared = new FreeStack(count);
    }

    /** Any thread: an index from some thread's cache, or EMPTY. */
    int steal() {
        for (ThreadCache c : caches) {
            int v = c.steal();
            if (v != FreeStack.EMPTY) {
                return v;
            }
        }
        return FreeStack.EMPTY;
    }

    /** The calling thread waits for a buffer of this class (until {@link #stopWaiting}). */
    void startWaiting(Thread me) {
        waiters.add(me);
        WAITING.getAndAdd(this, 1);
    }

    void stopWaiting(Thread me) {
        WAITING.getAndAdd(this, -1);
        waiters.remove(me);
    }

    /** Whether a lease is waiting for this class (a release then goes to the shared list and wakes it). */
    boolean hasWaiters() {
        return (int) WAITING.getVolatile(this) != 0;
    }

    void wakeOne() {
        Thread t = waiters.peek();
        if (t != null) {
            LockSupport.unpark(t);
        }
    }
}
