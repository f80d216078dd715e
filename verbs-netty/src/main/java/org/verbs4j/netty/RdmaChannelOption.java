package org.verbs4j.netty;

import io.netty.channel.ChannelOption;

/**
 * The channel options of this transport, beside Netty's own ({@code SO_RCVBUF} and
 * {@code SO_SNDBUF} set {@link #RECEIVE_BUFFERS} and {@link #SEND_BUFFERS} from a byte count:
 * the count divided by {@link #BUFFER_SIZE}, at least four). Read when a connection is made;
 * later changes apply to the next connection.
 *
 * @param <T> the option's value type
 */
public final class RdmaChannelOption<T> extends ChannelOption<T> {
    /** Bytes of each receive and send buffer: the largest frame on the wire (default 16 KiB). */
    public static final ChannelOption<Integer> BUFFER_SIZE = valueOf(RdmaChannelOption.class, "RDMA_BUFFER_SIZE");

    /** Receive buffers each connection posts: the peer's credits (default 16, at least 4). */
    public static final ChannelOption<Integer> RECEIVE_BUFFERS =
            valueOf(RdmaChannelOption.class, "RDMA_RECEIVE_BUFFERS");

    /**
     * Send buffers each connection copies outgoing bytes into: frames in flight (default 16, at
     * least 4). On a loop whose connections share its send buffers
     * ({@link RdmaTransportConfig#sharedSendBytes()}) it bounds the frames in flight only.
     */
    public static final ChannelOption<Integer> SEND_BUFFERS = valueOf(RdmaChannelOption.class, "RDMA_SEND_BUFFERS");

    /**
     * How long writes wait for the peer's credits, with no send in flight, before the peer is probed
     * (and again as long as they wait), in milliseconds (default 1,000; 0: never). A probe costs no
     * credit; a peer that is gone fails it, so the channel closes with that error instead of
     * waiting forever, as TCP's persist timer does behind a zero window.
     */
    public static final ChannelOption<Integer> PROBE_INTERVAL_MILLIS =
            valueOf(RdmaChannelOption.class, "RDMA_PROBE_INTERVAL_MILLIS");

    /**
     * Hands each received frame up the pipeline in the registered receive buffer it arrived in,
     * uncopied; that receive is reposted (its credit returned to the peer) only when the buffer
     * is released. At most {@code (RECEIVE_BUFFERS - 1) / 2} such buffers are held by the
     * application at once: frames beyond that are copied into the allocator's buffers, as without
     * this option, so that handlers that keep what they read (aggregators, decoders waiting for
     * more) never stop the peer. On a loop with a shared receive queue the frame is handed up in
     * the loop's buffer, and the cap counts the connection's credits
     * ({@link RdmaTransportConfig#withSharedReceiveQueue(int, int)}). A buffer released after the
     * channel closed keeps its memory until released: then it only drops it, or gives the loop's
     * buffer back. Default false.
     */
    public static final ChannelOption<Boolean> ZERO_COPY_READS =
            valueOf(RdmaChannelOption.class, "RDMA_ZERO_COPY_READS");

    @SuppressWarnings("deprecation")
    private RdmaChannelOption() {
        super("unused");
    }
}
