package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;

/**
 * A completion channel ({@code struct ibv_comp_channel}): a file descriptor that becomes readable
 * when a completion queue armed with {@link CompletionQueue#requestNotify} gets a completion.
 *
 * <p>{@link #awaitEvent} waits with a timeout (never forever) and acknowledges events in
 * batches; the rest are acknowledged when the CQ closes (destroying a CQ with unacknowledged
 * events would block forever). Owned by its {@link Context}; one thread waits on it at a time.
 */
public final class CompletionChannel extends NativeResource {
    private final int fd;
    // weak: a CQ dropped without close must stay collectable (its cleaner holds this channel)
    private final Map<Long, java.lang.ref.WeakReference<CompletionQueue>> queues = new ConcurrentHashMap<>();

    CompletionChannel(Context context, MemorySegment channel) {
        super(context, "completion channel", "ibv_destroy_comp_channel", channel.reinterpret(16),
                LibIbverbs::destroyCompChannel, null);
        this.fd = handle.get(JAVA_INT, ObjectLayout.COMP_CHANNEL_FD);
    }

    /** The file descriptor, for an external event loop. */
    public int fd() {
        return fd;
    }

    void attach(CompletionQueue cq) {
        queues.put(cq.address, new java.lang.ref.WeakReference<>(cq));
    }

    void detach(CompletionQueue cq) {
        queues.remove(cq.address);
    }

    /**
     * Waits up to {@code timeout} for the next completion event ({@code ibv_get_cq_event}) and
     * returns the CQ that raised it, or null on timeout. The CQ must be re-armed with
     * {@link CompletionQueue#requestNotify} and then polled, in that order, to miss nothing.
     */
    public CompletionQueue awaitEvent(Duration timeout) {
        ensureOpen("ibv_get_cq_event");
        if (!LibC.pollReadable("ibv_get_cq_event", fd, timeout.toMillis())) {
            return null;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cqOut = arena.allocate(ADDRESS);
            MemorySegment ctxOut = arena.allocate(ADDRESS);
            LibIbverbs.getCqEvent(handle, cqOut, ctxOut);
            long cqAddr = cqOut.get(ADDRESS, 0).address();
            java.lang.ref.WeakReference<CompletionQueue> ref = queues.get(cqAddr);
            CompletionQueue cq = ref == null ? null : ref.get();
            if (cq == null) {
                LibIbverbs.ackCqEvents(cqOut.get(ADDRESS, 0), 1);
                throw new IllegalStateException("ibv_get_cq_event returned an unknown CQ 0x" + Long.toHexString(cqAddr));
            }
            cq.eventReceived();
            return cq;
        }
    }
}
