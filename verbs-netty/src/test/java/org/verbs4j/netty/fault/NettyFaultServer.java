package org.verbs4j.netty.fault;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.verbs4j.netty.RdmaChannelOption;
import org.verbs4j.netty.RdmaIoHandler;
import org.verbs4j.netty.RdmaServerSocketChannel;

/**
 * The server of the transport's two-host fault test ({@code softroce/two-hosts-fault.sh --scenario
 * netty}), run in guest A: a Netty echo server over verbs-netty on the guest's address (port
 * {@value #PORT}). It exits 0 once a connection that echoed bytes has closed (the restarted
 * server, after the client's verified exchange), 1 at the deadline ({@code args[0]} seconds,
 * default 900). A connection that fails or closes before echoing a byte (a cold JVM under TCG may
 * accept after the client's connect timed out) is logged and the server listens on. In the first
 * run the host kills this guest mid-stream.
 *
 * <p>Arguments: {@code [boundS=900] [stopFrames=0]}: with {@code stopFrames} > 0 a connection stops
 * reading (AUTO_READ off) once it echoed that many frames' bytes, so that the client's writes wait
 * for credits with no send in flight when the host kills this guest: only the transport's probe
 * can then find out that the server is gone.
 */
public final class NettyFaultServer {
    /** The port the server listens on. */
    static final int PORT = 18_515;
    /** Frame size and buffer counts of both ends: few credits, so that writes queue behind them. */
    static final int BUFFER_SIZE = 4096;

    static final int BUFFERS = 4;

    private static final long T0 = System.nanoTime();

    private NettyFaultServer() {}

    public static void main(String[] args) throws Exception {
        long boundS = args.length > 0 ? Long.parseLong(args[0]) : 900;
        long stopBytes = (args.length > 1 ? Long.parseLong(args[1]) : 0) * BUFFER_SIZE;
        String ip = System.getenv().getOrDefault("VERBS4J_GUEST_IP", "10.0.0.1");
        AtomicLong echoed = new AtomicLong();
        CompletableFuture<Long> firstClosed = new CompletableFuture<>();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        int rc = 1;
        try {
            Channel server = new ServerBootstrap()
                    .group(group)
                    .channel(RdmaServerSocketChannel.class)
                    .childOption(RdmaChannelOption.BUFFER_SIZE, BUFFER_SIZE)
                    .childOption(RdmaChannelOption.RECEIVE_BUFFERS, BUFFERS)
                    .childOption(RdmaChannelOption.SEND_BUFFERS, BUFFERS)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            log("accepted " + ch.remoteAddress());
                            AtomicLong mine = new AtomicLong();
                            ch.closeFuture().addListener(f -> {
                                if (mine.get() > 0) {
                                    firstClosed.complete(echoed.get());
                                } else { // a failed accept (the client gave up first, then retries)
                                    log("a connection from " + ch.remoteAddress()
                                            + " closed before echoing a byte: still listening");
                                }
                            });
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    int n = ((io.netty.buffer.ByteBuf) msg).readableBytes();
                                    long before = mine.getAndAdd(n);
                                    echoed.addAndGet(n);
                                    ctx.write(msg);
                                    if (stopBytes > 0 && before < stopBytes && before + n >= stopBytes) {
                                        ctx.channel().config().setAutoRead(false);
                                        log("stopped reading after " + (before + n) + " bytes: the client's"
                                                + " writes now wait for credits");
                                    }
                                }

                                @Override
                                public void channelReadComplete(ChannelHandlerContext ctx) {
                                    ctx.flush();
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                    log("exceptionCaught: " + cause);
                                    ctx.close();
                                }
                            });
                        }
                    })
                    .bind(new InetSocketAddress(ip, PORT))
                    .syncUninterruptibly()
                    .channel();
            log("listening on " + server.localAddress() + " (bound " + boundS + " s)");
            long bytes = firstClosed.get(boundS, TimeUnit.SECONDS);
            log("a connection closed after " + bytes + " bytes echoed in all");
            rc = bytes > 0 ? 0 : 1;
            server.close().await(10, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            log("no connection that echoed bytes closed within " + boundS + " s");
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(20, TimeUnit.SECONDS);
        }
        log("exit " + rc);
        System.exit(rc);
    }

    private static void log(String s) {
        System.out.printf("[netty-fault-server %7.2fs] %s%n", (System.nanoTime() - T0) / 1e9, s);
    }
}
