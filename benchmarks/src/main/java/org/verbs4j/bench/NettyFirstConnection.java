package org.verbs4j.bench;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The first connection of a fresh JVM through a Netty transport, phase by phase: the event loop
 * groups made, the server bound, the client connected, one byte echoed; then the same once more in
 * the same JVM, warm. Each phase prints its milliseconds and the classes it loaded. Not a timed
 * test: a report, run in a fresh JVM per figure ({@code java -cp verbs4j-benchmarks.jar
 * org.verbs4j.bench.NettyFirstConnection ADDRESS [rdma|nio]}).
 */
public final class NettyFirstConnection {
    private static final long BOUND_SECONDS = 600;

    private NettyFirstConnection() {}

    public static void main(String[] args) throws Exception {
        InetAddress ip = InetAddress.getByName(args.length > 0 ? args[0] : "10.0.0.1");
        String transport = args.length > 1 ? args[1] : "rdma";
        long atMain = ManagementFactory.getRuntimeMXBean().getUptime();
        System.out.printf(Locale.ROOT, "first connection (%s): JVM start to main %d ms%n", transport, atMain);
        Phases p = new Phases(transport);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(
                2, new DefaultThreadFactory("first-connection", true), NettyBench.factory(transport));
        p.end("groups");
        try {
            connectOnce(p, group, transport, ip);
            System.out.printf(
                    Locale.ROOT, "first connection (%s): JVM start to first echo %d ms%n", transport, p.uptime());
            connectOnce(new Phases(transport + ", again"), group, transport, ip);
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static void connectOnce(Phases p, EventLoopGroup group, String transport, InetAddress ip) throws Exception {
        CompletableFuture<Void> echoed = new CompletableFuture<>();
        Channel server = new ServerBootstrap()
                .group(group)
                .channel(NettyBench.serverChannel(transport))
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ctx.writeAndFlush(msg);
                    }
                })
                .bind(new InetSocketAddress(ip, 0))
                .sync()
                .channel();
        p.end("bind");
        Channel client = null;
        try {
            client = new Bootstrap()
                    .group(group)
                    .channel(NettyBench.clientChannel(transport))
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf in = (ByteBuf) msg;
                            boolean right = in.readableBytes() == 1 && in.getByte(in.readerIndex()) == 42;
                            in.release();
                            if (right) {
                                echoed.complete(null);
                            } else {
                                echoed.completeExceptionally(new IllegalStateException("a wrong echo"));
                            }
                        }
                    })
                    .connect(server.localAddress())
                    .sync()
                    .channel();
            p.end("connect");
            client.writeAndFlush(client.alloc().buffer(1).writeByte(42));
            echoed.get(BOUND_SECONDS, TimeUnit.SECONDS);
            p.end("echo");
        } finally {
            if (client != null) {
                client.close().sync();
            }
            server.close().sync();
            p.end("close");
        }
    }

    /** Phase times and class-load counts, printed as each phase ends. */
    private static final class Phases {
        private final String name;
        private long last = System.nanoTime();
        private long classes = loaded();

        Phases(String name) {
            this.name = name;
        }

        void end(String phase) {
            long now = System.nanoTime(), c = loaded();
            System.out.printf(
                    Locale.ROOT,
                    "first connection (%s): %-7s %7d ms, %5d classes loaded%n",
                    name,
                    phase,
                    TimeUnit.NANOSECONDS.toMillis(now - last),
                    c - classes);
            last = now;
            classes = c;
        }

        long uptime() {
            return ManagementFactory.getRuntimeMXBean().getUptime();
        }

        private static long loaded() {
            return ManagementFactory.getClassLoadingMXBean().getTotalLoadedClassCount();
        }
    }
}
