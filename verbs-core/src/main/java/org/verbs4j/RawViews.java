package org.verbs4j;

import java.lang.foreign.Arena;

/**
 * The arena of the raw views that an object's {@code segment()} hands out: made on first use,
 * closed with the object, so that no view stays usable after it. Guarded by a private lock (never
 * the public object's monitor). Thread-safe.
 */
final class RawViews {
    private final Object lock = new Object();
    private Arena arena;
    private boolean closed;

    /** The arena, made on first use. @throws IllegalStateException once {@link #close} ran */
    Arena arena() {
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("closed");
            }
            if (arena == null) {
                arena = Arena.ofShared();
            }
            return arena;
        }
    }

    /** Closes the arena (every view dies); later {@link #arena} calls throw. */
    void close() {
        synchronized (lock) {
            closed = true;
            if (arena != null) {
                arena.close();
            }
        }
    }
}
