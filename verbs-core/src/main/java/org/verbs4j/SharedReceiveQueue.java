package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.VerbsException;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * A shared receive queue ({@code struct ibv_srq}): one pool of receive buffers that several
 * queue pairs consume. Owned by its protection domain; refuses to close while queue pairs use
 * it. One thread posts to it at a time.
 */
public final class SharedReceiveQueue extends NativeResource {
    private static final boolean CHECKED = Verbs.CHECKED;
    final long address;
    private final MemorySegment postFn;
    private final int maxWr;
    private final int maxSge;
    private final OwnedMemory memory;
    private final MemorySegment badWr;
    /** A fatal async event (SRQ_ERR, DEVICE_FATAL) routed here by the context's event thread. */
    private volatile AsyncEvent asyncFailure;

    SharedReceiveQueue(ProtectionDomain pd, MemorySegment srq, int maxWr, int maxSge) {
        super(pd, "shared receive queue", "ibv_destroy_srq", srq.reinterpret(128), LibIbverbs::destroySrq, null);
        this.address = srq.address();
        this.postFn = InlineVerbs.contextOp(pd.context().handle, ContextLayout.OPS_POST_SRQ_RECV);
        this.maxWr = maxWr;
        this.maxSge = maxSge;
        this.memory = new OwnedMemory(this, "shared receive queue scratch slot", false);
        this.badWr = memory.allocate(ADDRESS.byteSize(), ADDRESS.byteAlignment());
        pd.context().asyncEvents.register(this);
    }

    public int maxWr() {
        return maxWr;
    }

    public int maxSge() {
        return maxSge;
    }

    /** {@code ibv_post_srq_recv} of the whole chain in one call; allocation-free on success. */
    public void postRecv(ReceiveWorkRequests wrs) {
        if (!isOpenPlain()) {
            throw closedException("ibv_post_srq_recv");
        }
        if (asyncFailure != null) {
            throw AsyncEventDispatcher.failure("ibv_post_srq_recv", asyncFailure);
        }
        if (wrs.isClosed()) {
            throw new VerbsException("ibv_post_srq_recv", Errno.EBADF, "the ReceiveWorkRequests is closed", null);
        }
        int n = wrs.count;
        if (n == 0) {
            return;
        }
        if (CHECKED && wrs.maxSges > maxSge) {
            for (int i = 0; i < n; i++) {
                if (wrs.numSgeAt(i) > maxSge) {
                    throw new VerbsException("ibv_post_srq_recv", Errno.EINVAL, "request #" + i + " has too many SGEs", null);
                }
            }
        }
        wrs.terminate();
        int rc = InlineVerbs.postSrqRecv(postFn, address, wrs.address, badWr.address());
        wrs.relink();
        if (rc != 0) {
            int index = wrs.indexOf(badWr.get(ADDRESS, 0).address());
            throw VerbsException.of("ibv_post_srq_recv", rc, "work request #" + index + " of " + n + " was not posted");
        }
    }

    /** Called by the context's event thread: the next post throws. Returns whether it is the first failure. */
    boolean asyncFailure(AsyncEvent e) {
        if (asyncFailure != null) {
            return false;
        }
        asyncFailure = e;
        return true;
    }

    @Override
    void afterRelease() {
        memory.close();
        ((ProtectionDomain) owner).context().asyncEvents.unregister(this);
    }
}
