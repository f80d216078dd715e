package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.internal.FdReadiness;
import org.verbs4j.internal.Timeouts;
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
 * events would block forever). Owned by its {@link Context}. The channel fd is made
 * non-blocking, so any number of threads may wait at once and each returns by its deadline (one
 * gets the event, the others keep waiting). A waiter does not block in native code: it parks
 * until the JVM's fd poller thread sees the fd readable ({@code epoll}), so a virtual thread
 * unmounts while it waits and an interrupt ends the wait at once. {@link #close()} may race with
 * waiters: it wakes them, they throw {@link ResourceClosedException}, and the channel is
 * destroyed only after they left.
 */
public final class CompletionChannel extends NativeResource {
    private static final Logger LOG = LoggerFactory.getLogger(CompletionChannel.class);
    private static final long CLOSE_WAIT_MILLIS = 30_000;

    private final int fd;
    // weak: a CQ dropped without close must stay collectable (its cleaner holds this channel);
    // read and changed only with gate.acks held
    private final CqTable queues = new CqTable();
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
     * the channel only once no waiter waits on its fd or reads from it. Never references the
     * channel object (it is part of the release, which must not).
     */
    private static final class Gate {
        final int fd;
        final ReentrantReadWriteLock waiters = new ReentrantReadWriteLock();
        /** Serialises a waiter's CQ lookup and ack counting with a CQ's detach. */
        final ReentrantLock acks = new ReentrantLock();

        volatile FdReadiness.Watch watch;
        volatile boolean closed;

        Gate(int fd) {
            this.fd = fd;
            LibC.setNonBlocking("ibv_create_comp_channel", fd);
            this.watch = FdReadiness.watch("ibv_create_comp_channel", fd);
        }

        Destroyer closeThen(Destroyer destroy) {
            return h -> {
                closed = true;
                watch.wakeAll();
                if (!lockForClose()) { // the woken waiters leave at once, unless one is stuck in a blocking read
                    closed = false;
                    throw VerbsException.create(
                            "ibv_destroy_comp_channel",
                            Errno.EBUSY,
                            "a thread waiting in awaitEvent did not leave within " + CLOSE_WAIT_MILLIS
                                    + " ms; the channel was not destroyed",
                            "do not make the channel's fd blocking again (fcntl) while threads wait on it");
                }
                try {
                    watch.close(); // before the fd closes
                    destroy.destroy(h);
                } catch (RuntimeException e) {
                    watch = FdReadiness.watch("ibv_destroy_comp_channel", fd);
                    closed = false;
                    throw e;
                } finally {
                    waiters.writeLock().unlock();
                }
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
        WeakReference<CompletionQueue> ref = new WeakReference<>(cq);
        gate.acks.lock();
        try {
            queues.put(cq.address, ref);
        } finally {
            gate.acks.unlock();
        }
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
     * Any number of threads may wait; each returns by its deadline. Blocks the calling thread
     * (a virtual one unmounts). Interruptible: an interrupt, before or during the wait, ends it
     * at once with null and the interrupt status kept (an event already there is returned
     * first). Any {@code timeout} is accepted: a negative one counts as zero, a huge one
     * saturates.
     *
     * @throws ResourceClosedException when the channel is closed, also while waiting
     */
    public CompletionQueue awaitEvent(Duration timeout) {
        ensureOpen("ibv_get_cq_event");
        long deadline = System.nanoTime() + Timeouts.nanos("ibv_get_cq_event", timeout);
        try (Arena arena = Arena.ofConfined()) {
            return awaitEventUntil(deadline, arena.allocate(SCRATCH_SIZE, 8));
        }
    }

    /** The scratch memory {@link #awaitEventUntil} needs: the two out-pointers and an {@code epoll_event}. */
    static final long SCRATCH_SIZE = 16 + FdReadiness.SCRATCH_SIZE;

    /**
     * {@link #awaitEvent} until {@code deadline} ({@link System#nanoTime()}) with the caller's
     * scratch memory ({@link #SCRATCH_SIZE} bytes, 8-aligned, one thread at a time): allocates no
     * native memory on its way to an event. Returns null on timeout or interrupt (the status kept).
     */
    CompletionQueue awaitEventUntil(long deadline, MemorySegment scratch) {
        return awaitEventUntil(
                deadline,
                scratch.asSlice(0, ADDRESS.byteSize()),
                scratch.asSlice(8, ADDRESS.byteSize()),
                scratch.asSlice(16, FdReadiness.SCRATCH_SIZE));
    }

    /**
     * The next event already queued on the channel, or null at once: {@link #awaitEvent} without a
     * wait, for an event loop that polled the fd itself. The caller's scratch memory is {@link
     * #awaitEventUntil(long, MemorySegment, MemorySegment, MemorySegment)}'s; allocates nothing
     * when no event is queued.
     *
     * @throws ResourceClosedException when the channel is closed
     */
    CompletionQueue nextEvent(MemorySegment cqOut, MemorySegment ctxOut, MemorySegment epollEvent) {
        ensureOpen("ibv_get_cq_event");
        return awaitEventUntil(System.nanoTime(), cqOut, ctxOut, epollEvent);
    }

    /**
     * {@link #awaitEventUntil(long, MemorySegment)} with the scratch memory already cut: {@code cqOut}
     * and {@code ctxOut} 8 bytes each, {@code epollEvent} {@link FdReadiness#SCRATCH_SIZE}.
     */
    CompletionQueue awaitEventUntil(
            long deadline, MemorySegment cqOut, MemorySegment ctxOut, MemorySegment epollEvent) {
        try {
            if (!gate.waiters.readLock().tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                return null;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
        try {
            FdReadiness.Watch watch = gate.watch;
            while (true) {
                if (gate.closed) {
                    throw closedException("ibv_get_cq_event");
                }
                int e = LibIbverbs.tryGetCqEvent(handle, cqOut, ctxOut);
                if (e == Errno.EAGAIN || e == Errno.EINTR) {
                    // nothing there (or another waiter took it): park until readable, the deadline or an interrupt
                    long left = deadline - System.nanoTime();
                    if (left <= 0 || Thread.currentThread().isInterrupted()) {
                        return null;
                    }
                    watch.await("ibv_get_cq_event", left, epollEvent);
                    continue;
                }
                if (e != 0) {
                    throw VerbsException.of("ibv_get_cq_event", e, "reading the completion channel failed");
                }
                long cqAddress = cqOut.get(JAVA_LONG, 0);
                CompletionQueue cq;
                gate.acks.lock();
                try {
                    WeakReference<CompletionQueue> ref = queues.get(cqAddress);
                    cq = ref == null ? null : ref.get();
                    if (cq != null) {
                        cq.eventReceived();
                    } else {
                        LibIbverbs.ackCqEvents(MemorySegment.ofAddress(cqAddress), 1); // a CQ closing right now
                    }
                } finally {
                    gate.acks.unlock();
                }
                if (cq != null) {
                    return cq;
                }
                LOG.debug(
                        "verbs4j: a completion event of a closing CQ 0x{} acknowledged and skipped",
                        Long.toHexString(cqAddress));
            }
        } finally {
            gate.waiters.readLock().unlock();
        }
    }

    /**
     * The channel's CQs by address ({@code struct ibv_cq *}), for the event path: open addressing
     * with linear probing over primitive keys, so that a lookup boxes nothing and allocates
     * nothing. Not thread-safe (the channel guards it with its ack lock). Address 0 marks an empty
     * slot (no CQ lives there).
     */
    static final class CqTable {
        private long[] keys = new long[16];

        @SuppressWarnings({"unchecked", "rawtypes"})
        private WeakReference<CompletionQueue>[] refs = new WeakReference[16];

        private int size;

        /** The CQ registered at {@code address}, or null. */
        WeakReference<CompletionQueue> get(long address) {
            long[] k = keys;
            int mask = k.length - 1;
            for (int i = home(address, mask); ; i = (i + 1) & mask) {
                if (k[i] == address) {
                    return refs[i];
                }
                if (k[i] == 0) {
                    return null;
                }
            }
        }

        /** Registers (or replaces) the CQ at {@code address} (not 0). */
        void put(long address, WeakReference<CompletionQueue> ref) {
            if (address == 0) {
                throw new IllegalArgumentException("a CQ at address 0");
            }
            if ((size + 1) * 2 > keys.length) {
                grow();
            }
            int mask = keys.length - 1;
            int i = home(address, mask);
            while (keys[i] != 0 && keys[i] != address) {
                i = (i + 1) & mask;
            }
            if (keys[i] == 0) {
                size++;
            }
            keys[i] = address;
            refs[i] = ref;
        }

        /** Forgets the CQ at {@code address}, if registered. */
        void remove(long address) {
            int mask = keys.length - 1;
            int i = home(address, mask);
            while (keys[i] != address) {
                if (keys[i] == 0) {
                    return;
                }
                i = (i + 1) & mask;
            }
            size--;
            // backward-shift deletion: move later entries of the probe run into the hole, so that
            // every remaining key stays reachable from its home slot without tombstones
            for (int j = i; ; ) {
                keys[i] = 0;
                refs[i] = null;
                for (; ; ) {
                    j = (j + 1) & mask;
                    if (keys[j] == 0) {
                        return;
                    }
                    int h = home(keys[j], mask);
                    boolean stays = i <= j ? i < h && h <= j : i < h || h <= j;
                    if (!stays) {
                        break;
                    }
                }
                keys[i] = keys[j];
                refs[i] = refs[j];
                i = j;
            }
        }

        int size() {
            return size;
        }

        private void grow() {
            long[] oldKeys = keys;
            WeakReference<CompletionQueue>[] oldRefs = refs;
            @SuppressWarnings({"unchecked", "rawtypes"})
            WeakReference<CompletionQueue>[] r = new WeakReference[oldKeys.length * 2];
            keys = new long[oldKeys.length * 2];
            refs = r;
            size = 0;
            for (int i = 0; i < oldKeys.length; i++) {
                if (oldKeys[i] != 0) {
                    put(oldKeys[i], oldRefs[i]);
                }
            }
        }

        private static int home(long address, int mask) {
            return (int) ((address * 0x9E3779B97F4A7C15L) >>> 40) & mask;
        }
    }

    /** How many threads are parked on the channel's fd right now (for tests). */
    int parked() {
        return gate.watch.waiting();
    }

    @Override
    String describe() {
        return "CompletionChannel on " + device() + ", fd " + fd;
    }
}
