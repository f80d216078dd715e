package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;

/**
 * A completion channel ({@code struct ibv_comp_channel}): a file descriptor that becomes readable
 * when a completion queue armed with {@link CompletionQueue#requestNotify} gets a completion.
 *
 * <p>{@link #awaitEvent} waits with a timeout (never forever) and acknowledges events in
 * batches; the rest are acknowledged when the CQ closes (destroying a CQ with unacknowledged
 * events would block forever). Owned by its {@link Context}; owns the channel and an eventfd
 * that wakes waiters at close. The channel fd is made non-blocking, so any number of threads may
 * wait at once and each returns by its deadline (one gets the event, the others keep waiting).
 * {@link #close()} may race with waiters: they throw EBADF, and the channel is destroyed only
 * after they left.
 */
public final class CompletionChannel extends NativeResource {
    private static final Logger LOG = LoggerFactory.getLogger(CompletionChannel.class);
    private static final long CLOSE_WAIT_MILLIS = 30_000;

    private final int fd;
    // weak: a CQ dropped without close must stay collectable (its cleaner holds this channel)
    private final Map<Long, java.lang.ref.WeakReference<CompletionQueue>> queues = new ConcurrentHashMap<>();
    private final Gate gate;

    CompletionChannel(Context context, MemorySegment channel) {
        this(context, channel, LibIbverbs::destroyCompChannel);
    }

    /** @param destroy releases the channel (a test passes one that releases nothing) */
    CompletionChannel(Context context, MemorySegment channel, Destroyer destroy) {
        this(
                context,
                channel.reinterpret(16),
                destroy,
                new Gate(channel.reinterpret(16).get(JAVA_INT, ObjectLayout.COMP_CHANNEL_FD)));
    }

    private CompletionChannel(Context context, MemorySegment channel, Destroyer destroy, Gate gate) {
        super(context, "completion channel", "ibv_destroy_comp_channel", channel, gate.closeThen(destroy), null);
        this.fd = gate.fd;
        this.gate = gate;
    }

    /**
     * Waiters share the read lock; close takes the write lock after waking them, so it destroys
     * the channel only once no waiter polls its fd or reads from it. Never references the channel
     * object (it is part of the release, which must not).
     */
    private static final class Gate {
        final int fd;
        final ReentrantReadWriteLock waiters = new ReentrantReadWriteLock();
        /** Serialises a waiter's CQ lookup and ack counting with a CQ's detach. */
        final ReentrantLock acks = new ReentrantLock();

        volatile int wakeFd;
        volatile boolean closed;

        Gate(int fd) {
            this.fd = fd;
            LibC.setNonBlocking("ibv_create_comp_channel", fd);
            this.wakeFd = LibC.eventFd("ibv_create_comp_channel", LibC.O_NONBLOCK | LibC.EFD_CLOEXEC);
        }

        Destroyer closeThen(Destroyer destroy) {
            return h -> {
                closed = true;
                LibC.signalEventFd("ibv_destroy_comp_channel", wakeFd);
                if (!lockForClose()) { // the woken waiters leave at once, unless one is stuck in a blocking read
                    reopen();
                    throw VerbsException.create(
                            "ibv_destroy_comp_channel",
                            Errno.EBUSY,
                            "a thread waiting in awaitEvent " + "did not leave within " + CLOSE_WAIT_MILLIS
                                    + " ms; the channel was not destroyed",
                            "do not make the channel's fd blocking again (fcntl) while threads wait on it");
                }
                try {
                    destroy.destroy(h);
                } catch (RuntimeException e) {
                    reopen();
                    throw e;
                } finally {
                    waiters.writeLock().unlock();
                }
                LibC.close(wakeFd);
            };
        }

        private boolean lockForClose() {
            boolean interrupted = false;
            long deadline = System.nanoTime() + CLOSE_WAIT_MILLIS * 1_000_000L;
            try {
                while (true) {
                    try {
                        return waiters.writeLock()
                                .tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                    } catch (InterruptedException e) {
                        interrupted = true;
                    }
                }
            } finally {
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        /** After a close that did not happen: open again, with a fresh (unsignalled) wake-up fd. */
        private void reopen() {
            LibC.close(wakeFd);
            wakeFd = LibC.eventFd("ibv_destroy_comp_channel", LibC.O_NONBLOCK | LibC.EFD_CLOEXEC);
            closed = false;
        }
    }

    /** How many threads are inside {@link #awaitEvent} past its entry (for tests). */
    int waiters() {
        return gate.waiters.getReadLockCount();
    }

    /** The file descriptor, for an external event loop (non-blocking). */
    public int fd() {
        return fd;
    }

    void attach(CompletionQueue cq) {
        queues.put(cq.address, new java.lang.ref.WeakReference<>(cq));
    }

    /** After this returns, no waiter counts an event for {@code cq} (later ones are acknowledged at once). */
    void detach(CompletionQueue cq) {
        gate.acks.lock();
        try {
            queues.remove(cq.address);
        } finally {
            gate.acks.unlock();
        }
    }

    /**
     * Waits up to {@code timeout} for the next completion event ({@code ibv_get_cq_event}) and
     * returns the CQ that raised it, or null on timeout. The CQ must be re-armed with
     * {@link CompletionQueue#requestNotify} and then polled, in that order, to miss nothing.
     * Any number of threads may wait; each returns by its deadline. An interrupt ends the wait
     * early (null, with the interrupt status kept).
     *
     * @throws VerbsException EBADF when the channel is closed, also while waiting
     */
    public CompletionQueue awaitEvent(Duration timeout) {
        ensureOpen("ibv_get_cq_event");
        long deadline = System.nanoTime() + Math.max(0, timeout.toNanos());
        try (Arena arena = Arena.ofConfined()) {
            return awaitEventUntil(deadline, arena.allocate(SCRATCH_SIZE, 8));
        }
    }

    /** The scratch memory {@link #awaitEventUntil} needs: the two out-pointers and two {@code struct pollfd}. */
    static final long SCRATCH_SIZE = 16 + LibC.POLLFD_PAIR_SIZE;

    /**
     * {@link #awaitEvent} until {@code deadline} ({@link System#nanoTime()}) with the caller's
     * scratch memory ({@link #SCRATCH_SIZE} bytes, 8-aligned, one thread at a time): allocates
     * nothing on its way to an event.
     */
    CompletionQueue awaitEventUntil(long deadline, MemorySegment scratch) {
        try {
            if (!gate.waiters.readLock().tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                return null;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
        try {
            MemorySegment cqOut = scratch.asSlice(0, ADDRESS.byteSize());
            MemorySegment ctxOut = scratch.asSlice(8, ADDRESS.byteSize());
            MemorySegment pollFds = scratch.asSlice(16, LibC.POLLFD_PAIR_SIZE);
            while (true) {
                if (gate.closed) {
                    throw closedException("ibv_get_cq_event");
                }
                long left = Math.max(0, (deadline - System.nanoTime() + 999_999L) / 1_000_000L);
                int r = LibC.pollReadableOrWoken("ibv_get_cq_event", fd, gate.wakeFd, left, pollFds);
                if (r == LibC.WOKEN) {
                    throw closedException("ibv_get_cq_event");
                }
                if (r == LibC.TIMED_OUT) {
                    return null;
                }
                int e = LibIbverbs.tryGetCqEvent(handle, cqOut, ctxOut);
                if (e == Errno.EAGAIN || e == Errno.EINTR) {
                    continue; // another waiter took it; poll again with the time left
                }
                if (e != 0) {
                    throw VerbsException.of("ibv_get_cq_event", e, "reading the completion channel failed");
                }
                MemorySegment cqPtr = cqOut.get(ADDRESS, 0);
                CompletionQueue cq;
                gate.acks.lock();
                try {
                    java.lang.ref.WeakReference<CompletionQueue> ref = queues.get(cqPtr.address());
                    cq = ref == null ? null : ref.get();
                    if (cq != null) {
                        cq.eventReceived();
                    } else {
                        LibIbverbs.ackCqEvents(cqPtr, 1); // a CQ closing right now
                    }
                } finally {
                    gate.acks.unlock();
                }
                if (cq != null) {
                    return cq;
                }
                LOG.debug(
                        "verbs4j: a completion event of a closing CQ 0x{} acknowledged and skipped",
                        Long.toHexString(cqPtr.address()));
            }
        } finally {
            gate.waiters.readLock().unlock();
        }
    }

    @Override
    String describe() {
        return "CompletionChannel on " + device() + ", fd " + fd;
    }
}
