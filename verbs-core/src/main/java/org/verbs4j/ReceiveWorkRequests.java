package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.RECV_WR_ID;
import static org.verbs4j.natives.WorkRequestLayout.RECV_WR_SIZE;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;

/**
 * A preallocated chain of receive work requests ({@code struct ibv_recv_wr} with their SGEs),
 * written in place and posted with one {@link QueuePair#postRecv} or
 * {@link SharedReceiveQueue#postRecv} call; allocation-free like {@link SendWorkRequests}.
 * Receive buffers must be registered with {@link Access#LOCAL_WRITE} (checked mode verifies).
 *
 * <p>Owns its native memory; not thread-safe: one thread builds and posts it.
 */
public final class ReceiveWorkRequests extends WorkRequestChain {
    private static final boolean CHECKED = Verbs.CHECKED;

    /**
     * A chain of at most {@code capacity} receive requests of at most {@code maxSgePerRequest} SGEs
     * each, in native memory it owns.
     */
    public ReceiveWorkRequests(int capacity, int maxSgePerRequest) {
        super("receive work request chain", RECV_WR_SIZE, capacity, maxSgePerRequest);
    }

    /** Empties the chain. */
    public ReceiveWorkRequests clear() {
        count = 0;
        restartEpoch();
        curSges = 0;
        maxSges = 0;
        return this;
    }

    /**
     * The one receive posting path, for a queue pair ({@code ibv_post_recv}) and a shared receive
     * queue ({@code ibv_post_srq_recv}): ends the chain after {@code n} requests, hands it to the
     * provider's op {@code fn} for {@code target} (see {@link #endAt}). Returns the provider's
     * return code; on failure {@code *badWr} names the first request not posted.
     */
    int postTo(boolean critical, MemorySegment fn, long target, long badWrAddress, int n) {
        endAt(n);
        return InlineVerbs.postRecv(critical, fn, target, address, badWrAddress);
    }

    /** Starts a receive request. */
    public ReceiveWorkRequests add(long wrId) {
        if (closed) {
            throw new ResourceClosedException("ibv_post_recv", "the ReceiveWorkRequests is closed", "create a new one");
        }
        if (count == capacity) {
            throw new QueueFullException(
                    "ibv_post_recv",
                    Errno.ENOMEM,
                    "the chain already holds its capacity of " + capacity + " requests",
                    "post it and clear() before adding more");
        }
        cur = RECV_WR_SIZE * count;
        curSge = sgeStride * count;
        curSges = 0;
        count++;
        wrs.set(JAVA_LONG, cur + RECV_WR_ID, wrId);
        wrs.set(JAVA_INT, cur + RECV_NUM_SGE, 0);
        return this;
    }

    /** Adds the SGE {@code [offset, offset + length)} of a registered region to the current request. */
    public ReceiveWorkRequests sge(MemoryRegion mr, long offset, int length) {
        if (count == 0) {
            throw closed
                    ? new ResourceClosedException("ibv_post_recv", "the ReceiveWorkRequests is closed", null)
                    : new InvalidRequestException(
                            "ibv_post_recv",
                            "no receive request to add to",
                            "start a receive request with add(wrId) first");
        }
        if (curSges == maxSge) {
            throw VerbsException.create(
                    "ibv_post_recv",
                    Errno.EINVAL,
                    "the request already has its " + maxSge + " SGEs",
                    "allocate the chain with more SGEs per request");
        }
        if (CHECKED) {
            mr.checkSge("ibv_post_recv", offset, Integer.toUnsignedLong(length));
            if (!mr.access().contains(Access.LOCAL_WRITE)) {
                throw VerbsException.create(
                        "ibv_post_recv",
                        Errno.EINVAL,
                        "a receive buffer's region lacks LOCAL_WRITE",
                        "register receive buffers with Access.LOCAL_WRITE");
            }
        }
        appendSge("ibv_post_recv", mr, mr.address() + offset, length, mr.lkey());
        return this;
    }
}
