package org.verbs4j.cm;

import java.util.concurrent.LinkedBlockingQueue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The wall time of each connection-setup step (a librdmacm or verbs call, a wait for the
 * channel's lock, the handling of one event), logged at debug level by the logger
 * {@code org.verbs4j.cm.SetupTimings}: "step NAME US us on THREAD"; and how long after a
 * setup's deadline each step of its timeout ran ("after the deadline: NAME US us on THREAD"). Off
 * (one check per step) unless that logger is at debug: a profile of where setup time goes, as
 * cmtime prints its own. The lines are written by a thread of their own, never by the thread
 * measured: a hundred threads timing out together would otherwise queue on the log's stream
 * (a slow pipe) and be measured late because they were measured.
 */
final class SetupTimings {
    private static final Logger LOG = LoggerFactory.getLogger(SetupTimings.class);

    private SetupTimings() {}

    /** The lines to log, when the timings are on (made on first use). */
    private static final class Lines {
        static final LinkedBlockingQueue<String> QUEUE = new LinkedBlockingQueue<>();

        static {
            Thread.ofPlatform().daemon().name("verbs4j-cm-setup-timings").start(() -> {
                while (true) {
                    try {
                        LOG.debug(QUEUE.take());
                    } catch (InterruptedException e) {
                        // nobody interrupts this thread: it logs for the JVM's life
                    }
                }
            });
        }
    }

    /** A start time for {@link #done}, or 0 when the timings are off. */
    static long start() {
        return LOG.isDebugEnabled() ? System.nanoTime() : 0;
    }

    /** Logs the time since {@code t0} (from {@link #start}) as step {@code step}; nothing when 0. */
    static void done(String step, long t0) {
        if (t0 != 0) {
            Lines.QUEUE.add("step " + step + " " + (System.nanoTime() - t0) / 1000 + " us on "
                    + Thread.currentThread().getName());
        }
    }

    /**
     * Logs how long after {@code deadline} (a {@link System#nanoTime} value) step {@code step} ran;
     * nothing before it. Built without string concatenation (its sites are linked on their first
     * run, by each thread running them then: a hundred setups timed out at once in a fresh JVM).
     */
    static void late(String step, long deadline) {
        if (LOG.isDebugEnabled()) {
            long late = System.nanoTime() - deadline;
            if (late >= 0) {
                Lines.QUEUE.add(new StringBuilder("after the deadline: ")
                        .append(step)
                        .append(' ')
                        .append(late / 1000)
                        .append(" us on ")
                        .append(Thread.currentThread().getName())
                        .toString());
            }
        }
    }

    /** Starts the logging thread now when the timings are on (not at the first deadline). */
    static void warmUp() {
        if (LOG.isDebugEnabled()) {
            Lines.QUEUE.size();
        }
    }
}
