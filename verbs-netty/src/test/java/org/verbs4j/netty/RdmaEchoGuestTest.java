package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.io.ByteArrayOutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * The transport end to end on rxe0 in one JVM: a Netty echo server and client on two event loops
 * of one group, bytes both ways in writes from 1 byte to several frames long (so that frames are
 * cut at the buffer size and credits run out and come back), every byte compared, every write
 * promise completed; then the connections closed and the transport's totals back where they
 * were. And the bounded failures of a connect: nothing listening, an address no RDMA device serves.
 */
@RdmaTest
class RdmaEchoGuestTest {
    private static final int PORT = 21_000 + (int) (ProcessHandle.current().pid() % 10_000);
    private static EventLoopGroup group;

    @BeforeAll
    static void start() {
        group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
    }

    @AfterAll
    static void stop() throws Exception {
        assertTrue(group.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS), "group shut down");
    }

    /** Waits for {@code f} within 30 s and requires success (no test waits unbounded). */
    static ChannelFuture within(ChannelFuture f, String what) throws InterruptedException {
        assertTrue(f.await(30, TimeUnit.SECONDS), what + " within 30 s");
        assertTrue(f.isSuccess(), what + " failed: " + f.cause());
        return f;
    }

    private static InetSocketAddress address(int port) {
        return new InetSocketAddress(RdmaTestSupport.guestIp(), port);
    }

    /** Echoes every buffer back. */
    static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /**
     * Collects what comes back until {@code expected} bytes arrived (then {@link #expect} again for
     * the next round); {@code check} sees each read buffer first, and a check that throws fails
     * {@link #done}. Every read buffer is released.
     */
    static final class Collector extends ChannelInboundHandlerAdapter {
        final ByteArrayOutputStream got = new ByteArrayOutputStream();
        private final Consumer<ByteBuf> check;
        volatile CompletableFuture<byte[]> done = new CompletableFuture<>();
        volatile int expected;

        Collector(int expected) {
            this(expected, b -> {});
        }

        Collector(int expected, Consumer<ByteBuf> check) {
            this.expected = expected;
            this.check = check;
        }

        void expect(int bytes) {
            got.reset();
            expected = bytes;
            done = new CompletableFuture<>();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                check.accept(b);
                byte[] a = new byte[b.readableBytes()];
                b.readBytes(a);
                got.writeBytes(a);
            } catch (Throwable t) {
                done.completeExceptionally(t);
            } finally {
                b.release();
            }
            if (got.size() >= expected) {
                done.complete(got.toByteArray());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    @Test
    void echoesEveryByteInWritesSmallAndLargerThanAFrame() throws Exception {
        RdmaStats before = RdmaIoHandler.stats();
        int port = PORT;
        ChannelFuture bound = new ServerBootstrap()
                .group(group)
                .channel(RdmaServerSocketChannel.class)
                .childOption(RdmaChannelOption.BUFFER_SIZE, 4096)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new Echo());
                    }
                })
                .bind(address(port));
        Channel server = within(bound, "bind").channel();
        Random random = new Random(42);
        List<byte[]> writes = new ArrayList<>();
        int total = 0;
        for (int size : new int[] {1, 7, 4095, 4096, 4097, 20_000, 65_536, 100_003}) {
            byte[] w = new byte[size];
            random.nextBytes(w);
            writes.add(w);
            total += size;
        }
        Collector collector = new Collector(total);
        try {
            ChannelFuture connected = new Bootstrap()
                    .group(group)
                    .channel(RdmaSocketChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 20_000)
                    .option(RdmaChannelOption.BUFFER_SIZE, 4096)
                    .option(RdmaChannelOption.RECEIVE_BUFFERS, 4)
                    .handler(collector)
                    .connect(address(port));
            Channel client = within(connected, "connect").channel();
            assertTrue(client.isActive());
            assertEquals(address(port), client.remoteAddress());
            assertTrue(RdmaIoHandler.stats().connections() > before.connections(), "the client's connection counted");
            ByteArrayOutputStream sent = new ByteArrayOutputStream();
            List<ChannelFuture> promises = new ArrayList<>();
            for (byte[] w : writes) {
                promises.add(client.writeAndFlush(Unpooled.wrappedBuffer(w)));
                sent.writeBytes(w);
            }
            byte[] back = collector.done.get(60, TimeUnit.SECONDS);
            assertArrayEquals(sent.toByteArray(), back, "the echo of every byte, in order");
            for (ChannelFuture f : promises) {
                assertTrue(f.await(10, TimeUnit.SECONDS) && f.isSuccess(), "write promise completed: " + f.cause());
            }
            within(client.close(), "client close");
        } finally {
            within(server.close(), "server close");
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        RdmaStats after = RdmaIoHandler.stats();
        while ((after.connections() != before.connections() || after.registeredBytes() != before.registeredBytes())
                && System.nanoTime() < deadline) {
            Thread.sleep(50); // the server side closes when it sees the disconnect
            after = RdmaIoHandler.stats();
        }
        assertEquals(before.connections(), after.connections(), "connections after both sides closed");
        assertEquals(before.registeredBytes(), after.registeredBytes(), "registered bytes after both sides closed");
        assertEquals(before.postedReceives(), after.postedReceives(), "posted receives after both sides closed");
        assertEquals(before.connectionsOpened() + 2, after.connectionsOpened());
    }

    @Test
    void aConnectWhereNothingListensIsRefusedWithinTheTimeout() throws Exception {
        AtomicInteger active = new AtomicInteger();
        ChannelFuture f = new Bootstrap()
                .group(group)
                .channel(RdmaSocketChannel.class)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 20_000)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        active.incrementAndGet();
                    }
                })
                .connect(address(PORT + 1));
        assertTrue(f.await(30, TimeUnit.SECONDS), "the connect ended within its timeout");
        ConnectException e = assertInstanceOf(ConnectException.class, f.cause());
        assertTrue(e.getMessage().contains("nothing listens"), e.getMessage());
        assertTrue(f.channel().closeFuture().await(10, TimeUnit.SECONDS));
        assertEquals(0, active.get());
    }

    @Test
    void anAddressOnNoRdmaDeviceIsAClearError() throws Exception {
        ChannelFuture f = new Bootstrap()
                .group(group)
                .channel(RdmaSocketChannel.class)
                .handler(new ChannelInboundHandlerAdapter())
                .connect(new InetSocketAddress("127.0.0.1", PORT + 2));
        assertTrue(f.await(30, TimeUnit.SECONDS), "the connect ended");
        ConnectException e = assertInstanceOf(ConnectException.class, f.cause());
        assertTrue(
                e.getMessage()
                        .startsWith("no RDMA device serves 127.0.0.1: rdma_cm binds only to addresses of "
                                + "RDMA-capable interfaces"),
                e.getMessage());
    }
}
