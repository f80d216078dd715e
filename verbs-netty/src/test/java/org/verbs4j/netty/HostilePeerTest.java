package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Method;
import java.lang.reflect.RecordComponent;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.cm.CmEventChannel;
import org.verbs4j.cm.ConnectionFailedException;
import org.verbs4j.cm.ConnectionSetup;
import org.verbs4j.cm.RdmaConnection;

/**
 * A peer that speaks the transport's wire format wrongly, written with verbs4j's own connection
 * manager and verbs: a handshake that is not one, credits never owed, a frame without its credit
 * count, a frame longer than the receive buffer it lands in, and silence (it never returns a
 * credit, and keeps no receive buffer for the transport's probes). The transport's server must close that connection with a clear error, grow no
 * registered memory, and go on serving a well-behaved client on the same (single) event loop.
 * The handshake bytes come from the transport's own {@code Handshake}, so the peer's bytes are
 * wrong only where the test means them to be.
 */
@OverTransport(inTier = false)
class HostilePeerTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    /** The hostile side's receive buffers (what its handshake announces) and their size. */
    private static final int BUFFERS = 16, BUFFER_SIZE = 16 << 10;
    /** The send slot: larger than any receive buffer the server posts by default. */
    private static final int SEND_SLOT = 256 << 10;

    private static final byte[] FLOOD = "flood".getBytes(StandardCharsets.US_ASCII);

    private final TestTransport transport = TestTransport.current();
    private final BlockingQueue<Throwable> serverErrors = new LinkedBlockingQueue<>();
    private final BlockingQueue<Channel> serverClosed = new LinkedBlockingQueue<>();
    private final BlockingQueue<Channel> serverOpened = new LinkedBlockingQueue<>();
    private final BlockingQueue<ChannelFuture> floods = new LinkedBlockingQueue<>();
    private EventLoopGroup group;
    private Channel server;

    @BeforeEach
    void start() {
        assumeTrue(transport == TestTransport.RDMA, "a hostile peer speaks the RDMA transport's wire format");
        group = transport.newGroup(1, "hostile"); // one loop: the hostile connection and the good one share it
        server = bind(RdmaSocketChannelConfig.DEFAULT_PROBE_INTERVAL_MS);
    }

    /** The server, probing a peer that holds every credit each {@code probeMillis} (0: never). */
    private Channel bind(int probeMillis) {
        return transport
                .serverBootstrap(group)
                .childOption(RdmaChannelOption.PROBE_INTERVAL_MILLIS, probeMillis)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new ServerSide());
                    }
                })
                .bind(transport.address(0))
                .syncUninterruptibly()
                .channel();
    }

    @AfterEach
    void stop() {
        TestTransport.close(server, group);
    }

    @Test
    void creditsNeverOwedCloseTheConnectionAndTheLoopServesAnother() throws Exception {
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            h.send(true, 1_000_000, 1);
            assertClosedWithError("credit");
        }
        assertGoodClientServed();
    }

    @Test
    void aFrameWithoutItsCreditCountClosesTheConnection() throws Exception {
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            h.send(false, 0, 1);
            assertClosedWithError("credit");
        }
        assertGoodClientServed();
    }

    @Test
    void aFrameLongerThanTheReceiveBufferClosesTheConnection() throws Exception {
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            int serverBuffer = h.serverBufferSize();
            assertTrue(serverBuffer < SEND_SLOT, "the server's receive buffers (" + serverBuffer + " B) fit the test");
            h.send(true, 0, serverBuffer + 1);
            assertClosedWithError("");
        }
        assertGoodClientServed();
    }

    @Test
    void bytesAfterTheEndOfStreamCloseTheConnection() throws Exception {
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            halfClosing(); // the server's channel stays open once the input ended
            h.send(true, ReceivedFrames.END_OF_STREAM, 0);
            h.sendBytes(FLOOD);
            assertClosedWithError("after its end of stream");
        }
        assertGoodClientServed();
    }

    @Test
    void aSecondEndOfStreamClosesTheConnection() throws Exception {
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            halfClosing();
            h.send(true, ReceivedFrames.END_OF_STREAM, 0);
            h.send(true, ReceivedFrames.END_OF_STREAM, 0);
            assertClosedWithError("second end-of-stream");
        }
        assertGoodClientServed();
    }

    /**
     * With the loop's shared receive queue a frame beyond the peer's credits lands in a buffer
     * reserved for another connection (no receiver-not-ready stops it): the server counts the
     * frames against the credits it granted and closes the connection at the first one beyond.
     * The server's channel reads nothing (AUTO_READ off), so it returns no credit.
     */
    @Test
    void framesBeyondTheCreditsGrantedCloseASharedQueueConnection() throws Exception {
        TestTransport.close(server, group);
        group = new io.netty.channel.MultiThreadIoEventLoopGroup(
                1, RdmaIoHandler.newFactory(RdmaTransportConfig.defaults().withSharedReceiveQueue()));
        java.util.concurrent.atomic.AtomicBoolean holdFirst = new java.util.concurrent.atomic.AtomicBoolean(true);
        server = transport
                .serverBootstrap(group)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        if (holdFirst.getAndSet(false)) {
                            ch.config().setAutoRead(false); // the hostile connection: nothing handed up
                        }
                        ch.pipeline().addLast(new ServerSide());
                    }
                })
                .bind(transport.address(0))
                .syncUninterruptibly()
                .channel();
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            int credits = RdmaTransportConfig.DEFAULT_SHARED_CREDITS;
            for (int i = 0; i <= credits; i++) {
                h.send(true, 0, 1);
            }
            assertClosedWithError("frame " + (credits + 1) + " but was granted only " + credits + " credits");
        }
        assertGoodClientServed();
    }

    /** Turns ALLOW_HALF_CLOSURE on for the server's channel of the hostile connection. */
    private void halfClosing() throws InterruptedException {
        Channel child = serverOpened.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertNotNull(child, "the server accepted the hostile connection within " + WAIT);
        child.config().setOption(ChannelOption.ALLOW_HALF_CLOSURE, true);
    }

    @Test
    void aHandshakeThatIsNotOneIsRefusedAndTheLoopServesAnother() throws Exception {
        byte[] bogus = handshake(BUFFERS, BUFFER_SIZE);
        bogus[0] ^= 0x55; // the magic number
        assertThrows(ConnectionFailedException.class, () -> new Hostile(bogus).close());
        byte[] huge = handshake(1 << 30, BUFFER_SIZE); // more receive buffers than any side may announce
        assertThrows(ConnectionFailedException.class, () -> new Hostile(huge).close());
        assertGoodClientServed();
    }

    @Test
    void aSilentPeerStallsOnlyItsOwnConnection() throws Exception {
        server.close().syncUninterruptibly();
        server = bind(0); // no probes: the wait itself is what this test watches
        Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE));
        try {
            Channel child = serverOpened.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(child, "the server accepted the hostile connection");
            long registered = registeredBytes();
            ChannelFuture last = flood(h, child);
            assertFalse(last.isDone(), "the flood cannot complete without credits");
            assertEquals(registered, registeredBytes(), "registered memory while writes wait for credits");
            assertGoodClientServed();
            h.close();
            assertTrue(last.await(WAIT.toMillis()), "the waiting write ends when the peer goes");
            assertFalse(last.isSuccess(), "a write the peer never took fails, it does not vanish");
            assertTrue(child.closeFuture().await(WAIT.toMillis()), "the server's channel closed when the peer went");
        } finally {
            h.close();
        }
    }

    @Test
    void aSilentPeerThatTakesNoProbeIsClosedWithTheProbesError() throws Exception {
        server.close().syncUninterruptibly();
        server = bind(100);
        try (Hostile h = new Hostile(handshake(BUFFERS, BUFFER_SIZE))) {
            Channel child = serverOpened.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(child, "the server accepted the hostile connection");
            ChannelFuture last = flood(h, child);
            assertClosedWithError("a probe of the peer");
            assertTrue(last.await(WAIT.toMillis()), "the waiting write ends when the probe fails");
            assertFalse(last.isSuccess(), "a write the peer never took fails, it does not vanish");
            assertGoodClientServed();
        }
    }

    /** Asks the server for its flood; returns its last write once the channel is unwritable. */
    private ChannelFuture flood(Hostile h, Channel child) throws InterruptedException {
        h.sendBytes(FLOOD); // the server answers with 1 MiB, of which the peer takes BUFFERS frames at most
        ChannelFuture last = floods.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertNotNull(last, "the server's flood was written");
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (child.isWritable() && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertFalse(child.isWritable(), "the server's channel to a peer that returns no credit is unwritable");
        return last;
    }

    private void assertClosedWithError(String mentions) throws InterruptedException {
        Channel closed = serverClosed.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertNotNull(closed, "the server closed the hostile connection within " + WAIT);
        Throwable e = serverErrors.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertNotNull(e, "the server's pipeline saw why it closed");
        assertTrue(
                String.valueOf(e.getMessage()).contains(mentions),
                "the error names the violation (" + mentions + "): " + e);
    }

    /** A well-behaved client of the same transport, on the same loop, gets its echo. */
    private void assertGoodClientServed() throws Exception {
        CompletableFuture<String> echoed = new CompletableFuture<>();
        Channel c = transport
                .bootstrap(group)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        echoed.complete(((ByteBuf) msg).toString(StandardCharsets.US_ASCII));
                        ReferenceCountUtil.release(msg);
                    }
                })
                .connect(new InetSocketAddress(transport.address(0).getAddress(), port()))
                .sync()
                .channel();
        try {
            c.writeAndFlush(Unpooled.copiedBuffer("ping", StandardCharsets.US_ASCII));
            assertEquals("ping", echoed.get(WAIT.toSeconds(), TimeUnit.SECONDS));
        } finally {
            c.close().sync();
        }
        serverOpened.clear();
        serverClosed.clear();
    }

    private int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** The server's side: echoes; answers {@link #FLOOD} with 1 MiB; records errors, opens and closes. */
    private final class ServerSide extends ChannelInboundHandlerAdapter {
        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            serverOpened.add(ctx.channel());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            if (b.readableBytes() == FLOOD.length
                    && b.toString(StandardCharsets.US_ASCII).equals("flood")) {
                b.release();
                ChannelFuture last = null;
                for (int i = 0; i < 256; i++) {
                    last = ctx.write(ctx.alloc().buffer(4096).writeZero(4096));
                }
                ctx.flush();
                floods.add(last);
                return;
            }
            ctx.writeAndFlush(msg);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            serverErrors.add(cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            serverClosed.add(ctx.channel());
        }
    }

    /** The transport's own handshake bytes ({@code Handshake(receiveBuffers, bufferSize).encode()}). */
    private static byte[] handshake(int receiveBuffers, int bufferSize) throws ReflectiveOperationException {
        Class<?> h = Class.forName("org.verbs4j.netty.Handshake");
        Object hs = h.getDeclaredConstructor(int.class, int.class).newInstance(receiveBuffers, bufferSize);
        Method encode = h.getDeclaredMethod("encode");
        return (byte[]) encode.invoke(hs);
    }

    private static long registeredBytes() throws ReflectiveOperationException {
        Object s = Class.forName("org.verbs4j.netty.RdmaStats")
                .getMethod("snapshot")
                .invoke(null);
        for (RecordComponent rc : s.getClass().getRecordComponents()) {
            if (rc.getName().equals("registeredBytes")) {
                return ((Number) rc.getAccessor().invoke(s)).longValue();
            }
        }
        throw new AssertionError("RdmaStats has no registeredBytes");
    }

    /** A raw verbs4j connection to the server: {@link #BUFFERS} receives posted, one send slot. */
    private final class Hostile implements AutoCloseable {
        private final CmEventChannel events = CmEventChannel.open();
        private final AtomicReference<MemoryRegion> region = new AtomicReference<>();
        private final SendWorkRequests sends = new SendWorkRequests(1, 1);
        private final WorkCompletions wcs = new WorkCompletions(4);
        private final RdmaConnection c;
        private boolean closed;

        Hostile(byte[] handshake) {
            ConnectionSetup setup = new ConnectionSetup().beforeConnect(conn -> {
                MemoryRegion mr = conn.protectionDomain()
                        .allocateMemoryRegion((long) BUFFERS * BUFFER_SIZE + SEND_SLOT, Access.LOCAL_WRITE);
                region.set(mr);
                try (ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1)) {
                    for (int i = 0; i < BUFFERS; i++) {
                        conn.queuePair().postRecv(recvs.clear().add(i).sge(mr, (long) i * BUFFER_SIZE, BUFFER_SIZE));
                    }
                }
            });
            RdmaConnection conn;
            try {
                conn = RdmaConnection.connect(
                        events,
                        new InetSocketAddress(transport.address(0).getAddress(), port()),
                        setup,
                        handshake,
                        WAIT);
            } catch (RuntimeException e) {
                freeRegionAndChannel();
                throw e;
            }
            c = conn;
        }

        /** The server's receive buffer size, from the handshake in its accept. */
        int serverBufferSize() throws ReflectiveOperationException {
            Class<?> h = Class.forName("org.verbs4j.netty.Handshake");
            Object hs = h.getDeclaredMethod("decode", byte[].class).invoke(null, (Object) c.peerPrivateData());
            return (int) h.getDeclaredMethod("bufferSize").invoke(hs);
        }

        /** Sends {@code length} bytes from the send slot, as SEND_WITH_IMM {@code imm} or a plain SEND. */
        void send(boolean withImmediate, int imm, int length) {
            SendWorkRequests w = sends.clear();
            w = withImmediate ? w.sendWithImmediate(1, imm) : w.send(1);
            c.queuePair()
                    .postSend(w.sge(region.get(), (long) BUFFERS * BUFFER_SIZE, length)
                            .signaled());
            c.sendCompletionQueue().poll(wcs, 1, WAIT); // a failed send is as good: the server's reaction is the point
        }

        /** A well-formed frame carrying {@code bytes} and no credits. */
        void sendBytes(byte[] bytes) {
            region.get()
                    .segment()
                    .asSlice((long) BUFFERS * BUFFER_SIZE, bytes.length)
                    .copyFrom(MemorySegment.ofArray(bytes));
            send(true, 0, bytes.length);
        }

        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            c.close();
            freeRegionAndChannel();
        }

        private void freeRegionAndChannel() {
            MemoryRegion mr = region.getAndSet(null);
            if (mr != null) {
                mr.close();
            }
            sends.close();
            wcs.close();
            events.close();
        }
    }
}
