package org.verbs4j.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A lock-free LIFO of slot indices {@code [0, capacity)} (a Treiber stack over an int array).
 * The head packs a 32-bit ABA tag (bumped by every successful change) above the top index, so a
 * pop that read a stale {@code next} fails its CAS. Each index is in the stack at most once (the
 * pool guarantees it by its slot states). Allocation-free; any thread.
 *
 * <pre>
 *   head (long) = [ tag : 32 | top index : 32 ]      (top index -1 = empty)
 *   next[i]     = the index below i in the stack (-1 at the bottom)
 * </pre>
 */
final class FreeStack {
    static final int EMPTY = -1;
    private static final VarHandle HEAD, NEXT;

    static {
        try {
            HEAD = MethodHandles.lookup().findVarHandle(FreeStack.class, "head", long.class);
            NEXT = MethodHandles.arrayElementVarHandle(int[].class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int[] next;

    @SuppressWarnings("unused") // through HEAD
    private volatile long head;

    /** A stack holding every index of {@code [0, capacity)}, 0 on top. */
    FreeStack(int capacity) {
        next = new int[capacity];
        for (int i = 0; i < capacity; i++) {
            next[i] = i + 1 < capacity ? i + 1 : EMPTY;
        }
        head = pack(0, capacity == 0 ? EMPTY : 0);
    }

    private static long pack(long tag, int index) {
        return (tag << 32) | (index & 0xFFFF_FFFFL);
    }

    /** Takes the top index, or {@link #EMPTY}. */
    int pop() {
        while (true) {
            long h = (long) HEAD.getVolatile(this);
            int top = (int) h;
            if (top == EMPTY) {
                return EMPTY;
            }
            int below = (int) NEXT.getAcquire(next, top);
            if (HEAD.compareAndSet(this, h, pack((h >>> 32) + 1, below))) {
                return top;
            }
            Thread.onSpinWait();
        }
    }

    /** Puts {@code index} back (it must not be in the stack). */
    void push(int index) {
        while (true) {
            long h = (long) HEAD.getVolatile(this);
            NEXT.setRelease(next, index, (int) h);
            if (HEAD.compareAndSet(this, h, pack((h >>> 32) + 1, index))) {
                return;
            }
            Thread.onSpinWait();
        }
    }

    /** True when no index is in the stack (a racy snapshot). */
    boolean isEmpty() {
        return (int) (long) HEAD.getVolatile(this) == EMPTY;
    }
}
