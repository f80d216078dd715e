package org.verbs4j.netty;

/**
 * The credit ledger of one connection's byte stream (pure logic, no device). A credit is one
 * receive buffer the peer has posted: this side sends a frame only while it holds one, so no
 * frame ever meets a receiver with nothing posted (no receiver-not-ready as the normal case).
 * Credits come back in each frame's immediate value: the number of receive buffers the sender
 * of that frame reposted since its last frame.
 *
 * <p>Two rules keep both directions moving without deadlock. The last credit is spent only by a
 * frame that returns credits too (so a side that reaches zero has just handed the peer at least
 * one). A side returns credits in an explicit empty frame once it owes at least half its receive
 * buffers and has no data frame to carry them (one-way traffic); with at least four receive
 * buffers each such frame returns two or more credits while costing the peer one, so empty
 * frames never echo back and forth.
 *
 * <p>Owned by the channel's event loop thread; not thread-safe.
 */
final class Credits {
    /** The fewest receive buffers a side may post (see the class comment). */
    static final int MIN_RECEIVE_BUFFERS = 4;

    /**
     * The most receive buffers of {@code localBuffers} the application may hold unreleased
     * (zero-copy reads) without stopping the peer: {@code (localBuffers - 1) / 2}. A peer that can
     * send nothing holds at most one credit, so with {@code h} buffers held and everything
     * delivered this side owes at least {@code localBuffers - 1 - h}, which must reach the
     * credit-frame threshold ({@code localBuffers / 2}) for the credits to go back without data.
     */
    static int maxHeld(int localBuffers) {
        return (localBuffers - 1) / 2;
    }

    private final int peerBuffers;
    private final int threshold;
    private int available;
    private int owed;
    // frames the peer sent that spend a credit, and the credits it was ever granted
    private long framesReceived, granted;

    /**
     * @param peerBuffers the receive buffers the peer posted at the start (its handshake)
     * @param localBuffers the receive buffers this side posts
     */
    Credits(int peerBuffers, int localBuffers) {
        if (peerBuffers < MIN_RECEIVE_BUFFERS || localBuffers < MIN_RECEIVE_BUFFERS) {
            throw new IllegalArgumentException("each side must post at least " + MIN_RECEIVE_BUFFERS
                    + " receive buffers (peer " + peerBuffers + ", local " + localBuffers + ")");
        }
        this.peerBuffers = peerBuffers;
        this.available = peerBuffers;
        this.threshold = localBuffers / 2;
        this.granted = localBuffers;
    }

    /** Whether a data frame may go now (it would return {@link #owed()} credits with it). */
    boolean canSendData() {
        return available >= 2 || (available == 1 && owed > 0);
    }

    /** Whether an empty frame should go now to return what is owed (no data frame to carry it). */
    boolean shouldSendCreditFrame() {
        return available >= 1 && owed >= threshold;
    }

    /** Spends one credit on a frame; returns the credits it carries back (all that was owed). */
    int spend() {
        if (available <= 0) {
            throw new IllegalStateException("no credit to spend");
        }
        available--;
        int r = owed;
        owed = 0;
        granted += r;
        return r;
    }

    /**
     * The peer returned {@code returned} credits (a frame's immediate value).
     *
     * @throws ProtocolViolationException when it returns more than this side has spent
     */
    void returned(int returned) throws ProtocolViolationException {
        int spent = peerBuffers - available;
        if (returned < 0 || returned > spent) {
            throw new ProtocolViolationException("the peer returned " + Integer.toUnsignedString(returned)
                    + " credits, but only " + spent + " of its " + peerBuffers + " receive buffers were in use");
        }
        available += returned;
    }

    /**
     * The peer's frame that spends a credit arrived (a data, credit or end-of-stream frame).
     *
     * @throws ProtocolViolationException when the peer has now sent more such frames than it was
     *     granted credits (the receive buffers it was given, plus every credit returned to it)
     */
    void frameArrived() throws ProtocolViolationException {
        if (++framesReceived > granted) {
            throw new ProtocolViolationException("the peer sent frame " + framesReceived + " but was granted only "
                    + granted + " credits (a frame beyond its credits takes a receive buffer it was not given)");
        }
    }

    /** This side reposted {@code n} receive buffers: it owes the peer {@code n} more credits. */
    void reposted(int n) {
        owed += n;
    }

    /** Credits this side may spend now. */
    int available() {
        return available;
    }

    /** Credits this side owes the peer (reposted receive buffers not reported yet). */
    int owed() {
        return owed;
    }
}
