package org.verbs4j;

import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reports an object that became unreachable without {@code close()} (a work-request chain, a
 * completion array), with a warning naming where it was created. Its memory is freed by its own
 * automatic arena; this only makes the leak visible, as the rest of verbs4j does. Thread-safe.
 */
final class LeakReport {
    private static final Logger LOG = LoggerFactory.getLogger(LeakReport.class);
    private static final Cleaner CLEANER = Cleaner.create();
    private static final boolean SITES = Boolean.parseBoolean(System.getProperty(NativeResource.LEAK_SITES_PROPERTY, "true"));
    private static final AtomicLong LEAKS = new AtomicLong();

    private final State state;

    private static final class State implements Runnable {
        final String kind;
        final Throwable site;
        volatile boolean closed;

        State(String kind, Throwable site) {
            this.kind = kind;
            this.site = site;
        }

        @Override
        public void run() {
            if (!closed) {
                LEAKS.incrementAndGet();
                LOG.warn("verbs4j leak: a {} was never closed; its native memory is freed with it{}", kind,
                        site == null ? " (run with -D" + NativeResource.LEAK_SITES_PROPERTY + "=true to see where it was created)" : "",
                        site);
            }
        }
    }

    LeakReport(Object owner, String kind) {
        this.state = new State(kind, SITES ? new Throwable(kind + " created here") : null);
        CLEANER.register(owner, state);
    }

    /** The owner was closed: no report. */
    void closed() {
        state.closed = true;
    }

    /** How many unclosed owners were reported so far. */
    static long leaksReported() {
        return LEAKS.get();
    }
}
