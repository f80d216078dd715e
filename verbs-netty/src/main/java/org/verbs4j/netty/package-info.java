/**
 * A Netty 4.2 transport over RDMA reliable connections: {@link org.verbs4j.netty.RdmaIoHandler}
 * for {@code MultiThreadIoEventLoopGroup}, {@link org.verbs4j.netty.RdmaSocketChannel} and
 * {@link org.verbs4j.netty.RdmaServerSocketChannel}, addressed by IP address and port through
 * rdma_cm. A Netty application switches by changing the event loop group and the channel classes:
 *
 * <pre>{@code
 * EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
 * new Bootstrap().group(group).channel(RdmaSocketChannel.class).handler(...).connect(address);
 * }</pre>
 *
 * <h2>Wire design: SEND/RECV with credits</h2>
 * Each side posts {@code RECEIVE_BUFFERS} receive buffers of {@code BUFFER_SIZE} bytes and tells
 * the peer both in the connection's private data. Bytes written are cut into frames of at most
 * the peer's buffer size, each one SEND_WITH_IMM whose immediate value returns the credits
 * (receive buffers reposted) the sender owes; a frame goes out only with a credit, so the
 * receiver always has a buffer posted and receiver-not-ready is never the normal path. When
 * traffic is one-way the receiver returns credits in an empty frame once it owes half its
 * buffers. SEND/RECV was chosen over RDMA WRITE with immediate into a ring the peer advertises
 * because it grants the peer no remote access at all: the queue pair allows no RDMA WRITE or
 * READ, so a hostile or broken peer can only fill the receive buffers posted for it, and a frame
 * longer than a buffer fails at the device instead of landing anywhere. {@code shutdownOutput()}
 * sends an end-of-stream frame: empty, the immediate value's top bit set (the low 30 bits are
 * credits), posted after every data frame before it under the same credit rule; only credit
 * frames may follow it. A side whose writes wait for credits with no send in flight probes the
 * peer every {@code PROBE_INTERVAL_MILLIS}: an empty frame with the immediate's second bit set,
 * which the peer answers (the second and lowest bits); both land in two receive buffers posted
 * beyond the credits and cost no credit, a probe goes only after the last one's answer, and a
 * dead peer fails it with a transport retry error (as TCP's persist timer finds a dead peer
 * behind a zero window).
 * A frame without its credit count, credits never owed, an end-of-stream or probe frame with
 * bytes or a second end of stream, or bytes after it close the connection with a
 * {@link org.verbs4j.netty.ProtocolViolationException}.
 *
 * <h2>Threads</h2>
 * Each event loop blocks in {@code poll(2)} on its completion channel and a wake-up event fd;
 * resolving, connecting and accepting run on daemon connecting threads (each step bounded by
 * CONNECT_TIMEOUT_MILLIS) and hand the connection to the loop; connection-manager events are
 * read by the library's event thread.
 */
package org.verbs4j.netty;
