package org.verbs4j.netty;

import java.util.BitSet;

/**
 * Which buffers of a shared receive queue are handed up in place and not given back yet (pure
 * logic, no device; the owner's lock guards it): the slots held, a count per registered chunk, and how many of
 * them belong to connections already gone (orphans, still reserved). Once the queue is closed a
 * buffer given back is no longer reposted: the last of a chunk's lets the chunk be deregistered.
 */
final class HeldReceives {
    /** {@link #giveBack}: repost the buffer (the queue is open). */
    static final int REPOST = -1;
    /** {@link #giveBack}: nothing to do (closed, other buffers of the chunk still held). */
    static final int KEEP = -2;

    private final int[] heldIn;
    private final BitSet slots;
    private final int perChunk;
    private int orphans;
    private boolean closed;

    /** Room for {@code chunks} chunks of {@code perChunk} buffers (slot {@code s} in chunk {@code s / perChunk}). */
    HeldReceives(int chunks, int perChunk) {
        this.heldIn = new int[chunks];
        this.slots = new BitSet(chunks * perChunk); // sized once: holding allocates nothing
        this.perChunk = perChunk;
    }

    /** Buffer {@code slot} is handed up. */
    void hold(int slot) {
        slots.set(slot);
        heldIn[slot / perChunk]++;
    }

    /** Buffers held in chunk {@code c}. */
    int heldIn(int c) {
        return heldIn[c];
    }

    /** {@code n} buffers held belong to a connection now gone. */
    void orphan(int n) {
        orphans += n;
    }

    /** Held buffers whose connection is gone. */
    int orphans() {
        return orphans;
    }

    /** The queue is closed: buffers given back from now on are not reposted. */
    void close() {
        closed = true;
    }

    /**
     * Buffer {@code slot} was released ({@code orphan}: its connection is gone).
     *
     * @return {@link #REPOST}, {@link #KEEP}, or the chunk to deregister (closed, its last buffer back)
     * @throws IllegalStateException that buffer is not held (given back twice)
     */
    int giveBack(int slot, boolean orphan) {
        int c = slot / perChunk;
        if (!slots.get(slot) || (orphan && orphans <= 0)) {
            throw new IllegalStateException("buffer " + slot + " of the shared receive queue was given back twice");
        }
        slots.clear(slot);
        heldIn[c]--;
        if (orphan) {
            orphans--;
        }
        return !closed ? REPOST : heldIn[c] == 0 ? c : KEEP;
    }
}
