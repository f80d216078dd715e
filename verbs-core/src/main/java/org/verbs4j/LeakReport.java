package org.verbs4j;

import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reports an object that became unreachable without {@code close()} (a work-request chain, a
 * completion array, a connection-manager object), with a warning naming what it was (and where it
 * was created, with {@code -Dverbs4j.leakSites=true}: a stack trace per object costs tens of
 * microseconds, too much for a connection setup's path).
 * Without a release action its memory is freed by its own automatic arena and this only makes the
 * leak visible, as the rest of verbs4j does; with one (the connection manager's cm ids and event
 * channels, through {@code CoreAccess.reportLeaks}) the action runs on the cleaner's thread after
 * the warning. Thread-safe.
 */
final class LeakReport {
    private static final Logger LOG = LoggerFactory.getLogger(LeakReport.class);
    private static final Cleaner CLEANER = Cleaner.create();
    private static final boolean SITES =
            Boolean.parseBoolean(System.getProperty(NativeResource.LEAK_SITES_PROPERTY, "false"));
    private static final AtomicLong LEAKS = new AtomicLong();

    private final State state;

    private static final class State implements Runnable {
        final String kind;
        final Throwable site;
        final Runnable release;
        volatile boolean closed;

        State(String kind, Throwable site, Runnable release) {
            this.kind = kind;
            this.site = site;
            this.release = release;
        }

        @Override
        public void run() {
            if (!closed) {
                LEAKS.incrementAndGet();
                LOG.warn(
                        "verbs4j leak: a {} was never closed; {}{}",
                        kind,
                        release == null ? "its native memory is freed with it" : "releasing it from the cleaner",
                        site == null
                                ? " (run with -D" + NativeResource.LEAK_SITES_PROPERTY
                                        + "=true to see where it was created)"
                                : "",
                        site);
                if (release != null) {
                    try {
                        release.run();
                    } catch (RuntimeException | Error e) { // the cleaner would swallow it silently
                        LOG.warn("verbs4j: releasing a leaked {} failed: {}", kind, e.toString(), e);
                    }
                }
            }
        }
    }

    LeakReport(Object owner, String kind) {
        this(owner, kind, null);
    }

    /**
     * @param release run by the cleaner after the warning when the owner was never closed, or
     *                null; it must not reference the owner (or it never becomes unreachable)
     */
    LeakReport(Object owner, String kind, Runnable release) {
        this.state = new State(kind, SITES ? new Throwable(kind + " created here") : null, release);
        CLEANER.register(owner, state);
    }

    /** Whether the creation's stack trace was recorded ({@code -Dverbs4j.leakSites=true}). */
    boolean recordedSite() {
        return state.site != null;
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
