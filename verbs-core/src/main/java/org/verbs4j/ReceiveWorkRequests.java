package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NEXT;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.RECV_SG_LIST;
import static org.verbs4j.natives.WorkRequestLayout.RECV_WR_ID;
import static org.verbs4j.natives.WorkRequestLayout.RECV_WR_SIZE;
import static org.verbs4j.natives.WorkRequestLayout.SGE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LENGTH;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LKEY;
import static org.verbs4j.natives.WorkRequestLayout.SGE_SIZE;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.VerbsException;

/**
 * A preallocated chain of receive work requests ({@code struct ibv_recv_wr} with their SGEs),
 * written in place and posted with one {@link QueuePair#postRecv} or
 * {@link SharedReceiveQueue#postRecv} call; allocation-free like {@link SendWorkRequests}.
 * Receive buffers must be registered with {@link Access#LOCAL_WRITE} (checked mode verifies).
 *
 * <p>Owns its native memory; not thread-safe: one thread builds and posts it.
 */
public final class ReceiveWorkRequests implements AutoCloseable {
    private static final boolean CHECKED = Verbs.CHECKED;

    private final OwnedMemory memory;
    private final MemorySegment wrs;
    private final MemorySegment owned; // the arena segment, for segment(): a closed arena makes raw access fail safely
    private final MemorySegment sges;
    final long address;
    private final int capacity;
    private final int maxSge;
    private final long sgeStride;
    int count;
    private long cur;
    private long curSge;
    private int curSges;
    int maxSges;                  // the most SGEs of any request (checked mode validates in O(1))
    private boolean closed;

    public ReceiveWorkRequests(int capacity, int maxSgePerRequest) {
        if (capacity <= 0 || maxSgePerRequest <= 0) {
            throw new IllegalArgumentException("capacity and maxSgePerRequest must be positive");
        }
        this.memory = new OwnedMemory(this, "receive work request chain");
        this.capacity = capacity;
        this.maxSge = maxSgePerRequest;
        this.sgeStride = SGE_SIZE * maxSgePerRequest;
        // global-scope views, guarded by this object's own state (see SendWorkRequests)
        this.owned = memory.allocate(RECV_WR_SIZE * capacity, 64);
        this.wrs = SendWorkRequests.globalView(owned);
        this.sges = SendWorkRequests.globalView(memory.allocate(sgeStride * capacity, 64));
        this.address = wrs.address();
        long sgeBase = sges.address();
        for (int i = 0; i < capacity; i++) {
            long o = RECV_WR_SIZE * i;
            wrs.set(JAVA_LONG, o + RECV_NEXT, i + 1 < capacity ? address + RECV_WR_SIZE * (i + 1) : 0L);
            wrs.set(JAVA_LONG, o + RECV_SG_LIST, sgeBase + sgeStride * i);
        }
    }

    /** Empties the chain. */
    public ReceiveWorkRequests clear() {
        count = 0;
        curSges = 0;
        maxSges = 0;
        return this;
    }

    public int size() {
        return count;
    }

    public int capacity() {
        return capacity;
    }

    /** Starts a receive request. */
    public ReceiveWorkRequests add(long wrId) {
        if (closed) {
            throw new VerbsException("ibv_post_recv", Errno.EBADF, "the ReceiveWorkRequests is closed", "create a new one");
        }
        if (count == capacity) {
            throw new VerbsException("ibv_post_recv", Errno.ENOMEM, "the chain already holds its capacity of "
                    + capacity + " requests", "post it and clear() before adding more");
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
            throw new IllegalStateException("start a receive request with add(wrId) first");
        }
        if (curSges == maxSge) {
            throw new VerbsException("ibv_post_recv", Errno.EINVAL, "the request already has its " + maxSge + " SGEs",
                    "allocate the chain with more SGEs per request");
        }
        if (CHECKED) {
            mr.checkSge("ibv_post_recv", offset, Integer.toUnsignedLong(length));
            if (!mr.access().contains(Access.LOCAL_WRITE)) {
                throw new VerbsException("ibv_post_recv", Errno.EINVAL, "a receive buffer's region lacks LOCAL_WRITE",
                        "register receive buffers with Access.LOCAL_WRITE");
            }
        }
        long s = curSge + SGE_SIZE * curSges;
        sges.set(JAVA_LONG, s + SGE_ADDR, mr.address() + offset);
        sges.set(JAVA_INT, s + SGE_LENGTH, length);
        sges.set(JAVA_INT, s + SGE_LKEY, mr.lkey());
        wrs.set(JAVA_INT, cur + RECV_NUM_SGE, ++curSges);
        if (curSges > maxSges) {
            maxSges = curSges;
        }
        return this;
    }

    boolean isClosed() {
        return closed;
    }

    void terminate() {
        wrs.set(JAVA_LONG, RECV_WR_SIZE * (count - 1) + RECV_NEXT, 0L);
    }

    void relink() {
        int last = count - 1;
        if (last + 1 < capacity) {
            wrs.set(JAVA_LONG, RECV_WR_SIZE * last + RECV_NEXT, address + RECV_WR_SIZE * (last + 1));
        }
    }

    int numSgeAt(int i) {
        return wrs.get(JAVA_INT, RECV_WR_SIZE * i + RECV_NUM_SGE);
    }

    int indexOf(long wr) {
        long d = wr - address;
        return d >= 0 && d < RECV_WR_SIZE * count && d % RECV_WR_SIZE == 0 ? (int) (d / RECV_WR_SIZE) : -1;
    }

    /** The raw {@code struct ibv_recv_wr} array. */
    public MemorySegment segment() {
        return owned;
    }

    @Override
    public void close() {
        if (closed) {
            throw new VerbsException("ReceiveWorkRequests.close", Errno.EBADF, "already closed", "close it once");
        }
        closed = true;
        count = 0;
        memory.close();
    }
}
