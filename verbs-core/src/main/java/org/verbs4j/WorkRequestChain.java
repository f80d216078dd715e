package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NEXT;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.RECV_SG_LIST;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NEXT;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_SG_LIST;
import static org.verbs4j.natives.WorkRequestLayout.SGE_SIZE;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.VerbsException;

/**
 * What send and receive chains share: a native array of work requests whose {@code next} and
 * {@code sg_list} pointers are linked once, the SGE array behind it, the chain's length, the
 * termination for one post, and the life cycle of the memory. {@code struct ibv_send_wr} and
 * {@code struct ibv_recv_wr} agree on the offsets of {@code next}, {@code sg_list} and
 * {@code num_sge}; only their sizes differ.
 *
 * <p>The descriptors are written through global-scope views of the chain's own memory, so a store
 * pays no arena liveness check: every write path is guarded by this object's state ({@code closed},
 * {@code count}), and the memory is freed only by {@link #close()} or, once the chain is
 * unreachable, by the cleaner. Not thread-safe: one thread builds and posts a chain.
 */
abstract sealed class WorkRequestChain implements AutoCloseable permits SendWorkRequests, ReceiveWorkRequests {
    static final long NEXT = SEND_NEXT;
    static final long SG_LIST = SEND_SG_LIST;
    static final long NUM_SGE = SEND_NUM_SGE;

    static {
        if (RECV_NEXT != NEXT || RECV_SG_LIST != SG_LIST || RECV_NUM_SGE != NUM_SGE) {
            throw new ExceptionInInitializerError("ibv_send_wr and ibv_recv_wr disagree on next/sg_list/num_sge");
        }
    }

    private final OwnedMemory memory;
    private final MemorySegment owned; // the arena segment, for segment(): a closed arena makes raw access fail safely
    private final long wrSize;
    final MemorySegment wrs;
    final MemorySegment sges;
    final long address;
    final int capacity;
    final int maxSge;
    final long sgeStride;
    int count;
    int maxSges;          // the most SGEs of any request (checked mode validates a post in O(1))
    boolean closed;

    WorkRequestChain(String kind, long wrSize, int capacity, int maxSgePerRequest) {
        if (capacity <= 0 || maxSgePerRequest <= 0) {
            throw new IllegalArgumentException("capacity and maxSgePerRequest must be positive");
        }
        this.wrSize = wrSize;
        this.memory = new OwnedMemory(this, kind);
        this.capacity = capacity;
        this.maxSge = maxSgePerRequest;
        this.sgeStride = SGE_SIZE * maxSgePerRequest;
        this.owned = memory.allocate(wrSize * capacity, 64);
        this.wrs = globalView(owned);
        this.sges = globalView(memory.allocate(sgeStride * capacity, 64));
        this.address = wrs.address();
        long sgeBase = sges.address();
        for (int i = 0; i < capacity; i++) {
            long o = wrSize * i;
            // next is pre-linked; a post terminates the chain at count for the call (terminate/relink)
            wrs.set(JAVA_LONG, o + NEXT, i + 1 < capacity ? address + wrSize * (i + 1) : 0L);
            wrs.set(JAVA_LONG, o + SG_LIST, sgeBase + sgeStride * i);
        }
    }

    static MemorySegment globalView(MemorySegment owned) {
        return MemorySegment.ofAddress(owned.address()).reinterpret(owned.byteSize());
    }

    /** The number of requests in the chain. */
    public final int size() {
        return count;
    }

    /** The most requests the chain holds. */
    public final int capacity() {
        return capacity;
    }

    /** The most SGEs one request holds. */
    public final int maxSgePerRequest() {
        return maxSge;
    }

    /** The raw work request array. */
    public final MemorySegment segment() {
        return owned;
    }

    final boolean isClosed() {
        return closed;
    }

    /** Ends the chain after {@code count} requests for one post (restored by {@link #relink}). */
    final void terminate() {
        wrs.set(JAVA_LONG, wrSize * (count - 1) + NEXT, 0L);
    }

    final void relink() {
        int last = count - 1;
        if (last + 1 < capacity) {
            wrs.set(JAVA_LONG, wrSize * last + NEXT, address + wrSize * (last + 1));
        }
    }

    final int numSgeAt(int i) {
        return wrs.get(JAVA_INT, wrSize * i + NUM_SGE);
    }

    /** The index of the request at native address {@code wr}, or -1. */
    final int indexOf(long wr) {
        long d = wr - address;
        return d >= 0 && d < wrSize * count && d % wrSize == 0 ? (int) (d / wrSize) : -1;
    }

    /** Frees the native memory; using the chain afterwards throws. */
    @Override
    public final void close() {
        if (closed) {
            throw new VerbsException(getClass().getSimpleName() + ".close", Errno.EBADF, "already closed", "close it once");
        }
        closed = true;
        count = 0;
        memory.close();
    }
}
