package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NEXT;
import static org.verbs4j.natives.WorkRequestLayout.RECV_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.RECV_SG_LIST;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NEXT;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_SG_LIST;
import static org.verbs4j.natives.WorkRequestLayout.SGE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LENGTH;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LKEY;
import static org.verbs4j.natives.WorkRequestLayout.SGE_SIZE;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;

/**
 * What send and receive chains share: a native array of work requests whose {@code next} and
 * {@code sg_list} pointers are linked once, the SGE array behind it, the chain's length, the
 * termination for one post, and the life cycle of the memory. {@code struct ibv_send_wr} and
 * {@code struct ibv_recv_wr} agree on the offsets of {@code next}, {@code sg_list} and
 * {@code num_sge}; only their sizes differ.
 *
 * <p>Lifetimes. The descriptors live in memory of an automatic arena that only the chain
 * references: it is freed by the garbage collector once the chain is unreachable, never by
 * {@link #close()}. A post holds the chain (reachability fence) while the provider reads it, so a
 * {@code close()} racing a post on another thread cannot free memory under the provider; close
 * only marks the chain unusable and invalidates the raw view {@link #segment()} hands out. The
 * chain also keeps every {@link MemoryRegion} its SGEs name (and every address handle of a UD
 * request) and re-checks at post time, in every mode, that they are still open: cheaply, since it
 * re-checks only when some region or handle was closed since its last check ({@link Revocations}).
 * A dropped chain is reported as a leak. Not thread-safe: one thread builds and posts a chain.
 */
abstract sealed class WorkRequestChain implements AutoCloseable permits SendWorkRequests, ReceiveWorkRequests {
    static final long NEXT = SEND_NEXT;
    static final long SG_LIST = SEND_SG_LIST;
    static final long NUM_SGE = SEND_NUM_SGE;

    static {
        if (RECV_NEXT != NEXT || RECV_SG_LIST != SG_LIST || RECV_NUM_SGE != NUM_SGE) {
            throw new ExceptionInInitializerError("ibv_send_wr and ibv_recv_wr disagree on next/sg_list/num_sge");
        }
        if (SGE_LKEY != SGE_LENGTH + 4 || SGE_LENGTH % 8 != 0) { // written with one 64-bit store (pack)
            throw new ExceptionInInitializerError("struct ibv_sge: length and lkey are not one aligned 8-byte pair");
        }
    }

    private static final boolean LITTLE_ENDIAN = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN;

    /**
     * The 8 bytes of two adjacent 32-bit fields ({@code low} at the lower address) in native byte
     * order, so that one aligned 64-bit store writes both.
     */
    static long pack(int low, int high) {
        return LITTLE_ENDIAN
                ? (long) high << 32 | Integer.toUnsignedLong(low)
                : (long) low << 32 | Integer.toUnsignedLong(high);
    }

    private final LeakReport leak;
    private final RawViews views = new RawViews(); // of segment(), closed by close(): the raw view dies
    private final long wrSize;
    final MemorySegment wrs;
    final MemorySegment sges;
    final long address;
    final int capacity;
    final int maxSge;
    final long sgeStride;
    /** The region of each SGE slot (capacity x maxSge), so a post can verify they are still open. */
    final MemoryRegion[] sgeRegions;
    /** The {@link Revocations#epoch()} at which every region (and handle) named was last known open. */
    long epoch = Revocations.epoch();

    long cur; // offset of the current request in wrs
    long curSge; // offset of the current request's first SGE in sges
    int curSges; // SGEs of the current request
    int count;
    int maxSges; // the most SGEs of any request (checked mode validates a post in O(1))
    boolean closed;
    /** The request whose {@code next} is NULL for the provider's walk (see {@link #endAt}); -1: only the last slot's. */
    private int end = -1;

    WorkRequestChain(String kind, long wrSize, int capacity, int maxSgePerRequest) {
        String constructor = kind.startsWith("send") ? "SendWorkRequests" : "ReceiveWorkRequests";
        if (capacity <= 0 || maxSgePerRequest <= 0 || (long) capacity * maxSgePerRequest > 1 << 26) {
            throw new InvalidRequestException(
                    constructor,
                    "capacity " + capacity + " x maxSgePerRequest " + maxSgePerRequest + " is not a chain it can hold",
                    "give a capacity and an SGE count of at least 1, with at most 2^26 (67,108,864) SGEs in all");
        }
        this.wrSize = wrSize;
        this.leak = new LeakReport(this, kind);
        this.capacity = capacity;
        this.maxSge = maxSgePerRequest;
        this.sgeStride = SGE_SIZE * maxSgePerRequest;
        java.lang.foreign.Arena auto = java.lang.foreign.Arena.ofAuto();
        try {
            this.wrs = globalView(auto.allocate(wrSize * capacity, 64));
            this.sges = globalView(auto.allocate(sgeStride * capacity, 64));
            this.sgeRegions = new MemoryRegion[capacity * maxSgePerRequest];
        } catch (OutOfMemoryError e) {
            throw new VerbsException(
                    constructor,
                    Errno.ENOMEM,
                    "no memory for " + capacity + " requests of " + maxSgePerRequest + " SGEs ("
                            + (wrSize + sgeStride) * capacity + " bytes of native memory)",
                    "use a smaller chain and post it more often");
        }
        this.memory = auto;
        this.address = wrs.address();
        long sgeBase = sges.address();
        for (int i = 0; i < capacity; i++) {
            long o = wrSize * i;
            // next is pre-linked; a post ends the list at count (endAt), where the end then stays
            wrs.set(JAVA_LONG, o + NEXT, i + 1 < capacity ? address + wrSize * (i + 1) : 0L);
            wrs.set(JAVA_LONG, o + SG_LIST, sgeBase + sgeStride * i);
        }
    }

    /** The automatic arena of the chain's native memory (descriptors, SGEs, inline staging), reachable exactly as long as the chain. */
    final java.lang.foreign.Arena memory;

    static MemorySegment globalView(MemorySegment owned) {
        return MemorySegment.ofAddress(owned.address()).reinterpret(owned.byteSize());
    }

    /**
     * Before a post, in every mode: refuses the chain if a region (or address handle) it names was
     * closed since it was last checked. One volatile read when nothing was closed.
     */
    final void verifyLive(String verb) {
        if (Revocations.epoch() != epoch) {
            reverify(verb);
        }
    }

    private void reverify(String verb) {
        long now = Revocations.epoch();
        for (int i = 0; i < count; i++) {
            for (int s = 0, n = numSgeAt(i); s < n; s++) {
                MemoryRegion r = sgeRegions[i * maxSge + s];
                if (r != null && !r.isOpen()) {
                    throw new InvalidRequestException(
                            verb,
                            "work request #" + i + " names a memory region that was "
                                    + "closed (deregistered) after the SGE was added; nothing was posted",
                            "rebuild the chain with live regions (clear() and add the requests again)");
                }
            }
        }
        verifyMore(verb);
        epoch = now;
    }

    /** A subclass re-checks what else it names (address handles). */
    void verifyMore(String verb) {}

    /** Records the region of SGE slot {@code slot} (every mode: it must be open). */
    private void noteRegion(String verb, int slot, MemoryRegion mr) {
        if (!mr.isOpenPlain()) {
            throw mr.closedException(verb);
        }
        if (sgeRegions[slot] != mr) { // a chain rebuilt over the same regions stores nothing (no GC barrier)
            sgeRegions[slot] = mr;
        }
    }

    /**
     * The one SGE writer: appends {@code [addr, addr + length)} under {@code lkey} to the current
     * request. {@code mr} is the region it lies in (it must be open, in every mode; the chain
     * remembers it for the post-time check), or null for memory the chain owns (inline staging).
     */
    final void appendSge(String verb, MemoryRegion mr, long addr, int length, int lkey) {
        int slot = (count - 1) * maxSge + curSges;
        if (mr != null) {
            noteRegion(verb, slot, mr); // may refuse: nothing written yet
        } else if (sgeRegions[slot] != null) {
            sgeRegions[slot] = null;
        }
        long s = curSge + SGE_SIZE * curSges;
        sges.set(JAVA_LONG, s + SGE_ADDR, addr);
        sges.set(JAVA_LONG, s + SGE_LENGTH, pack(length, lkey)); // length and lkey: one store
        wrs.set(JAVA_INT, cur + NUM_SGE, ++curSges);
        if (curSges > maxSges) {
            maxSges = curSges;
        }
    }

    /** Restarts the liveness bookkeeping for a chain that is rebuilt from scratch. */
    final void restartEpoch() {
        epoch = Revocations.epoch();
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

    /**
     * The raw work request array: restricted to modules with native access, and a view that stops
     * working when the chain is closed.
     */
    public final MemorySegment segment() {
        Restricted.check(getClass().getSimpleName() + ".segment");
        try {
            return MemorySegment.ofAddress(address).reinterpret(wrSize * capacity, views.arena(), null);
        } catch (IllegalStateException e) {
            throw new ResourceClosedException(
                    getClass().getSimpleName() + ".segment",
                    "the chain is closed",
                    "take the segment of an open chain");
        }
    }

    final boolean isClosed() {
        return closed;
    }

    /**
     * Makes request {@code n - 1} end the list the provider walks, before a post of {@code n}
     * requests ({@code n} is the poster's snapshot of the count, so a close racing the post cannot
     * move it): its {@code next} becomes NULL and the request that ended the list before, if
     * another, is linked again (after, so the list never runs past {@code n}). The end stays where
     * it is after the post: a chain posted again with the same count, prebuilt or rebuilt, writes
     * nothing here. Requests appended beyond the end are not reachable until a post moves it.
     */
    final void endAt(int n) {
        int last = n - 1;
        int e = end;
        if (e != last) {
            wrs.set(JAVA_LONG, wrSize * last + NEXT, 0L);
            if (e >= 0 && e + 1 < capacity) {
                wrs.set(JAVA_LONG, wrSize * e + NEXT, address + wrSize * (e + 1));
            }
            end = last;
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

    /**
     * Makes the chain unusable (a post, an added request and the raw view then throw); its memory is
     * freed once the chain is unreachable, so a post racing this close on another thread still reads
     * live memory.
     */
    @Override
    public final void close() {
        if (closed) {
            throw new ResourceClosedException(getClass().getSimpleName() + ".close", "already closed", "close it once");
        }
        closed = true; // count and the descriptors stay as they were: a post racing this close reads live memory
        leak.closed();
        views.close();
    }
}
