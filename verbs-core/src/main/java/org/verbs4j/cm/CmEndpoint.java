package org.verbs4j.cm;

import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.function.Supplier;
import org.verbs4j.VerbsException;
import org.verbs4j.internal.CoreAccess;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;

/**
 * What listeners, pending requests and connections share: one {@code struct rdma_cm_id} on one
 * channel, the routing of its events, its destruction (once, under the channel's lock), and the
 * bounded waits that drive a polled channel while they wait.
 */
abstract class CmEndpoint {
    /**
     * Guards the endpoint's state and is what waiters wait on. A private lock, not the public
     * object's monitor: code that synchronizes on a connection or listener cannot block the library.
     */
    final Object lock = new Object();

    final CmEventChannel channel;
    final MemorySegment id;
    /** The id and whether it was destroyed; shared with the leak cleaner (and a request's connection). */
    final CmEventChannel.IdState idState;
    /**
     * The id's lock ({@link CmEventChannel.IdState#lock}): held around each librdmacm call on the
     * id, which is destroyed under it; the calls on other ids do not wait for it.
     */
    final java.util.concurrent.locks.ReentrantLock idLock;

    private volatile Runnable leakClosed;

    CmEndpoint(CmEventChannel channel, CmEventChannel.IdState idState) {
        this.channel = channel;
        this.idState = idState;
        this.id = idState.id;
        this.idLock = idState.lock;
    }

    /**
     * From here on, this endpoint is reported (a warning naming {@code kind} and where it was
     * created) if it becomes unreachable before {@link #leakClosed()}, and its id then destroyed
     * by the cleaner (rejected first when {@code reject}: an unanswered request).
     */
    final void reportLeaks(String kind, boolean reject) {
        CmEventChannel.IdState st = idState;
        leakClosed = CoreAccess.get().reportLeaks(this, kind, () -> st.destroy(reject));
    }

    /** Closed (or handed on): no leak report from now on. */
    final void leakClosed() {
        Runnable r = leakClosed;
        if (r != null) {
            r.run();
        }
    }

    /** Called by the channel's reader for each event of this id (after it was acknowledged). */
    abstract void handle(CmStructs.Copied raw, CmEvent event);

    /** Routes the id's events here (held weakly: an unclosed endpoint nobody holds is a leak, reported). */
    void register() {
        channel.core().endpoints.put(id.address(), new CmEventChannel.Entry(new WeakReference<>(this), idState));
    }

    /** Under {@link #idLock} (or the channel's lock): whether the id was destroyed. */
    final boolean idDestroyed() {
        return idState.destroyed();
    }

    /** {@code rdma_destroy_id} once; unregisters; no leak report from now on. Idempotent. */
    final void destroyId() {
        try {
            idState.destroy(false);
        } finally {
            leakClosed();
        }
    }

    /**
     * Waits until {@code ready} gives a result (checked under {@link #lock}, which event handling
     * notifies), for at most {@code timeout}; on a polled channel, and on the channel's
     * own event thread (a callback that accepts or connects), this thread reads the channel while
     * it waits.
     */
    final <T> T await(Duration timeout, Supplier<T> ready, Supplier<? extends RuntimeException> onTimeout) {
        return await(lock, timeout, ready, onTimeout);
    }

    /**
     * {@link #await(Duration, Supplier, Supplier)} on {@code monitor} instead of {@link #lock}:
     * {@code ready} is checked under it, and whoever makes it ready notifies it.
     */
    final <T> T await(
            Object monitor, Duration timeout, Supplier<T> ready, Supplier<? extends RuntimeException> onTimeout) {
        long deadline = Timeouts.deadline("rdma_get_cm_event", timeout);
        while (true) {
            long left;
            synchronized (monitor) {
                T r = ready.get();
                if (r != null) {
                    return r;
                }
                left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw onTimeout.get();
                }
                if (!channel.isPolled() && !channel.isEventThread()) {
                    try {
                        monitor.wait(Math.max(1, Math.min(left / 1_000_000L, 1000)));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new VerbsException(
                                "rdma_get_cm_event", Errno.EINTR, "interrupted while waiting", null, e);
                    }
                    continue;
                }
            }
            if (!channel.isOpen()) {
                throw onTimeout.get();
            }
            channel.drive(Math.max(1, Math.min(left / 1_000_000L, 50)));
        }
    }
}
