package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import org.verbs4j.natives.CompletionLayout;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.VerbsException;

/**
 * A completion queue ({@code struct ibv_cq}). {@link #poll} reaps completions into a reusable
 * native {@link WorkCompletions} array through the provider's {@code poll_cq}, with no
 * allocation and no lock.
 *
 * <p>Owned by its {@link Context}; refuses to close while queue pairs use it. Polling and
 * {@link #requestNotify} are single-threaded: one thread polls a CQ at a time (as in C).
 */
public final class CompletionQueue extends NativeResource {
    private static final int ACK_BATCH = 16;

    final long address;
    private final MemorySegment pollFn;
    private final MemorySegment notifyFn;
    private final int capacity;
    private final CompletionChannel channel;
    private int unackedEvents;
    /** A fatal async event (IBV_EVENT_CQ_ERR, DEVICE_FATAL) routed here by the context's event thread. */
    private volatile AsyncEvent asyncFailure;

    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel) {
        this(context, cq, channel, LibIbverbs::destroyCq);
    }

    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel, Destroyer destroy) {
        super(context, new NativeResource[] {channel}, "completion queue", "ibv_destroy_cq",
                cq.reinterpret(ObjectLayout.CQ_SIZE), destroy, null);
        this.address = cq.address();
        MemorySegment ctx = context.handle;
        this.pollFn = InlineVerbs.contextOp(ctx, ContextLayout.OPS_POLL_CQ);
        this.notifyFn = InlineVerbs.contextOp(ctx, ContextLayout.OPS_REQ_NOTIFY_CQ);
        this.capacity = handle.get(JAVA_INT, ObjectLayout.CQ_CQE);
        this.channel = channel;
        if (channel != null) {
            channel.attach(this);
        }
        context.asyncEvents.register(this);
    }

    /** The number of entries the provider granted (at least what was asked). */
    public int capacity() {
        return capacity;
    }

    /** The raw {@code struct ibv_cq *}. */
    public MemorySegment handle() {
        ensureOpen("ibv_cq");
        return handle;
    }

    /**
     * {@code ibv_poll_cq}: reaps up to {@code wcs.capacity()} completions into {@code wcs}
     * (overwriting what it held) and returns how many. Allocation-free.
     */
    public int poll(WorkCompletions wcs) {
        if (!isOpenPlain()) {
            throw closedException("ibv_poll_cq");
        }
        if (asyncFailure != null) {
            throw AsyncEventDispatcher.failure("ibv_poll_cq", asyncFailure);
        }
        wcs.ensureUsable("ibv_poll_cq");
        int n = InlineVerbs.pollCq(pollFn, address, wcs.capacity, wcs.address);
        if (n < 0) {
            throw VerbsException.of("ibv_poll_cq", n == -1 ? Errno.EIO : -n, "the provider reported an error polling the CQ");
        }
        wcs.count = n;
        return n;
    }

    /**
     * Busy-polls until at least {@code min} completions were reaped into {@code wcs} (appended
     * after one another) or {@code timeout} passed; returns how many it holds. For tests and
     * setup, where a wait must never hang.
     */
    public int poll(WorkCompletions wcs, int min, Duration timeout) {
        ensureOpen("ibv_poll_cq");
        if (asyncFailure != null) {
            throw AsyncEventDispatcher.failure("ibv_poll_cq", asyncFailure);
        }
        wcs.ensureUsable("ibv_poll_cq");
        if (min > wcs.capacity) {
            throw new VerbsException("ibv_poll_cq", Errno.EINVAL, "min " + min + " exceeds the array's capacity "
                    + wcs.capacity, null);
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        int have = 0;
        while (have < min) {
            int n = InlineVerbs.pollCq(pollFn, address, wcs.capacity - have,
                    wcs.address + (long) have * CompletionLayout.WC_SIZE);
            if (n < 0) {
                throw VerbsException.of("ibv_poll_cq", n == -1 ? Errno.EIO : -n, "the provider reported an error polling the CQ");
            }
            have += n;
            if (n == 0) {
                if (System.nanoTime() - deadline > 0) {
                    break;
                }
                Thread.onSpinWait();
            }
        }
        wcs.count = have;
        return have;
    }

    /**
     * {@code ibv_req_notify_cq}: arm the CQ so its next completion (or next solicited one)
     * raises an event on its completion channel.
     */
    public void requestNotify(boolean solicitedOnly) {
        ensureOpen("ibv_req_notify_cq");
        if (channel == null) {
            throw new VerbsException("ibv_req_notify_cq", Errno.EINVAL, "the CQ has no completion channel",
                    "create it with Context.createCompletionQueue(n, channel, vector)");
        }
        int rc = InlineVerbs.reqNotifyCq(notifyFn, address, solicitedOnly ? 1 : 0);
        if (rc != 0) {
            throw VerbsException.of("ibv_req_notify_cq", rc);
        }
    }

    /** The completion channel it reports to, or null. */
    public CompletionChannel channel() {
        return channel;
    }

    void eventReceived() {
        if (++unackedEvents >= ACK_BATCH) {
            LibIbverbs.ackCqEvents(handle, unackedEvents);
            unackedEvents = 0;
        }
    }

    /** Called by the context's event thread: the next poll throws. Returns whether it is the first failure. */
    boolean asyncFailure(AsyncEvent e) {
        if (asyncFailure != null) {
            return false;
        }
        asyncFailure = e;
        return true;
    }

    @Override
    void beforeRelease() {
        if (channel != null) {
            channel.detach(this); // first: no waiter counts an event for it after this
        }
        if (unackedEvents > 0) {
            LibIbverbs.ackCqEvents(handle, unackedEvents);
            unackedEvents = 0;
        }
        ((Context) owner).asyncEvents.unregister(this);
    }
}
