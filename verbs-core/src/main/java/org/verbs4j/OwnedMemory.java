package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Cleaner;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Native memory owned by one Java object (a work-request chain, a completion array, a queue
 * pair's scratch slots): a shared arena freed by {@link #close()}, or, with a warning naming
 * where the owner was created, by a {@link Cleaner} when the owner was dropped unclosed.
 * Leaks are reported, not hidden. {@link #close()} is called by the owner, once.
 */
final class OwnedMemory {
    private static final Logger LOG = LoggerFactory.getLogger(OwnedMemory.class);
    private static final Cleaner CLEANER = Cleaner.create();
    private static final boolean LEAK_SITES =
            Boolean.parseBoolean(System.getProperty(NativeResource.LEAK_SITES_PROPERTY, "true"));

    private static final java.util.concurrent.atomic.AtomicLong LEAKS = new java.util.concurrent.atomic.AtomicLong();
    private final State state;
    private final Cleaner.Cleanable cleanable;

    private static final class State implements Runnable {
        final Arena arena = Arena.ofShared();
        final String kind;
        final Throwable site;
        final boolean report;
        volatile boolean explicit;

        State(String kind, Throwable site, boolean report) {
            this.kind = kind;
            this.site = site;
            this.report = report;
        }

        @Override
        public void run() {
            if (!explicit && report) {
                LEAKS.incrementAndGet();
                LOG.warn("verbs4j leak: a {} was never closed; freeing its native memory from the cleaner{}", kind,
                        site == null ? " (run with -D" + NativeResource.LEAK_SITES_PROPERTY + "=true to see where it was created)"
                                : "", site);
            }
            arena.close();
        }
    }

    /** Memory owned by {@code owner}, described as {@code kind} in leak reports. */
    OwnedMemory(Object owner, String kind) {
        this(owner, kind, true);
    }

    /**
     * @param report whether a leak is reported here (false where the owner is a
     *               {@link NativeResource} that reports its own leak)
     */
    OwnedMemory(Object owner, String kind, boolean report) {
        this.state = new State(kind, report && LEAK_SITES ? new Throwable(kind + " created here") : null, report);
        this.cleanable = CLEANER.register(owner, state);
    }

    /** How many unclosed owners the cleaner has released and reported so far. */
    static long leaksReported() {
        return LEAKS.get();
    }

    MemorySegment allocate(long size, long alignment) {
        return state.arena.allocate(size, alignment);
    }

    /** Frees the memory now. */
    void close() {
        state.explicit = true;
        cleanable.clean();
    }
}
