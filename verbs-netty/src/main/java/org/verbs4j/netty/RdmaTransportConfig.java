package org.verbs4j.netty;

/**
 * How an {@link RdmaIoHandler} runs its loop and its connections' receive memory. Immutable; any
 * thread.
 *
 * <p>The loop blocks on the completion channel (the default) or busy-polls the completion queues
 * (lower latency, one core spent per loop). Each connection posts receive buffers of its own (the
 * default), or, with {@link #withSharedReceiveQueue}, every connection of the loop is made on one
 * shared receive queue whose buffers are sliced from registered memory of the loop: each
 * connection reserves its credits (and two probe buffers) from that pool while it lives, so the
 * buffers posted always cover every credit granted, and the memory grows with the credits
 * reserved, not with a full receive ring per connection. {@link #withMaxReceiveBytes} caps the
 * receive memory a loop reserves, in either mode: a connection beyond it is refused. On a shared
 * receive queue the connections' copied sends also share the loop's registered send buffers, at
 * most {@link #withSharedSendBytes} bytes ({@link SharedSends}).
 *
 * @param busyPoll poll without ever blocking in the kernel
 * @param sharedReceiveCredits credits (receive buffers) each connection grants its peer from the
 *     loop's shared receive queue; 0: no shared receive queue, each connection posts its own
 *     {@link RdmaChannelOption#RECEIVE_BUFFERS}
 * @param sharedBufferSize bytes of each buffer of the shared receive queue (the largest frame a peer may send)
 * @param maxReceiveBytes the most receive-buffer bytes the loop's connections reserve together
 * @param sharedSendBytes on a shared receive queue, the most bytes of send buffers (of {@code
 *     sharedBufferSize}, at least one) the loop registers for its connections together; 0: each
 *     connection registers its own {@link RdmaChannelOption#SEND_BUFFERS}
 */
public record RdmaTransportConfig(
        boolean busyPoll, int sharedReceiveCredits, int sharedBufferSize, long maxReceiveBytes, long sharedSendBytes) {
    /** The credits per connection {@link #withSharedReceiveQueue()} grants. */
    public static final int DEFAULT_SHARED_CREDITS = 6;

    /**
     * The most credits per connection on a shared receive queue: with its two probe buffers, one
     * connection fits the deepest queue a loop makes ({@link SharedReceives#MAX_DEPTH}).
     */
    public static final int MAX_SHARED_CREDITS = SharedReceives.MAX_DEPTH - RdmaStream.SPARE_RECEIVES;

    /** The loop's shared send buffers {@link #withSharedReceiveQueue()} registers at most (8 MiB). */
    public static final long DEFAULT_SHARED_SEND_BYTES = 8L << 20;

    /** Validates the values (see the methods that set them). */
    public RdmaTransportConfig {
        if (sharedReceiveCredits != 0
                && (sharedReceiveCredits < Credits.MIN_RECEIVE_BUFFERS || sharedReceiveCredits > MAX_SHARED_CREDITS)) {
            throw new IllegalArgumentException("sharedReceiveCredits " + sharedReceiveCredits + ": 0 (off) or "
                    + Credits.MIN_RECEIVE_BUFFERS + ".." + MAX_SHARED_CREDITS
                    + " (the credit rules need four; one connection's credits must fit the loop's queue)");
        }
        if (sharedBufferSize < 64 || sharedBufferSize > Handshake.MAX_BUFFER_SIZE) {
            throw new IllegalArgumentException("sharedBufferSize " + sharedBufferSize + ": 64.."
                    + Handshake.MAX_BUFFER_SIZE + " bytes (the largest receive buffer a peer accepts)");
        }
        if (maxReceiveBytes <= 0) {
            throw new IllegalArgumentException(
                    "maxReceiveBytes " + maxReceiveBytes + ": a positive byte count (Long.MAX_VALUE: no cap)");
        }
        if (sharedSendBytes < 0) {
            throw new IllegalArgumentException("sharedSendBytes " + sharedSendBytes
                    + ": 0 (each connection registers its own send buffers) or a positive byte count");
        }
    }

    /** Only {@code busyPoll} set; the rest as in {@link #defaults()}. */
    public RdmaTransportConfig(boolean busyPoll) {
        this(busyPoll, 0, 16 << 10, Long.MAX_VALUE, DEFAULT_SHARED_SEND_BYTES);
    }

    /**
     * The defaults: the loop blocks until a completion, a task or a wake-up; each connection posts
     * its own receive buffers; no cap on the loop's receive memory.
     */
    public static RdmaTransportConfig defaults() {
        return new RdmaTransportConfig(false);
    }

    /** This configuration with busy-polling on or off. */
    public RdmaTransportConfig withBusyPoll(boolean on) {
        return new RdmaTransportConfig(on, sharedReceiveCredits, sharedBufferSize, maxReceiveBytes, sharedSendBytes);
    }

    /** This configuration with a shared receive queue per loop, {@link #DEFAULT_SHARED_CREDITS} credits per connection. */
    public RdmaTransportConfig withSharedReceiveQueue() {
        return withSharedReceiveQueue(DEFAULT_SHARED_CREDITS, sharedBufferSize);
    }

    /**
     * This configuration with a shared receive queue per loop: each connection grants its peer
     * {@code credits} buffers of {@code bufferSize} bytes (the channel's
     * {@link RdmaChannelOption#RECEIVE_BUFFERS} then does not apply; with
     * {@link RdmaChannelOption#ZERO_COPY_READS} frames are handed up in the loop's buffers, at most
     * {@code (credits - 1) / 2} held per connection). {@code credits} 0 turns
     * it off, else 4 to {@link #MAX_SHARED_CREDITS}; {@code bufferSize} 64 bytes to 16 MiB.
     */
    public RdmaTransportConfig withSharedReceiveQueue(int credits, int bufferSize) {
        return new RdmaTransportConfig(busyPoll, credits, bufferSize, maxReceiveBytes, sharedSendBytes);
    }

    /** This configuration with the loop's receive memory capped at {@code bytes}. */
    public RdmaTransportConfig withMaxReceiveBytes(long bytes) {
        return new RdmaTransportConfig(busyPoll, sharedReceiveCredits, sharedBufferSize, bytes, sharedSendBytes);
    }

    /**
     * This configuration with, on a shared receive queue, the loop's shared send buffers capped at
     * {@code bytes} (registered in chunks as its connections' sends need them); 0: each connection
     * registers its own.
     */
    public RdmaTransportConfig withSharedSendBytes(long bytes) {
        return new RdmaTransportConfig(busyPoll, sharedReceiveCredits, sharedBufferSize, maxReceiveBytes, bytes);
    }

    /** Whether the loop's connections share one receive queue. */
    boolean shared() {
        return sharedReceiveCredits > 0;
    }

    /** Whether the loop's connections share its registered send buffers. */
    boolean sharedSends() {
        return shared() && sharedSendBytes > 0;
    }
}
