package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.IllegalReferenceCountException;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Zero copy on rxe0. Writes: client and echo server both set {@link RdmaByteBufAllocator} as
 * their {@code ChannelOption.ALLOCATOR}, so reads arrive in its buffers and the server echoes
 * them back as they are; writes of its buffers are posted from the pool's registered memory (the
 * transport's {@link RdmaStats} counts no byte copied, every byte sent in place), the client's
 * heap buffers are copied into send buffers. Reads ({@link RdmaChannelOption#ZERO_COPY_READS}):
 * every frame is handed up in the receive buffer it arrived in (no byte copied on the read side),
 * reposted once released; a handler that keeps every buffer it reads gets the bound's worth in
 * place and the rest copied, and its peer never stops; buffers released after the channel closed
 * still hold their bytes and repost nothing. On loops with a shared receive queue the same holds
 * with the loop's buffers, given back to the loop's queue when released, even after the channel
 * closed, and kept registered past the queue's close (and the loop's shutdown) until the last is
 * released. Every byte is compared; afterwards the pool, the transport's totals and
 * {@code rdma res} are back where they were.
 */
@RdmaTest
class ZeroCopyGuestTest {
    private static final int PORT = 23_000 + (int) (ProcessHandle.current().pid() % 10_000);
    private static final int[] SIZES = {1, 7, 4095, 4096, 4097, 20_000, 65_536};
    private static EventLoopGroup group;
    private static RdmaByteBufAllocator alloc;
    /** The connections the servers accepted (closed by {@link #closeAll}). */
    private static final List<Channel> children = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        alloc = RdmaByteBufAllocator.forAddress(java.net.InetAddress.getByName(RdmaTestSupport.guestIp()));
    }

    @AfterAll
    static void stop() throws Exception {
        assertTrue(group.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS), "group shut down");
        alloc.close();
    }

    /** A read buffer of the channel's allocator (the copying read path into {@link RdmaByteBufAllocator}). */
    private static void registered(ByteBuf b) {
        if (b.unwrap() == null) {
            assertInstanceOf(RegisteredByteBuf.class, b, "a read buffer of the channel's allocator");
        }
    }

    /**
     * The stats once {@code expected} bytes were counted as sent in place since {@code before} (at
     * most 10 s): the server's loop counts a frame after its post returned, which may be after the
     * client already received it.
     */
    private static RdmaStats sentInPlace(RdmaStats before, long expected) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        RdmaStats now = RdmaIoHandler.stats();
        while (now.bytesSentInPlace() - before.bytesSentInPlace() < expected && System.nanoTime() < deadline) {
            Thread.sleep(10);
            now = RdmaIoHandler.stats();
        }
        return now;
    }

    @Test
    void writesOfTheAllocatorsBuffersPostInPlaceAndHeapOnesAreCopied() throws Exception {
        Channel server = serve(
                new ServerBootstrap().childOption(ChannelOption.ALLOCATOR, alloc), PORT, RdmaEchoGuestTest.Echo::new);
        RdmaEchoGuestTest.Collector collector = new RdmaEchoGuestTest.Collector(0, ZeroCopyGuestTest::registered);
        Channel client = null;
        try {
            client = connect(new Bootstrap().option(ChannelOption.ALLOCATOR, alloc), PORT, collector);
            Random random = new Random(7);

            // the allocator's buffers: written in place both ways (the server echoes its read buffers)
            RdmaStats before = RdmaIoHandler.stats();
            ByteArrayOutputStream sent = new ByteArrayOutputStream();
            collector.expect(total());
            for (int size : SIZES) {
                byte[] w = new byte[size];
                random.nextBytes(w);
                sent.writeBytes(w);
                ByteBuf b = client.alloc().directBuffer(size);
                assertInstanceOf(RegisteredByteBuf.class, b.unwrap() == null ? b : b.unwrap());
                RdmaEchoGuestTest.within(client.writeAndFlush(b.writeBytes(w)), "write of " + size + " bytes");
            }
            assertArrayEquals(sent.toByteArray(), collector.done.get(60, TimeUnit.SECONDS), "every byte echoed");
            RdmaStats after = sentInPlace(before, 2L * total());
            assertEquals(0, after.bytesCopied() - before.bytesCopied(), "bytes copied for the allocator's buffers");
            assertEquals(
                    2L * total(),
                    after.bytesSentInPlace() - before.bytesSentInPlace(),
                    "bytes sent in place (the client's writes and the server's echoes)");

            // heap buffers: copied into the send buffers (the server still echoes in place)
            before = after;
            sent.reset();
            collector.expect(total());
            for (int size : SIZES) {
                byte[] w = new byte[size];
                random.nextBytes(w);
                sent.writeBytes(w);
                RdmaEchoGuestTest.within(
                        client.writeAndFlush(Unpooled.wrappedBuffer(w)), "heap write of " + size + " bytes");
            }
            assertArrayEquals(sent.toByteArray(), collector.done.get(60, TimeUnit.SECONDS), "every byte echoed");
            after = sentInPlace(before, total());
            assertEquals(total(), after.bytesCopied() - before.bytesCopied(), "the heap buffers' bytes copied");
            assertEquals(total(), after.bytesSentInPlace() - before.bytesSentInPlace(), "the echoes sent in place");
        } finally {
            closeAll(client, server);
        }
        // the server's child closes on its own when the client went away; its slots return once it did
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (alloc.pool().metrics().bytesInUse() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, alloc.pool().outstandingLeases().size(), "every slot back in the pool");
        assertEquals(0, alloc.fallbacks(), "every direct buffer came from the pool");
    }

    /** A server on {@code port} whose connections ({@code frame}-byte buffers) each send {@code sent} ({@link Sender}). */
    private static Channel serveSender(int port, byte[] sent, int frame) throws InterruptedException {
        return serve(
                new ServerBootstrap().childOption(RdmaChannelOption.BUFFER_SIZE, frame),
                port,
                () -> new Sender(sent, frame));
    }

    /** A server on {@code port} of the guest's address, a fresh {@code child} handler per connection. */
    private static Channel serve(ServerBootstrap b, int port, Supplier<ChannelHandler> child)
            throws InterruptedException {
        return RdmaEchoGuestTest.within(
                        b.group(group)
                                .channel(RdmaServerSocketChannel.class)
                                .childHandler(new ChannelInitializer<SocketChannel>() {
                                    @Override
                                    protected void initChannel(SocketChannel ch) {
                                        children.add(ch);
                                        ch.pipeline().addLast(child.get());
                                    }
                                })
                                .bind(new InetSocketAddress(RdmaTestSupport.guestIp(), port)),
                        "bind")
                .channel();
    }

    /** Closes the client (if any) and the server, and waits until the server's side of each connection closed. */
    private static void closeAll(Channel client, Channel server) throws InterruptedException {
        if (client != null) {
            assertTrue(client.close().await(30, TimeUnit.SECONDS), "the client closed");
        }
        assertTrue(server.close().await(30, TimeUnit.SECONDS), "the server closed");
        for (Channel ch : children) {
            assertTrue(ch.closeFuture().await(30, TimeUnit.SECONDS), "the server's side closed: " + ch);
        }
        children.clear();
    }

    /** A client connected to {@code port} of the guest's address. */
    private static Channel connect(Bootstrap b, int port, ChannelHandler handler) throws InterruptedException {
        return connectOn(group, b, port, handler);
    }

    /** A read handed up in the receive buffer it arrived in. */
    private static boolean inPlace(ByteBuf b) {
        return (b.unwrap() == null ? b : b.unwrap()) instanceof ReceivedByteBuf;
    }

    @Test
    void readsArriveInTheirReceiveBuffersAndNothingIsCopiedOnTheReadSide() throws Exception {
        // the server holds each read until its echo completed: with 32 receive buffers (15 held at
        // most) every frame of this exchange can be held at once, so none has to be copied
        Channel server = serve(
                new ServerBootstrap()
                        .childOption(RdmaChannelOption.ZERO_COPY_READS, true)
                        .childOption(RdmaChannelOption.RECEIVE_BUFFERS, 32),
                PORT + 1,
                RdmaEchoGuestTest.Echo::new);
        RdmaEchoGuestTest.Collector collector = new RdmaEchoGuestTest.Collector(
                total(), b -> assertTrue(inPlace(b), "a read in its receive buffer: " + b));
        Channel client = null;
        try {
            client = connect(new Bootstrap().option(RdmaChannelOption.ZERO_COPY_READS, true), PORT + 1, collector);
            assertEquals(true, client.config().getOption(RdmaChannelOption.ZERO_COPY_READS));
            RdmaStats before = RdmaIoHandler.stats();
            Random random = new Random(11);
            ByteArrayOutputStream sent = new ByteArrayOutputStream();
            for (int size : SIZES) {
                byte[] w = new byte[size];
                random.nextBytes(w);
                sent.writeBytes(w);
                RdmaEchoGuestTest.within(client.writeAndFlush(Unpooled.wrappedBuffer(w)), "write of " + size);
            }
            assertArrayEquals(sent.toByteArray(), collector.done.get(60, TimeUnit.SECONDS), "every byte echoed");
            RdmaStats after = RdmaIoHandler.stats();
            assertEquals(0, after.bytesReadCopied() - before.bytesReadCopied(), "bytes copied on the read side");
            assertEquals(
                    2L * total(),
                    after.bytesReadInPlace() - before.bytesReadInPlace(),
                    "bytes read in place (the server's reads and the client's)");
        } finally {
            closeAll(client, server);
        }
    }

    /** Keeps every buffer it reads, unreleased; {@link #done} once {@code expected} bytes arrived in all. */
    private static final class Keeper extends ChannelInboundHandlerAdapter {
        final List<ByteBuf> kept = new CopyOnWriteArrayList<>();
        volatile CompletableFuture<Void> done = new CompletableFuture<>();
        volatile int expected;
        private int bytes;

        /** Waits for {@code more} bytes more (a new {@link #done}). */
        void expect(int more) {
            expected += more;
            done = new CompletableFuture<>();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            kept.add(b);
            bytes += b.readableBytes();
            if (bytes >= expected) {
                done.complete(null);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    /** Writes {@code bytes} in buffers of {@code frame} bytes once active, and again for each read. */
    private static final class Sender extends ChannelInboundHandlerAdapter {
        private final byte[] bytes;
        private final int frame;

        Sender(byte[] bytes, int frame) {
            this.bytes = bytes;
            this.frame = frame;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            for (int at = 0; at < bytes.length; at += frame) {
                ctx.write(Unpooled.wrappedBuffer(bytes, at, frame));
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ((ByteBuf) msg).release();
            channelActive(ctx);
        }
    }

    @Test
    void aHandlerKeepingEveryReadNeverStopsItsPeerAndBuffersOutliveTheChannel() throws Exception {
        int frame = 4096, frames = 20, receiveBuffers = 8, held = Credits.maxHeld(receiveBuffers);
        byte[] sent = new byte[frame * frames];
        new Random(13).nextBytes(sent);
        RdmaStats before = RdmaIoHandler.stats();
        long mrBefore = rdmaResCount("mr"), qpBefore = rdmaResCount("qp");
        Channel server = serveSender(PORT + 2, sent, frame);
        Keeper keeper = new Keeper();
        keeper.expect(sent.length);
        Channel client = null;
        int firstRound;
        try {
            client = connect(
                    new Bootstrap()
                            .option(RdmaChannelOption.ZERO_COPY_READS, true)
                            .option(RdmaChannelOption.BUFFER_SIZE, frame)
                            .option(RdmaChannelOption.RECEIVE_BUFFERS, receiveBuffers),
                    PORT + 2,
                    keeper);
            // nothing is released while the bytes arrive: the first frames are held in place, the rest copied
            keeper.done.get(60, TimeUnit.SECONDS);
            assertRead(before, held * frame, (frames - held) * frame);
            firstRound = keeper.kept.size();
            for (int i = 0; i < firstRound; i++) {
                assertEquals(i < held, inPlace(keeper.kept.get(i)), "read " + i + " in place");
            }
            // released here, off the loop, while the channel is open: the receives are reposted, so the
            // next round arrives in place again
            assertArrayEquals(sent, takeAndRelease(keeper.kept.subList(0, firstRound)), "every byte of round 1");
            RdmaStats afterFirst = RdmaIoHandler.stats();
            keeper.expect(sent.length);
            RdmaEchoGuestTest.within(client.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {1})), "request");
            keeper.done.get(60, TimeUnit.SECONDS);
            assertRead(afterFirst, held * frame, (frames - held) * frame + 1); // + the request the server read
            assertTrue(inPlace(keeper.kept.get(firstRound)), "round 2 in place again");
        } finally {
            closeAll(client, server);
        }
        // the channel is closed and its receive region deregistered: the buffers kept still hold their bytes
        List<ByteBuf> secondRound = keeper.kept.subList(firstRound, keeper.kept.size());
        ByteBuf inPlaceAtClose = secondRound.getFirst();
        assertArrayEquals(sent, takeAndRelease(secondRound), "every byte of round 2, read after the close");
        assertThrows(IllegalReferenceCountException.class, inPlaceAtClose::release, "a second release");
        RdmaStats after = RdmaIoHandler.stats(); // both sides closed (closeAll)
        assertEquals(before.connections(), after.connections(), "connections");
        assertEquals(before.registeredBytes(), after.registeredBytes(), "registered bytes");
        assertEquals(before.postedReceives(), after.postedReceives(), "posted receives: none after the close");
        assertEquals(mrBefore, rdmaResCount("mr"), "memory regions (rdma res)");
        assertEquals(qpBefore, rdmaResCount("qp"), "queue pairs (rdma res)");
    }

    @Test
    void onASharedReceiveQueueReadsArriveInTheLoopsBuffersWhichOutliveTheChannelAndTheLoop() throws Exception {
        int frame = 4096, frames = 20, credits = 8, held = Credits.maxHeld(credits);
        RdmaTransportConfig shared = RdmaTransportConfig.defaults().withSharedReceiveQueue(credits, frame);
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(shared));
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(shared));
        try {
            sharedQueueReads(clientGroup, serverGroup, frame, frames, held);
        } finally {
            TestTransport.close(null, clientGroup); // already shut down, unless the test failed
            TestTransport.close(null, serverGroup);
        }
    }

    private static void sharedQueueReads(
            EventLoopGroup clientGroup, EventLoopGroup serverGroup, int frame, int frames, int held) throws Exception {
        EventLoop loop = clientGroup.next();
        byte[] sent = new byte[frame * frames];
        new Random(17).nextBytes(sent);
        RdmaStats before = RdmaIoHandler.stats();
        long mrBefore = rdmaResCount("mr"), pdBefore = rdmaResCount("pd"), srqBefore = rdmaResCount("srq");
        Channel server = RdmaEchoGuestTest.within(
                        new ServerBootstrap()
                                .group(serverGroup)
                                .channel(RdmaServerSocketChannel.class)
                                .childOption(RdmaChannelOption.BUFFER_SIZE, frame)
                                .childOption(RdmaChannelOption.ZERO_COPY_READS, true)
                                .childHandler(new ChannelInitializer<SocketChannel>() {
                                    @Override
                                    protected void initChannel(SocketChannel ch) {
                                        children.add(ch);
                                        ch.pipeline().addLast(new Sender(sent, frame));
                                    }
                                })
                                .bind(new InetSocketAddress(RdmaTestSupport.guestIp(), PORT + 3)),
                        "bind")
                .channel();
        Keeper keeper = new Keeper();
        List<ByteBuf> secondRound;
        try {
            // a second connection on the client's loop keeps its queue open after the first closed
            RdmaEchoGuestTest.Collector other = new RdmaEchoGuestTest.Collector(sent.length);
            Channel b = connectOn(clientGroup, new Bootstrap(), PORT + 3, other);
            assertArrayEquals(sent, other.done.get(60, TimeUnit.SECONDS), "every byte of the other connection");
            RdmaStats start = RdmaIoHandler.stats();
            keeper.expect(sent.length);
            Channel a = connectOn(
                    clientGroup, new Bootstrap().option(RdmaChannelOption.ZERO_COPY_READS, true), PORT + 3, keeper);
            keeper.done.get(60, TimeUnit.SECONDS);
            assertRead(start, held * frame, (frames - held) * frame);
            int firstRound = keeper.kept.size();
            for (int i = 0; i < firstRound; i++) {
                assertEquals(i < held, inPlace(keeper.kept.get(i)), "read " + i + " in place");
            }
            long full = RdmaIoHandler.stats(loop).sharedRegisteredBytes() / frame;
            assertEquals(SharedReceives.CHUNK, full, "the client loop's buffers (one chunk)");
            awaitPosted(loop, full - held, "the held buffers are not posted");
            assertArrayEquals(sent, takeAndRelease(keeper.kept.subList(0, firstRound)), "every byte of round 1");
            awaitPosted(loop, full, "released off the loop, each buffer is reposted");

            // round 2: the server reads the request in place from its loop's queue too
            RdmaStats afterFirst = RdmaIoHandler.stats();
            keeper.expect(sent.length);
            RdmaEchoGuestTest.within(a.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {1})), "request");
            keeper.done.get(60, TimeUnit.SECONDS);
            assertRead(afterFirst, held * frame + 1, (frames - held) * frame);
            secondRound = new ArrayList<>(keeper.kept.subList(firstRound, keeper.kept.size()));
            assertTrue(inPlace(secondRound.getFirst()), "round 2 in place again");

            // the connection closes with three buffers held: one released while the queue is open goes back to it
            assertTrue(a.close().await(30, TimeUnit.SECONDS), "the first connection closed");
            awaitLoop(loop, l -> l.connections() == 1, "the first connection's reservation given back");
            assertArrayEquals(sent, readAll(secondRound), "every byte of round 2, read after the close");
            assertTrue(secondRound.removeFirst().release(), "released after the close");
            awaitPosted(loop, full - (held - 1), "a buffer released after its channel closed is reposted");

            // the last connection goes, and with it the loop's queue: the chunk of the buffers held stays registered
            assertTrue(b.close().await(30, TimeUnit.SECONDS), "the second connection closed");
            awaitLoop(loop, new RdmaLoopStats(0, 0, 0, Long.MAX_VALUE, 0, 0, 0, 0)::equals, "the loop's queue closed");
        } finally {
            for (Channel ch : children) {
                assertTrue(ch.closeFuture().await(30, TimeUnit.SECONDS), "the server's side closed: " + ch);
            }
            children.clear();
            TestTransport.close(server, serverGroup);
        }
        assertChunkHeld(before, srqBefore, frame);
        assertTrue(clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS), "shut down");
        assertEquals(
                (long) SharedReceives.CHUNK * frame,
                RdmaIoHandler.stats().registeredBytes() - before.registeredBytes(),
                "the chunk stays registered past the loop's shutdown");

        // released after the loop is gone: the last lets the chunk and the queue's domain go
        ByteBuf heldAtShutdown = secondRound.getFirst();
        assertTrue(inPlace(heldAtShutdown), "held in place at the shutdown");
        assertArrayEquals(
                java.util.Arrays.copyOfRange(sent, frame, 2 * frame), readAll(List.of(heldAtShutdown)), "its bytes");
        for (ByteBuf kept : secondRound) {
            assertTrue(kept.release(), "released after the loop's shutdown: " + kept);
        }
        assertThrows(IllegalReferenceCountException.class, heldAtShutdown::release, "a second release");
        assertBack(before, mrBefore, pdBefore);
    }

    @Test
    void aSharedQueueLoopShutDownWithReadsHeldLetsItsMemoryGoWithTheLastRelease() throws Exception {
        int frame = 4096, frames = 20, held = Credits.maxHeld(8);
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(
                1, RdmaIoHandler.newFactory(RdmaTransportConfig.defaults().withSharedReceiveQueue(8, frame)));
        byte[] sent = new byte[frame * frames];
        new Random(19).nextBytes(sent);
        RdmaStats before = RdmaIoHandler.stats();
        long mrBefore = rdmaResCount("mr"), pdBefore = rdmaResCount("pd"), srqBefore = rdmaResCount("srq");
        Channel server = serveSender(PORT + 4, sent, frame);
        Keeper keeper = new Keeper();
        keeper.expect(sent.length);
        try {
            connectOn(clientGroup, new Bootstrap().option(RdmaChannelOption.ZERO_COPY_READS, true), PORT + 4, keeper);
            keeper.done.get(60, TimeUnit.SECONDS);
            assertTrue(inPlace(keeper.kept.get(held - 1)), "the first reads held in place");
            // the loop shuts down with the connection open and its reads held: it closes the channel
            assertTrue(clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS), "down");
        } finally {
            closeAll(null, server);
            TestTransport.close(null, clientGroup);
        }
        assertChunkHeld(before, srqBefore, frame);
        assertArrayEquals(sent, takeAndRelease(keeper.kept), "every byte, read after the loop's shutdown");
        assertBack(before, mrBefore, pdBefore);
    }

    /** The loop's queue closed with buffers held: only the chunk they lie in is still registered. */
    private static void assertChunkHeld(RdmaStats before, long srqBefore, int frame) throws Exception {
        assertEquals(srqBefore, rdmaResCount("srq"), "the queue closed with buffers held (rdma res srq)");
        assertEquals(
                (long) SharedReceives.CHUNK * frame,
                RdmaIoHandler.stats().registeredBytes() - before.registeredBytes(),
                "the chunk of the buffers held stays registered");
    }

    /** Every buffer released: the totals and {@code rdma res} as {@code before}. */
    private static void assertBack(RdmaStats before, long mrBefore, long pdBefore) throws Exception {
        RdmaStats after = RdmaIoHandler.stats();
        assertEquals(before.connections(), after.connections(), "connections");
        assertEquals(before.registeredBytes(), after.registeredBytes(), "registered bytes");
        assertEquals(before.postedReceives(), after.postedReceives(), "posted receives");
        assertEquals(before.sharedPostedReceives(), after.sharedPostedReceives(), "posted to shared queues");
        assertEquals(mrBefore, rdmaResCount("mr"), "memory regions (rdma res)");
        assertEquals(pdBefore, rdmaResCount("pd"), "protection domains (rdma res)");
    }

    /** A client on {@code clients} connected to {@code port} of the guest's address. */
    private static Channel connectOn(EventLoopGroup clients, Bootstrap b, int port, ChannelHandler handler)
            throws InterruptedException {
        return RdmaEchoGuestTest.within(
                        b.group(clients)
                                .channel(RdmaSocketChannel.class)
                                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 20_000)
                                .handler(handler)
                                .connect(new InetSocketAddress(RdmaTestSupport.guestIp(), port)),
                        "connect")
                .channel();
    }

    /** Waits (at most 10 s) until {@code loop}'s shared queue has {@code posted} buffers posted. */
    private static void awaitPosted(EventLoop loop, long posted, String what) throws InterruptedException {
        awaitLoop(loop, l -> l.sharedPostedReceives() == posted, what + " (" + posted + " posted)");
    }

    /** Waits (at most 10 s) until {@code loop}'s stats pass {@code check}. */
    private static void awaitLoop(EventLoop loop, Predicate<RdmaLoopStats> check, String what)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        RdmaLoopStats now = RdmaIoHandler.stats(loop);
        while (!check.test(now) && System.nanoTime() < deadline) {
            Thread.sleep(10);
            now = RdmaIoHandler.stats(loop);
        }
        assertTrue(check.test(now), what + ": " + now);
    }

    /** The bytes of {@code buffers}, in order, read without moving their reader index or releasing them. */
    private static byte[] readAll(List<ByteBuf> buffers) {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        for (ByteBuf b : buffers) {
            byte[] a = new byte[b.readableBytes()];
            b.getBytes(b.readerIndex(), a);
            got.writeBytes(a);
        }
        return got.toByteArray();
    }

    /** Since {@code from}: {@code inPlace} bytes read in place, {@code copied} read copied. */
    private static void assertRead(RdmaStats from, long inPlace, long copied) {
        RdmaStats now = RdmaIoHandler.stats();
        assertEquals(inPlace, now.bytesReadInPlace() - from.bytesReadInPlace(), "bytes read in place");
        assertEquals(copied, now.bytesReadCopied() - from.bytesReadCopied(), "bytes read copied");
    }

    /** The bytes of {@code buffers}, in order, each released once read. */
    private static byte[] takeAndRelease(List<ByteBuf> buffers) {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        for (ByteBuf b : buffers) {
            byte[] a = new byte[b.readableBytes()];
            b.readBytes(a);
            got.writeBytes(a);
            assertTrue(b.release(), "released: " + b);
        }
        return got.toByteArray();
    }

    /** The number of {@code kind} resources {@code rdma res show} lists, over all devices (-1 outside the guest). */
    private static long rdmaResCount(String kind) throws Exception {
        if (!RdmaTestSupport.inGuest()) {
            return -1;
        }
        long n = 0;
        for (String line : ScaleOverTransportTest.rdmaRes().split("\n")) {
            String[] t = line.strip().split("\\s+");
            for (int i = 2; i + 1 < t.length; i++) {
                if (t[i].equals(kind)) {
                    n += Long.parseLong(t[i + 1]);
                }
            }
        }
        return n;
    }

    private static int total() {
        int t = 0;
        for (int s : SIZES) {
            t += s;
        }
        return t;
    }
}
