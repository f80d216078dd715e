package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The safe mode's per-lease segments: the first {@link PooledBuffer#segment()} of a lease makes a
 * view of the buffer in an arena of that lease alone, and the lease's release closes it, so a
 * segment kept past its lease throws instead of writing into the next holder's buffer. One slot
 * per buffer, each holding the view of its current lease (or null). Holds no reference to the
 * pool (it is part of the pool's Cleaner state). Thread-safe: every change is one CAS.
 */
final class LeaseViews {
    /** How long a release waits for a native call that is using the lease's view to return. */
    private static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

    private static final VarHandle VIEWS = MethodHandles.arrayElementVarHandle(View[].class);

    /** The view of one lease: its token, its arena and the segment in it. */
    private record View(long token, Arena arena, MemorySegment segment) {}

    private final View[] views;

    LeaseViews(int buffers) {
        this.views = new View[buffers];
    }

    /**
     * The view of lease {@code token} of {@code slot} over {@code memory} (the slot's pool-scoped
     * segment), made on first use; null when that lease is not current (any more).
     */
    MemorySegment segment(BufferPool pool, int slot, long token, MemorySegment memory) {
        while (true) {
            View v = (View) VIEWS.getVolatile(views, slot);
            if (v != null && v.token == token) {
                return v.segment;
            }
            if (!pool.isCurrent(token)) {
                return null;
            }
            if (v != null) { // a view an earlier lease left behind in a race with its release
                if (VIEWS.compareAndSet(views, slot, v, null)) {
                    close(v);
                }
                continue;
            }
            Arena arena = Arena.ofShared();
            View mine = new View(token, arena, memory.reinterpret(arena, null));
            if (!VIEWS.compareAndSet(views, slot, null, mine)) {
                arena.close();
                continue;
            }
            // the release of this lease may have run between the check and the CAS: then it did
            // not see this view, and the view must not outlive the lease
            if (!pool.isCurrent(token)) {
                if (VIEWS.compareAndSet(views, slot, mine, null)) {
                    arena.close();
                }
                return null;
            }
            return mine.segment;
        }
    }

    /**
     * Closes the view of {@code slot}'s lease, which just ended (its state word left LEASED).
     *
     * @return false when a native call kept using the view for the whole wait (the memory must
     *     then not be handed to anyone else)
     */
    boolean retire(int slot) {
        View v = (View) VIEWS.getAndSet(views, slot, (View) null);
        return v == null || close(v);
    }

    /** The pool's resources are released: closes every view; false when one could not be. */
    boolean closeAll() {
        boolean all = true;
        for (int s = 0; s < views.length; s++) {
            all &= retire(s);
        }
        return all;
    }

    private static boolean close(View v) {
        long deadline = System.nanoTime() + CLOSE_WAIT_NANOS;
        while (true) {
            try {
                v.arena.close();
                return true;
            } catch (IllegalStateException acquired) { // a native call is using the segment
                if (!v.arena.scope().isAlive()) {
                    return true;
                }
                if (System.nanoTime() - deadline > 0) {
                    return false;
                }
                LockSupport.parkNanos(100_000L);
            }
        }
    }
}
