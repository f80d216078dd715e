package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.MemoryRegion;

/**
 * What a {@link BufferPool} owns natively, its open/closed state, and the one order in which it
 * is given back, whoever gives it back ({@link BufferPool#close()}, the {@link java.lang.ref.Cleaner}
 * of a pool dropped unclosed, or the close of a caller's arena the pool's memory is bounded by):
 *
 * <ol>
 *   <li>the view arena closes: every {@link PooledBuffer#segment()} dies, so the CPU can no
 *       longer touch the memory through the pool;</li>
 *   <li>each region is deregistered ({@code ibv_dereg_mr}): the device can no longer touch it
 *       (work still posted completes with an error instead of writing);</li>
 *   <li>only then is each allocation freed, and only when its region was deregistered: memory
 *       whose deregistration failed is kept (leaked, and logged), never freed while registered.</li>
 * </ol>
 *
 * It is the Cleaner's state, so it must never reference the pool or its buffers (which reference
 * the pool). Thread-safe: the state word is changed by CAS only; the release runs once.
 */
final class PoolResources implements Runnable {
    /**
     * OPEN; CLOSING: a close() is deciding (it ends in OPEN when refused, or goes on); RELEASING:
     * a close that can no longer be refused is giving the resources back; CLOSED.
     */
    static final int OPEN = 0, CLOSING = 1, CLOSED = 2, RELEASING = 3;

    private static final Logger LOG = LoggerFactory.getLogger(PoolResources.class);
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(PoolResources.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final String name;
    /** Scopes every buffer's segment: closed first, so no segment reads freed memory. */
    final Arena views;
    /** The per-lease views of the safe mode (null with shared flyweights): closed with {@link #views}. */
    private final LeaseViews leaseViews;
    /** regions.get(i) registers allocations.get(i). */
    private final List<MemoryRegion> regions;

    private final List<RegionAllocator.Allocation> allocations;
    /** The pool's slot state words (to count leases in a leak report); not the pool. */
    private final long[] states;

    private final int stateShift;
    private final Throwable buildSite;
    private final Consumer<String> observer;
    /** OPEN, CLOSING (a close() deciding) or CLOSED. Read on every lease. */
    volatile int state;
    /** Why the pool is closed, for messages. */
    volatile String closedBy;

    PoolResources(
            String name,
            Arena views,
            LeaseViews leaseViews,
            List<MemoryRegion> regions,
            List<RegionAllocator.Allocation> allocations,
            long[] states,
            int stateShift,
            Throwable buildSite,
            Consumer<String> observer) {
        this.name = name;
        this.views = views;
        this.leaseViews = leaseViews;
        this.regions = regions;
        this.allocations = allocations;
        this.states = states;
        this.stateShift = stateShift;
        this.buildSite = buildSite;
        this.observer = observer;
    }

    boolean isOpen() {
        return state == OPEN;
    }

    /**
     * Whether the pool is open once a close() that is deciding has decided: a refused close
     * leaves the pool open and what raced it goes on; only a close that goes ahead ends it.
     */
    boolean awaitOpen() {
        while (true) {
            int s = state;
            if (s == OPEN) {
                return true;
            }
            if (s != CLOSING) {
                return false;
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    /** Whether a close that can no longer be refused is under way or done. */
    boolean isEnding() {
        int s = state;
        return s == RELEASING || s == CLOSED;
    }

    /** close(): OPEN to CLOSING; returns the state it found. */
    int beginClose() {
        return (int) STATE.compareAndExchange(this, OPEN, CLOSING);
    }

    /** close() refused: back to OPEN. */
    void abortClose() {
        STATE.setVolatile(this, OPEN);
    }

    /** The Cleaner: the pool became unreachable. Reclaims (and reports) unless it was closed. */
    @Override
    public void run() {
        if (!claimForRelease()) {
            return;
        }
        int leased = countLeased();
        LOG.warn(
                "verbs4j pool leak: pool '{}' was never closed{}; deregistering its {} region(s) and then freeing "
                        + "their memory from the cleaner (close pools explicitly, with try-with-resources, after their "
                        + "work completed)",
                name,
                leased == 0 ? "" : " (with " + leased + " buffer(s) still leased)",
                regions.size(),
                buildSite);
        endLeases();
        release("it was dropped without close() and reclaimed by the cleaner", false);
    }

    /** The caller's arena the pool's memory is bounded by was closed. */
    void arenaClosed() {
        if (!claimForRelease()) {
            return;
        }
        int leased = countLeased();
        if (leased > 0) {
            LOG.warn(
                    "verbs4j pool '{}': the arena its memory is bounded by was closed with {} buffer(s) still "
                            + "leased; deregistering and freeing it now: those leases are dead (close the pool before "
                            + "its arena)",
                    name,
                    leased);
        } else {
            LOG.debug("verbs4j pool '{}': its arena was closed; deregistering and freeing its memory", name);
        }
        endLeases();
        release("the arena its memory is bounded by (RegionAllocator.of(arena)) was closed", false);
    }

    /**
     * A release nobody could refuse: the leases still held end with the pool. Each goes from
     * LEASED to LEAKED (quarantined, never leased again), so that its release is refused rather
     * than accepted by a pool that no longer has the memory.
     */
    private void endLeases() {
        for (int i = 0; i < states.length; i += 1 << stateShift) {
            while (true) {
                long s = (long) BufferPool.STATES.getVolatile(states, i);
                if ((s & BufferPool.STATE_BITS) != BufferPool.LEASED
                        || BufferPool.STATES.compareAndSet(states, i, s, s - BufferPool.LEASED + BufferPool.LEAKED)) {
                    break;
                }
            }
        }
    }

    /** OPEN to CLOSED for a release nobody can refuse; waits out a close() that is deciding. */
    private boolean claimForRelease() {
        while (true) {
            int s = (int) STATE.compareAndExchange(this, OPEN, CLOSING);
            if (s == OPEN) {
                return true;
            }
            if (s == CLOSED || s == RELEASING) {
                return false;
            }
            Thread.onSpinWait(); // a close() is deciding; it ends in OPEN or goes on to CLOSED
            Thread.yield();
        }
    }

    private int countLeased() {
        int n = 0;
        for (int i = 0; i < states.length; i += 1 << stateShift) {
            if ((states[i] & BufferPool.STATE_BITS) != BufferPool.FREE) {
                n++;
            }
        }
        return n;
    }

    /**
     * From CLOSING: views, then deregistration, then memory. With {@code mayRefuse} (an explicit
     * close) a view arena held by a native call makes it throw and go back to OPEN; otherwise such
     * memory is deregistered but kept.
     *
     * @throws RuntimeException the first deregistration failure (the rest are suppressed), after
     *                          everything that could be released was
     */
    void release(String why, boolean mayRefuse) {
        boolean viewsClosed = leaseViews == null || leaseViews.closeAll();
        try {
            views.close();
            observe("views closed");
        } catch (IllegalStateException e) {
            if (mayRefuse) {
                abortClose();
                throw new org.verbs4j.VerbsException(
                        "BufferPool.close",
                        org.verbs4j.natives.Errno.EBUSY,
                        "pool '" + name + "' cannot close: a native call is using a buffer's " + "memory ("
                                + e.getMessage() + ")",
                        "close it after that call returned",
                        e);
            }
            viewsClosed = false;
            LOG.warn(
                    "verbs4j pool '{}': a native call is using a buffer's memory; deregistering it but not "
                            + "freeing it (leaked)",
                    name);
        }
        STATE.setVolatile(this, RELEASING); // from here on nothing can refuse the close
        closedBy = why;
        RuntimeException failure = null;
        boolean[] deregistered = new boolean[regions.size()];
        for (int r = regions.size() - 1; r >= 0; r--) {
            MemoryRegion region = regions.get(r);
            if (!region.isOpen()) { // someone closed it through pool.regions(): deregistered already
                deregistered[r] = true;
                observe("region " + r + " was already deregistered");
                LOG.warn(
                        "verbs4j pool '{}': region {} was closed by someone else (pool.regions() are the pool's: "
                                + "do not close them)",
                        name,
                        r);
                continue;
            }
            try {
                region.close();
                deregistered[r] = true;
                observe("deregistered region " + r);
            } catch (RuntimeException e) {
                observe("deregistration failed: region " + r);
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        for (int a = allocations.size() - 1; a >= 0; a--) {
            RegionAllocator.Allocation al = allocations.get(a);
            al.revoke = null;
            if (viewsClosed && (a >= deregistered.length || deregistered[a])) {
                try {
                    al.close();
                    observe("freed allocation " + a);
                } catch (RuntimeException e) {
                    LOG.warn("verbs4j pool '{}': freeing region {} failed: {}", name, a, e.toString());
                }
            } else {
                observe("kept allocation " + a);
                LOG.warn(
                        "verbs4j pool '{}': region {} is not freed (it may still be registered or in use): "
                                + "its memory is leaked rather than freed under the device",
                        name,
                        a);
            }
        }
        STATE.setVolatile(this, CLOSED);
        if (failure != null) {
            throw failure;
        }
    }

    private void observe(String event) {
        if (observer != null) {
            observer.accept(event);
        }
    }
}
