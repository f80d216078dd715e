package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;

/**
 * Waits for completions on the hot path: polls the completion queue in a spin for up to a
 * spin budget, then arms it and blocks on its completion channel until an event (or the
 * deadline), then polls again. Spinning answers in the time of one poll when completions come
 * often; blocking gives the core back when they stop coming. A spin budget of zero blocks at
 * once (the lowest CPU use); {@code Long.MAX_VALUE} never blocks (a pure busy poll, bounded by
 * the timeout).
 *
 * <pre>{@code
 * CompletionChannel channel = ctx.createCompletionChannel();
 * CompletionQueue cq = ctx.createCompletionQueue(256, channel, 0);
 * CompletionWaiter waiter = new CompletionWaiter(cq, 20_000);   // spin 20 us, then block
 * try (WorkCompletions wcs = new WorkCompletions(16)) {
 *     while (running) {
 *         int n = waiter.await(wcs, 1, 1_000_000_000L);           // at least one, or 1 s passed
 *         for (int i = 0; i < n; i++) { ... wcs.wrId(i) ... }
 *     }
 * }
 * }</pre>
 *
 * <p>The spin path allocates nothing. The block path (system calls: {@code ibv_req_notify_cq},
 * {@code ibv_get_cq_event}, {@code epoll_ctl(2)} to arm the channel's fd) reuses the waiter's
 * scratch memory and allocates no native memory; on the Java heap at most a few short-lived
 * objects per block. A blocked wait parks the thread (see {@link CompletionChannel}): a virtual
 * thread unmounts from its carrier meanwhile. The
 * channel should report this CQ only: an event of another CQ on it wakes this waiter and is
 * consumed here (it still counts as an event, and that CQ's own waiter would not see it).
 *
 * <p>Thread rules: a waiter belongs to the one thread that polls the CQ (as polling does); a
 * second thread calling {@link #await} at the same moment, or polling the CQ, gets a
 * {@link ResourceBusyException} from the CQ's poll gate. Interruptible: an interrupt ends a
 * wait, spinning or blocked, at once with a {@link VerbsException} (EINTR) and the interrupt
 * status kept. It holds nothing
 * native of its own beyond a few bytes of scratch memory freed with it; closing the CQ or the
 * channel makes the next wait throw EBADF.
 */
public final class CompletionWaiter {
    private final CompletionQueue cq;
    private final CompletionChannel channel;
    private final long spinNanos;
    /** The out-pointers and pollfds of the channel wait, reused by every block. */
    private final MemorySegment scratch = Arena.ofAuto().allocate(CompletionChannel.SCRATCH_SIZE, 8);

    private long events;
    private long blocks;

    /**
     * A waiter on {@code cq}, which must have a completion channel.
     *
     * @param spinNanos how long each wait polls before it blocks (0: block at once;
     *                  {@code Long.MAX_VALUE}: never block)
     */
    public CompletionWaiter(CompletionQueue cq, long spinNanos) {
        cq.ensureOpen("CompletionWaiter");
        if (cq.channel() == null) {
            throw new InvalidRequestException(
                    "ibv_req_notify_cq",
                    "the completion queue has no completion channel",
                    "create it with Context.createCompletionQueue(n, channel, vector)");
        }
        if (spinNanos < 0) {
            throw new InvalidRequestException("CompletionWaiter", "spinNanos must not be negative: " + spinNanos, null);
        }
        this.cq = cq;
        this.channel = cq.channel();
        this.spinNanos = spinNanos;
    }

    /**
     * {@link #await(WorkCompletions, int, long)} with a {@link Duration} (converting it allocates
     * nothing; a negative one counts as zero, a huge one saturates).
     */
    public int await(WorkCompletions wcs, int min, Duration timeout) {
        return await(wcs, min, Timeouts.nanos("CompletionWaiter.await", timeout));
    }

    /**
     * Reaps completions into {@code wcs} (appended after one another, from its first entry) until
     * it holds at least {@code min} or {@code timeoutNanos} passed, and returns how many it holds
     * (fewer than {@code min} only on timeout; it may hold more, up to its capacity). Blocks the
     * calling thread (a virtual one unmounts); a negative {@code timeoutNanos} counts as zero.
     *
     * @throws VerbsException EINTR when the thread is interrupted (its status stays set); EBADF
     *                        when the CQ or its channel closes; what {@link CompletionQueue#poll}
     *                        throws
     */
    public int await(WorkCompletions wcs, int min, long timeoutNanos) {
        cq.checkMin(wcs, min);
        long start = System.nanoTime();
        long deadline = start + Math.max(0, Math.min(Timeouts.FOREVER_NANOS, timeoutNanos));
        long spinUntil = spinNanos >= Long.MAX_VALUE - start ? Long.MAX_VALUE : start + spinNanos;
        int have = 0;
        wcs.count = 0;
        while (true) {
            have += cq.pollAppend(wcs, have);
            if (have >= min) {
                return have;
            }
            long now = System.nanoTime();
            if (now - deadline >= 0) {
                return have;
            }
            if (Thread.currentThread().isInterrupted()) {
                throw interrupted(have);
            }
            if (spinUntil == Long.MAX_VALUE || now - spinUntil < 0) {
                Thread.onSpinWait();
                continue;
            }
            // block: arm, then poll once more (a completion that came before the arming raises no event)
            cq.requestNotify(false);
            int n = cq.pollAppend(wcs, have);
            have += n;
            if (have >= min) {
                return have;
            }
            if (n > 0) {
                continue; // more may follow at once: poll again before arming
            }
            blocks++;
            CompletionQueue woke = channel.awaitEventUntil(deadline, scratch); // an interrupt unparks it
            if (woke != null) {
                events++;
            } else if (Thread.currentThread().isInterrupted()) {
                throw interrupted(have);
            }
        }
    }

    private VerbsException interrupted(int have) {
        return VerbsException.create(
                "ibv_get_cq_event",
                Errno.EINTR,
                "interrupted while waiting for completions (" + have + " reaped; they stay in the array)",
                "the interrupt status is kept");
    }

    /** How many times a wait blocked on the completion channel (owner thread). */
    public long blocks() {
        return blocks;
    }

    /** How many completion events woke a blocked wait (owner thread). */
    public long events() {
        return events;
    }

    /** The completion queue it waits on. */
    public CompletionQueue completionQueue() {
        return cq;
    }

    /** The spin budget of each wait, in nanoseconds. */
    public long spinNanos() {
        return spinNanos;
    }
}
