package org.verbs4j;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The guard of one single-threaded data-path operation of one native object (a queue pair's send
 * side, its receive side, a shared receive queue, a completion queue's poller): a post or poll
 * enters it with one compare-and-set and leaves it with a release store; {@link #close} waits
 * until no operation is inside and then keeps every later one out, so that the native object is
 * destroyed only when no thread can be inside the provider with it. Breaking the one-thread rule
 * (two pollers of one CQ) meets a {@link ResourceBusyException} instead of a corrupted queue.
 *
 * <p>Cost: one uncontended CAS per operation (measured in docs/memory-safety.md). Thread-safe.
 */
final class Gate {
    static final int IDLE = 0, BUSY = 1, CLOSED = 2;
    /** The longest a close waits for an operation to leave (a post or poll takes microseconds). */
    private static final long CLOSE_WAIT_NANOS = 10_000_000_000L;

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(Gate.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("unused") // through STATE
    private volatile int state;

    /** Enters for one operation; false when closed or another thread is inside. */
    boolean tryEnter() {
        return STATE.compareAndSet(this, IDLE, BUSY);
    }

    /** Leaves after the operation. */
    void exit() {
        STATE.setRelease(this, IDLE);
    }

    boolean isClosed() {
        return state == CLOSED;
    }

    /** Why {@link #tryEnter} failed, for {@code verb} on {@code owner}. */
    VerbsException refusal(String verb, NativeResource owner, String what) {
        if (state == CLOSED) {
            return owner.closedException(verb);
        }
        return new ResourceBusyException(
                verb,
                "another thread is " + what + " this " + owner.kind() + " right now",
                "one thread at a time may " + what + " a " + owner.kind() + " (as in C); hand the work to that thread, "
                        + "or use one queue per thread");
    }

    /**
     * Waits (bounded) until no operation is inside, then closes: every later {@link #tryEnter}
     * fails. Returns false if an operation stayed inside for the whole bound.
     */
    boolean close() {
        long deadline = System.nanoTime() + CLOSE_WAIT_NANOS;
        int spins = 0;
        while (!STATE.compareAndSet(this, IDLE, CLOSED)) {
            if (state == CLOSED) {
                return true;
            }
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            if (++spins < 1000) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        return true;
    }

    /** Undoes {@link #close} when the destroy that followed it failed. */
    void reopen() {
        STATE.setVolatile(this, IDLE);
    }

    /**
     * Waits (bounded) until no operation is inside right now; operations that enter later see
     * whatever the caller published before calling this (the CAS in {@link #tryEnter} is a full
     * fence). Used before a shared object (region, address handle) is destroyed.
     */
    void awaitQuiescent() {
        long deadline = System.nanoTime() + CLOSE_WAIT_NANOS;
        int spins = 0;
        while (state == BUSY && System.nanoTime() - deadline < 0) {
            if (++spins < 1000) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }
}
