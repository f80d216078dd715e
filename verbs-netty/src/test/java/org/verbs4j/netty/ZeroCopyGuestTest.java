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
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * The zero-copy write path on rxe0: client and echo server both set {@link RdmaByteBufAllocator}
 * as their {@code ChannelOption.ALLOCATOR}, so reads arrive in its buffers and the server echoes
 * them back as they are. Writes of its buffers are posted from the pool's registered memory
 * (the transport's {@link RdmaStats} counts no byte copied, every byte sent in place); the
 * client's heap buffers are copied into send buffers as before. Every echoed byte is compared,
 * and once the channels closed every slot is back in the pool.
 */
@RdmaTest
class ZeroCopyGuestTest {
    private static final int PORT = 23_000 + (int) (ProcessHandle.current().pid() % 10_000);
    private static final int[] SIZES = {1, 7, 4095, 4096, 4097, 20_000, 65_536};
    private static EventLoopGroup group;
    private static RdmaByteBufAllocator alloc;

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

    /** Collects what comes back until {@code expected} bytes arrived; checks each read came in a registered buffer. */
    private static final class Collector extends ChannelInboundHandlerAdapter {
        final ByteArrayOutputStream got = new ByteArrayOutputStream();
        volatile CompletableFuture<byte[]> done = new CompletableFuture<>();
        volatile int expected;

        void expect(int bytes) {
            got.reset();
            expected = bytes;
            done = new CompletableFuture<>();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                if (b.unwrap() == null) {
                    assertInstanceOf(RegisteredByteBuf.class, b, "a read buffer of the channel's allocator");
                }
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
    void writesOfTheAllocatorsBuffersPostInPlaceAndHeapOnesAreCopied() throws Exception {
        InetSocketAddress address = new InetSocketAddress(RdmaTestSupport.guestIp(), PORT);
        Channel server = RdmaEchoGuestTest.within(
                        new ServerBootstrap()
                                .group(group)
                                .channel(RdmaServerSocketChannel.class)
                                .childOption(ChannelOption.ALLOCATOR, alloc)
                                .childHandler(new ChannelInitializer<SocketChannel>() {
                                    @Override
                                    protected void initChannel(SocketChannel ch) {
                                        ch.pipeline().addLast(new RdmaEchoGuestTest.Echo());
                                    }
                                })
                                .bind(address),
                        "bind")
                .channel();
        Collector collector = new Collector();
        Channel client = null;
        try {
            client = RdmaEchoGuestTest.within(
                            new Bootstrap()
                                    .group(group)
                                    .channel(RdmaSocketChannel.class)
                                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 20_000)
                                    .option(ChannelOption.ALLOCATOR, alloc)
                                    .handler(collector)
                                    .connect(address),
                            "connect")
                    .channel();
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
            RdmaStats after = RdmaIoHandler.stats();
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
            after = RdmaIoHandler.stats();
            assertEquals(total(), after.bytesCopied() - before.bytesCopied(), "the heap buffers' bytes copied");
            assertEquals(total(), after.bytesSentInPlace() - before.bytesSentInPlace(), "the echoes sent in place");
        } finally {
            if (client != null) {
                client.close().await(30, TimeUnit.SECONDS);
            }
            server.close().await(30, TimeUnit.SECONDS);
        }
        // the server's child closes on its own when the client went away; its slots return once it did
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (alloc.pool().metrics().bytesInUse() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, alloc.pool().outstandingLeases().size(), "every slot back in the pool");
        assertEquals(0, alloc.fallbacks(), "every direct buffer came from the pool");
    }

    private static int total() {
        int t = 0;
        for (int s : SIZES) {
            t += s;
        }
        return t;
    }
}
