package org.verbs4j.examples;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.LineBasedFrameDecoder;
import io.netty.handler.codec.string.StringDecoder;
import io.netty.handler.codec.string.StringEncoder;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.verbs4j.netty.RdmaIoHandler;
import org.verbs4j.netty.RdmaServerSocketChannel;
import org.verbs4j.netty.RdmaSocketChannel;
import org.verbs4j.netty.RdmaStats;

/**
 * An ordinary Netty line-echo server and client (a line decoder, string codecs, a handler each)
 * switched to RDMA by three names: the event loop group's {@link IoHandlerFactory} and the two
 * channel classes. Everything else is the same code Netty's NIO transport runs ({@code nio} as
 * the first argument runs it over TCP instead). The client sends {@code lines} lines, one at a
 * time, and checks that each comes back unchanged.
 *
 * <pre>
 *   java ... NettyEcho [rdma|nio] [ADDRESS] [LINES]   (ADDRESS: the device's IPv4 address by default)
 * </pre>
 */
public final class NettyEcho {
    private NettyEcho() {}

    public static void main(String[] args) throws Exception {
        boolean rdma = args.length == 0 || !args[0].equals("nio");
        String address = args.length > 1 && !args[1].isEmpty() ? args[1] : CmPingPong.localAddress();
        int lines = args.length > 2 ? Integer.parseInt(args[2]) : 1000;
        run(System.out, rdma, address, lines);
    }

    /** Runs the server and the client in this process on {@code address}; returns the lines echoed. */
    public static int run(PrintStream out, boolean rdma, String address, int lines) throws Exception {
        // the switch to RDMA: these three names (NioIoHandler, NioServerSocketChannel, NioSocketChannel for TCP)
        IoHandlerFactory io = rdma ? RdmaIoHandler.newFactory() : NioIoHandler.newFactory();
        Class<? extends ServerChannel> serverChannel =
                rdma ? RdmaServerSocketChannel.class : NioServerSocketChannel.class;
        Class<? extends Channel> clientChannel = rdma ? RdmaSocketChannel.class : NioSocketChannel.class;

        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, io);
        try {
            Channel server = new ServerBootstrap()
                    .group(group)
                    .channel(serverChannel)
                    .childHandler(new ChannelInitializer<>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            codecs(ch).addLast(new SimpleChannelInboundHandler<String>() {
                                @Override
                                protected void channelRead0(ChannelHandlerContext ctx, String line) {
                                    ctx.writeAndFlush(line + "\n");
                                }
                            });
                        }
                    })
                    .bind(new InetSocketAddress(address, 0))
                    .sync()
                    .channel();
            InetSocketAddress at = (InetSocketAddress) server.localAddress();
            out.printf(
                    "server: listening on %s port %d (%s)%n",
                    at.getAddress().getHostAddress(),
                    at.getPort(),
                    server.getClass().getSimpleName());

            CompletableFuture<Integer> done = new CompletableFuture<>();
            long t0 = System.nanoTime();
            Channel client = new Bootstrap()
                    .group(group)
                    .channel(clientChannel)
                    .handler(new ChannelInitializer<>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            codecs(ch).addLast(new Client(lines, done));
                        }
                    })
                    .connect(at)
                    .sync()
                    .channel();
            int echoed = done.get(60, TimeUnit.SECONDS);
            long us = (System.nanoTime() - t0) / 1000;
            out.printf(
                    "client: %d lines echoed over %s, each checked, in %d ms (%d us a round trip)%n",
                    echoed, client.getClass().getSimpleName(), us / 1000, us / echoed);
            if (rdma) {
                out.println("transport totals with the connections open: " + RdmaStats.snapshot());
            }
            client.close().sync();
            server.close().sync();
            return echoed;
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).sync();
        }
    }

    /** The same pipeline on either transport: lines in, strings out. */
    private static ChannelPipeline codecs(Channel ch) {
        return ch.pipeline()
                .addLast(new LineBasedFrameDecoder(1024))
                .addLast(new StringDecoder(StandardCharsets.UTF_8))
                .addLast(new StringEncoder(StandardCharsets.UTF_8));
    }

    /** Sends line 1, checks its echo, sends line 2, ... and completes {@code done} with the count. */
    private static final class Client extends SimpleChannelInboundHandler<String> {
        private final int lines;
        private final CompletableFuture<Integer> done;
        private int next;

        Client(int lines, CompletableFuture<Integer> done) {
            this.lines = lines;
            this.done = done;
        }

        private static String line(int i) {
            return "hello " + i + " over Netty";
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            ctx.writeAndFlush(line(next) + "\n");
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, String echo) {
            if (!echo.equals(line(next))) {
                done.completeExceptionally(
                        new IllegalStateException("echo " + next + " is \"" + echo + "\", not \"" + line(next) + "\""));
                ctx.close();
                return;
            }
            if (++next == lines) {
                done.complete(lines);
            } else {
                ctx.writeAndFlush(line(next) + "\n");
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.completeExceptionally(
                    new IllegalStateException("the connection closed after " + next + " of " + lines + " lines"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
            ctx.close();
        }
    }
}
