package org.verbs4j.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;
import org.verbs4j.CompletionChannel;
import org.verbs4j.CompletionQueue;
import org.verbs4j.natives.LibC;

/**
 * What an event loop of another verbs4j module blocks in: {@code poll(2)} on one fd (a completion
 * channel's) and an {@code eventfd(2)} that {@link #wake()} signals from any thread. Owned by one
 * loop thread, which alone calls {@link #await} and {@link #close()}; {@link #wake()} is
 * thread-safe. Allocates nothing per wait. Not API.
 */
public final class LoopWaiter implements AutoCloseable {
    private final int wakeFd;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment pollFds = arena.allocate(LibC.POLLFD_PAIR_SIZE, 8);
    private final MemorySegment drain = arena.allocate(8, 8);
    private final MemorySegment cqOut = arena.allocate(8, 8), ctxOut = arena.allocate(8, 8);
    private final MemorySegment epollEvent = arena.allocate(FdReadiness.SCRATCH_SIZE, 8);
    private final CoreAccess core = CoreAccess.get();
    // the wake-ups writing the event fd now, with the sign bit (CLOSED) once close() began: it
    // waits for none in flight, so no write ever meets the fd closed, or its number reused by
    // another owner's file
    private final AtomicInteger wakers = new AtomicInteger();
    private static final int CLOSED = Integer.MIN_VALUE;

    /** A waiter with a new event fd ({@code verb} names the caller in errors). */
    public LoopWaiter(String verb) {
        this.wakeFd = LibC.eventFd(verb, LibC.O_NONBLOCK | LibC.EFD_CLOEXEC);
    }

    /**
     * Waits until {@code fd} is readable (negative: no fd, only the wake-up and the time), {@link
     * #wake()} was called (since the last wait that it ended), or {@code timeoutMillis} passed
     * (negative: no bound), whichever comes first; the caller then reads what is ready.
     *
     * @return how the wait ended ({@link Outcome#WOKEN} when woken, {@code fd} perhaps readable too)
     */
    public Outcome await(String verb, int fd, long timeoutMillis) {
        int r = LibC.pollReadableOrWoken(verb, fd, wakeFd, timeoutMillis, pollFds);
        if (r == LibC.WOKEN) {
            LibC.drainEventFd(verb, wakeFd, drain);
            return Outcome.WOKEN;
        }
        return r == LibC.READABLE ? Outcome.READABLE : Outcome.TIMED_OUT;
    }

    /** How an {@link #await} ended. */
    public enum Outcome {
        /** The fd became readable. */
        READABLE,
        /** {@link #wake()} was called. */
        WOKEN,
        /** The timeout passed. */
        TIMED_OUT
    }

    /**
     * The next completion event already queued on {@code channel} (the CQ that raised it, to be
     * re-armed and polled), or null at once; by the loop thread, after {@link #await}. Allocates
     * nothing when none is queued.
     *
     * @throws org.verbs4j.ResourceClosedException when the channel is closed
     */
    public CompletionQueue nextEvent(CompletionChannel channel) {
        return core.nextEvent(channel, cqOut, ctxOut, epollEvent);
    }

    /** Makes the current or next {@link #await} return; any thread; nothing once closed. */
    public void wake() {
        int n;
        do {
            n = wakers.get();
            if (n < 0) {
                return;
            }
        } while (!wakers.compareAndSet(n, n + 1));
        try {
            LibC.signalEventFd("eventfd write", wakeFd);
        } finally {
            wakers.decrementAndGet();
        }
    }

    /**
     * Closes the event fd, once the wake-ups writing it now have written (a few microseconds; new
     * ones are refused first, so a stream of them cannot hold it off); by the loop thread, once it
     * no longer waits.
     */
    @Override
    public void close() {
        if (wakers.getAndUpdate(n -> n | CLOSED) < 0) {
            return;
        }
        while (wakers.get() != CLOSED) {
            Thread.onSpinWait();
        }
        LibC.close(wakeFd);
        arena.close();
    }
}
