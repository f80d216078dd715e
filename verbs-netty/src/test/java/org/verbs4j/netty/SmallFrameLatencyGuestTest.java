package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Small frames echoed one at a time on rxe0, each round trip waiting for the one before: every
 * echo must be brought back by completion events and wake-ups alone. The loops wait without a
 * timeout here (they never wake for a scheduled task), so a completion whose event is missed, or
 * a frame or credit left for a later loop turn, stalls the echo and fails the bounded wait. The
 * round trips are printed (p50, p99) beside the same echoes with busy-polling loops, with how the
 * waits of every loop in the JVM ended; those figures are reported, not asserted.
 */
@RdmaTest
class SmallFrameLatencyGuestTest {
    private static final int PORT = 23_000 + (int) (ProcessHandle.current().pid() % 10_000);
    private static final int ECHOES = 300, SIZE = 25;

    /** Echoes every buffer back. */
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.writeAndFlush(msg);
        }
    }

    /** Releases a permit for every {@link #SIZE} bytes that come back. */
    private static final class Returns extends ChannelInboundHandlerAdapter {
        final Semaphore echoes = new Semaphore(0);
        long bytes;

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            long before = bytes / SIZE;
            bytes += b.readableBytes();
            b.release();
            echoes.release((int) (bytes / SIZE - before));
        }
    }

    @Test
    void smallEchoesComeBackWithoutATimerWakeUp() throws Exception {
        long[] rtt = echoes(RdmaIoHandler.newFactory(RdmaTransportConfig.defaults(), true), PORT, "event-driven");
        assertEquals(ECHOES, rtt.length);
    }

    @Test
    void busyPollingLoopsEchoToo() throws Exception {
        long[] rtt = echoes(
                RdmaIoHandler.newFactory(RdmaTransportConfig.defaults().withBusyPoll(true)), PORT + 1, "busy-polling");
        assertEquals(ECHOES, rtt.length);
    }

    private static long[] echoes(io.netty.channel.IoHandlerFactory factory, int port, String what) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, factory);
        try {
            InetSocketAddress at = new InetSocketAddress(RdmaTestSupport.guestIp(), port);
            Channel server = await(new ServerBootstrap()
                            .group(group)
                            .channel(RdmaServerSocketChannel.class)
                            .childHandler(new ChannelInitializer<SocketChannel>() {
                                @Override
                                protected void initChannel(SocketChannel ch) {
                                    ch.pipeline().addLast(new Echo());
                                }
                            })
                            .bind(at))
                    .channel();
            Returns returns = new Returns();
            Channel client = await(new Bootstrap()
                            .group(group)
                            .channel(RdmaSocketChannel.class)
                            .handler(returns)
                            .connect(at))
                    .channel();
            byte[] payload = new byte[SIZE];
            Arrays.fill(payload, (byte) 7);
            long[] rtt = new long[ECHOES];
            long readable = RdmaIoHandler.WAITS_READABLE.get(), woken = RdmaIoHandler.WAITS_WOKEN.get();
            long timedOut = RdmaIoHandler.WAITS_TIMED_OUT.get(), events = RdmaIoHandler.EVENTS.get();
            for (int i = 0; i < ECHOES; i++) {
                long t0 = System.nanoTime();
                client.writeAndFlush(Unpooled.wrappedBuffer(payload));
                assertTrue(
                        returns.echoes.tryAcquire(30, TimeUnit.SECONDS),
                        what + " echo " + i + " of " + SIZE + " bytes came back within 30 s");
                rtt[i] = System.nanoTime() - t0;
            }
            long dTimedOut = RdmaIoHandler.WAITS_TIMED_OUT.get() - timedOut;
            System.out.printf(
                    "[small-frame] %s: %d echoes of %d B: round trip p50 %.1f us, p99 %.1f us; per round trip: "
                            + "%.2f waits ended by an event, %.2f by a wake-up, %.2f by the timeout, %.2f events%n",
                    what,
                    ECHOES,
                    SIZE,
                    percentile(rtt, 50) / 1e3,
                    percentile(rtt, 99) / 1e3,
                    (RdmaIoHandler.WAITS_READABLE.get() - readable) / (double) ECHOES,
                    (RdmaIoHandler.WAITS_WOKEN.get() - woken) / (double) ECHOES,
                    dTimedOut / (double) ECHOES,
                    (RdmaIoHandler.EVENTS.get() - events) / (double) ECHOES);
            await(client.close());
            await(server.close());
            return rtt;
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS);
        }
    }

    private static ChannelFuture await(ChannelFuture f) throws InterruptedException {
        assertTrue(f.await(30, TimeUnit.SECONDS), "within 30 s: " + f);
        assertTrue(f.isSuccess(), "failed: " + f.cause());
        return f;
    }

    private static long percentile(long[] values, int p) {
        long[] s = values.clone();
        Arrays.sort(s);
        return s[Math.min(s.length - 1, s.length * p / 100)];
    }
}
