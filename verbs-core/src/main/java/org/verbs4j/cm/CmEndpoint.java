package org.verbs4j.cm;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibRdmacm;

/**
 * What listeners, pending requests and connections share: one {@code struct rdma_cm_id} on one
 * channel, the routing of its events, its destruction (once, under the channel's lock), and the
 * bounded waits that drive a polled channel while they wait.
 */
abstract class CmEndpoint {
    private static final Logger LOG = LoggerFactory.getLogger(CmEndpoint.class);

    final CmEventChannel channel;
    final MemorySegment id;
    /** Under channel.lock. */
    private boolean idDestroyed;

    CmEndpoint(CmEventChannel channel, MemorySegment id) {
        this.channel = channel;
        this.id = id;
    }

    /** Called by the channel's reader for each event of this id (after it was acknowledged). */
    abstract void handle(CmStructs.Copied raw, CmEvent event);

    void register() {
        channel.endpoints.put(id.address(), this);
    }

    final boolean idDestroyed() {
        return idDestroyed;
    }

    /** {@code rdma_destroy_id} once; unregisters. Idempotent. */
    final void destroyId() {
        channel.lock.lock();
        try {
            if (idDestroyed) {
                return;
            }
            idDestroyed = true;
            try {
                LibRdmacm.destroyId(id);
            } catch (RuntimeException e) {
                LOG.warn("verbs4j: rdma_destroy_id failed: {}", e.getMessage());
            }
            channel.endpoints.remove(id.address(), this);
        } finally {
            channel.lock.unlock();
        }
    }

    /**
     * Waits until {@code ready} gives a result (checked under this object's monitor, which event
     * handling notifies), for at most {@code timeout}; on a polled channel, and on the channel's
     * own event thread (a callback that accepts or connects), this thread reads the channel while
     * it waits.
     */
    final <T> T await(Duration timeout, Supplier<T> ready, Supplier<? extends RuntimeException> onTimeout) {
        long deadline = System.nanoTime() + Math.max(0, timeout.toNanos());
        while (true) {
            long left;
            synchronized (this) {
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
                        wait(Math.max(1, Math.min(left / 1_000_000L, 1000)));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new VerbsException("rdma_get_cm_event", Errno.EINTR, "interrupted while waiting", null, e);
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

    final synchronized void wakeAll() {
        notifyAll();
    }
}
