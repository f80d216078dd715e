package org.verbs4j.netty;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The transport's totals in this JVM, for tests and monitoring: registered memory, open
 * connections, receive buffers posted. A snapshot ({@link #snapshot()}); the counters are
 * updated by the event loops and the connecting threads.
 *
 * @param registeredBytes bytes of memory registered for connections now (receive and send buffers)
 * @param connections connections open now (connected, not yet closed)
 * @param postedReceives receive buffers posted now
 * @param connectionsOpened connections ever made
 * @param bytesCopied stream bytes ever copied into registered send buffers (heap and foreign buffers)
 * @param bytesSentInPlace stream bytes ever posted straight from {@link RdmaByteBufAllocator} buffers
 * @param bytesReadCopied stream bytes ever copied out of receive buffers into the channel allocator's buffers
 * @param bytesReadInPlace stream bytes ever handed up in the receive buffers they arrived in
 *     ({@link RdmaChannelOption#ZERO_COPY_READS})
 * @param sharedPostedReceives receive buffers posted now to the loops' shared receive queues (of
 *     {@code postedReceives}; {@link RdmaTransportConfig#withSharedReceiveQueue}); one loop's:
 *     {@link RdmaIoHandler#stats(io.netty.channel.EventLoop)}
 * @param sharedSendRegisteredBytes bytes registered now for the loops' shared send buffers (of
 *     {@code registeredBytes}; {@link RdmaTransportConfig#sharedSendBytes()})
 */
public record RdmaStats(
        long registeredBytes,
        long connections,
        long postedReceives,
        long connectionsOpened,
        long bytesCopied,
        long bytesSentInPlace,
        long bytesReadCopied,
        long bytesReadInPlace,
        long sharedPostedReceives,
        long sharedSendRegisteredBytes) {
    static final AtomicLong REGISTERED = new AtomicLong();
    static final AtomicLong CONNECTIONS = new AtomicLong();
    static final AtomicLong POSTED = new AtomicLong();
    static final AtomicLong OPENED = new AtomicLong();
    static final AtomicLong COPIED = new AtomicLong();
    static final AtomicLong SENT_IN_PLACE = new AtomicLong();
    static final AtomicLong READ_COPIED = new AtomicLong();
    static final AtomicLong READ_IN_PLACE = new AtomicLong();
    static final AtomicLong SHARED_POSTED = new AtomicLong();
    static final AtomicLong SHARED_SEND_REGISTERED = new AtomicLong();

    /** The totals now. */
    public static RdmaStats snapshot() {
        return new RdmaStats(
                REGISTERED.get(),
                CONNECTIONS.get(),
                POSTED.get(),
                OPENED.get(),
                COPIED.get(),
                SENT_IN_PLACE.get(),
                READ_COPIED.get(),
                READ_IN_PLACE.get(),
                SHARED_POSTED.get(),
                SHARED_SEND_REGISTERED.get());
    }
}
