package org.verbs4j.bench;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Echo round-trip latency (p50/p99) and one-way streaming throughput through a Netty transport:
 * verbs-netty's RDMA transport and Netty's NIO transport over TCP, on the same address, in one JVM
 * (the server and the client on separate event loop groups, one thread each). With verbs-perf's
 * send_lat and send_bw figures of the same boot ({@code --send-lat}, {@code --send-bw}) it prints
 * the transport's ratios to the raw verbs floor. Run by {@code benchmarks/netty-bench.sh}.
 */
@Command(
        name = "netty-bench",
        mixinStandardHelpOptions = true,
        description = "Echo latency and streaming throughput through Netty transports (rdma, rdma-busy, nio).")
public final class NettyBench implements Callable<Integer> {
    @Option(
            names = "--transports",
            split = ",",
            defaultValue = "rdma,rdma-busy,nio",
            description = "rdma, rdma-busy (busy-polling), nio (default: ${DEFAULT-VALUE})")
    List<String> transports;

    @Option(
            names = "--address",
            required = true,
            description = "an IPv4 address of the RDMA interface (rxe: the guest's)")
    String address;

    @Option(
            names = "--sizes",
            split = ",",
            defaultValue = "64,4096,65536",
            description = "message bytes (default: ${DEFAULT-VALUE})")
    List<Integer> sizes;

    @Option(names = "--lat-iters", defaultValue = "5000", description = "measured round trips per size")
    int latIters;

    @Option(
            names = "--warmup",
            defaultValue = "2000",
            description = "round trips (and messages) before each measurement")
    int warmup;

    @Option(names = "--bw-bytes", defaultValue = "67108864", description = "bytes streamed per size")
    long bwBytes;

    @Option(
            names = "--bw-max-messages",
            defaultValue = "200000",
            description = "at most this many messages streamed per size (bounds the small sizes' time)")
    long bwMaxMessages;

    @Option(
            names = "--serve",
            description = "only an echo server (the first of --transports) on --address:--port, until stdin closes")
    boolean serve;

    @Option(
            names = "--count-echo",
            description = "only a client of a --serve server: --warmup round trips, then --repeats blocks of "
                    + "--lat-iters, each between a mark line on stdout (for the instruction counts)")
    boolean countEcho;

    @Option(names = "--port", defaultValue = "18700", description = "the port of --serve and --count-echo")
    int port;

    @Option(names = "--repeats", defaultValue = "3", description = "marked blocks of --count-echo")
    int repeats;

    @Option(
            names = "--send-lat",
            split = ",",
            description = "verbs-perf send_lat t_typical in us, SIZE=US (for the ratios)")
    Map<Integer, Double> sendLat = new LinkedHashMap<>();

    @Option(
            names = "--send-bw",
            split = ",",
            description = "verbs-perf send_bw BW average in MB/s, SIZE=MBPS (for the ratios)")
    Map<Integer, Double> sendBw = new LinkedHashMap<>();

    /** One row of results. */
    record Row(String transport, int size, double p50us, double p99us, double mbps) {}

    public static void main(String[] args) {
        System.exit(new CommandLine(new NettyBench()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        List<Row> rows = new ArrayList<>();
        InetAddress ip = InetAddress.getByName(address);
        if (serve) {
            return serve(transports.getFirst(), new InetSocketAddress(ip, port));
        }
        if (countEcho) {
            return countEcho(transports.getFirst(), new InetSocketAddress(ip, port));
        }
        for (String t : transports) {
            for (int size : sizes) {
                try {
                    Row r = run(t, ip, size);
                    rows.add(r);
                    // each row as it is measured: a run cut short by its bound still reports the rows done
                    System.out.printf(
                            Locale.ROOT,
                            "measured %s %d B: echo p50 %.2f us, p99 %.2f us, stream %.1f MB/s%n",
                            r.transport,
                            r.size,
                            r.p50us,
                            r.p99us,
                            r.mbps);
                } catch (Exception e) {
                    System.out.printf(Locale.ROOT, "%s %d B: failed: %s%n", t, size, e);
                }
            }
        }
        System.out.println("transport      size   echo p50 us   echo p99 us   stream MB/s");
        for (Row r : rows) {
            System.out.printf(
                    Locale.ROOT, "%-9s %9d %13.2f %13.2f %13.1f%n", r.transport, r.size, r.p50us, r.p99us, r.mbps);
        }
        for (Row r : rows) {
            if (!r.transport.startsWith("rdma")) {
                continue;
            }
            Double lat = sendLat.get(r.size), bw = sendBw.get(r.size);
            if (lat != null) {
                System.out.printf(
                        Locale.ROOT,
                        "ratio %s echo p50 / verbs-perf send_lat t_typical, %d B: %.2f (target <= 1.25 at 64 B)%n",
                        r.transport,
                        r.size,
                        r.p50us / lat);
            }
            if (bw != null) {
                System.out.printf(
                        Locale.ROOT,
                        "ratio %s stream / verbs-perf send_bw, %d B: %.2f (target >= 0.9 at 64 KiB)%n",
                        r.transport,
                        r.size,
                        r.mbps / bw);
            }
            rows.stream()
                    .filter(n -> n.transport.equals("nio") && n.size == r.size)
                    .findFirst()
                    .ifPresent(n -> System.out.printf(
                            Locale.ROOT,
                            "ratio %s / nio, %d B: echo p50 %.2f, stream %.2f%n",
                            r.transport,
                            r.size,
                            r.p50us / n.p50us,
                            r.mbps / n.mbps));
        }
        return 0;
    }

    private Row run(String transport, InetAddress ip, int size) throws Exception {
        IoHandlerFactory factory = factory(transport);
        EventLoopGroup serverGroup =
                new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-server", true), factory);
        EventLoopGroup clientGroup =
                new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-client", true), factory);
        try {
            Sink sink = new Sink();
            Channel server = bindServer(serverGroup, transport, new InetSocketAddress(ip, 0), sink);
            InetSocketAddress at = new InetSocketAddress(ip, ((InetSocketAddress) server.localAddress()).getPort());
            Histogram h = new Histogram(3);
            echo(clientGroup, transport, at, size, warmup, null);
            echo(clientGroup, transport, at, size, latIters, h);
            long bytes = Math.min(bwBytes, size * bwMaxMessages);
            long warm = Math.min(bytes / 8, 8L << 20);
            stream(clientGroup, transport, at, size, warm, sink);
            long ns = stream(clientGroup, transport, at, size, bytes, sink);
            server.close().sync();
            return new Row(
                    transport,
                    size,
                    h.getValueAtPercentile(50) / 1000.0,
                    h.getValueAtPercentile(99) / 1000.0,
                    bytes / (ns / 1e9) / 1e6);
        } finally {
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** {@code n} round trips of {@code size} bytes, one at a time, each recorded in {@code h} (when given). */
    private void echo(EventLoopGroup g, String transport, InetSocketAddress at, int size, int n, Histogram h)
            throws Exception {
        Echoer e = new Echoer(size);
        Channel ch = client(g, transport, at, e);
        try {
            e.run(n, h).get(3, TimeUnit.MINUTES);
        } finally {
            ch.close().sync();
        }
    }

    /**
     * A client of a {@code --serve} server in another process: {@code --warmup} round trips of each
     * size, then {@code --repeats} blocks of {@code --lat-iters}, each between a line "mark start"
     * and "mark end" on stdout. Under the emulator's instruction-counting plugin the user-mode
     * instructions of this process's CPU between the two marks, divided by the round trips, are
     * the client's instructions per echo round trip (benchmarks/netty-insn.py).
     */
    private int countEcho(String transport, InetSocketAddress at) throws Exception {
        EventLoopGroup g =
                new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-client", true), factory(transport));
        try {
            for (int size : sizes) {
                Echoer e = new Echoer(size);
                Channel ch = client(g, transport, at, e);
                try {
                    e.run(warmup, null).get(10, TimeUnit.MINUTES);
                    for (int r = 1; r <= repeats; r++) {
                        String run = transport + "-echo echo " + size + " r" + r + " n=" + latIters;
                        mark("start", run);
                        long t0 = System.nanoTime();
                        e.run(latIters, null).get(10, TimeUnit.MINUTES);
                        long ns = System.nanoTime() - t0;
                        mark("end", run);
                        System.out.printf(
                                Locale.ROOT, "[netty-bench] %s: %.1f us a round trip%n", run, ns / 1e3 / latIters);
                    }
                } finally {
                    ch.close().sync();
                }
            }
        } finally {
            g.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
        return 0;
    }

    private static void mark(String what, String run) {
        System.out.println("[netty-bench] mark " + what + " " + run);
        System.out.flush();
    }

    /** A server of {@link ServerSide}s on {@code at}: echo connections until {@code sink} expects a stream. */
    private static Channel bindServer(EventLoopGroup g, String transport, InetSocketAddress at, Sink sink)
            throws InterruptedException {
        ServerBootstrap sb = new ServerBootstrap()
                .group(g)
                .channel(serverChannel(transport))
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new ServerSide(sink));
                    }
                });
        if (transport.equals("nio")) {
            sb.childOption(ChannelOption.TCP_NODELAY, true);
        }
        return sb.bind(at).sync().channel();
    }

    /** An echo server on {@code at} until this process's stdin closes. */
    private int serve(String transport, InetSocketAddress at) throws Exception {
        EventLoopGroup g =
                new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-server", true), factory(transport));
        try {
            Channel server = bindServer(g, transport, at, new Sink());
            System.out.println("[netty-bench] " + transport + " echo server listening on " + server.localAddress());
            System.out.flush();
            while (System.in.read() >= 0) {
                // until the caller closes stdin
            }
            server.close().sync();
        } finally {
            g.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
        return 0;
    }

    /** Round trips of {@code size} bytes, one at a time, on the connection it is the handler of. */
    private static final class Echoer extends ChannelInboundHandlerAdapter {
        private final int size;
        private ChannelHandlerContext ctx;
        private ByteBuf msg;
        private int left, got;
        private long start;
        private Histogram h;
        private CompletableFuture<Void> done;
        private final CompletableFuture<Void> active = new CompletableFuture<>();

        Echoer(int size) {
            this.size = size;
        }

        /** Starts {@code n} round trips (recorded in {@code h} when given) on the connection's loop. */
        CompletableFuture<Void> run(int n, Histogram h) throws Exception {
            active.get(1, TimeUnit.MINUTES);
            CompletableFuture<Void> f = new CompletableFuture<>();
            ctx.executor().execute(() -> {
                this.h = h;
                left = n;
                done = f;
                send();
            });
            return f;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            this.ctx = ctx;
            msg = ctx.alloc().directBuffer(size).writeZero(size);
            active.complete(null);
        }

        private void send() {
            start = System.nanoTime();
            ctx.writeAndFlush(msg.retainedDuplicate());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object o) {
            got += ((ByteBuf) o).readableBytes();
            ReferenceCountUtil.release(o);
            if (got < size) {
                return;
            }
            got -= size;
            if (h != null) {
                h.recordValue(System.nanoTime() - start);
            }
            if (--left == 0) {
                done.complete(null);
            } else {
                send();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (msg != null) {
                msg.release();
            }
            IllegalStateException e = new IllegalStateException("the echo connection closed");
            active.completeExceptionally(e);
            if (done != null) {
                done.completeExceptionally(e);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            active.completeExceptionally(cause);
            if (done != null) {
                done.completeExceptionally(cause);
            }
        }
    }

    /** Streams {@code total} bytes in {@code size}-byte writes while writable; returns the nanoseconds until the server's ack. */
    private long stream(EventLoopGroup g, String transport, InetSocketAddress at, int size, long total, Sink sink)
            throws Exception {
        CompletableFuture<Long> done = new CompletableFuture<>();
        sink.expect(total);
        Channel ch = client(g, transport, at, new ChannelInboundHandlerAdapter() {
            long left = total, start;
            ByteBuf msg;

            @Override
            public void channelActive(ChannelHandlerContext ctx) {
                msg = ctx.alloc().directBuffer(size).writeZero(size);
                start = System.nanoTime();
                pump(ctx);
            }

            @Override
            public void channelWritabilityChanged(ChannelHandlerContext ctx) {
                pump(ctx);
            }

            private void pump(ChannelHandlerContext ctx) {
                // a write can fire channelWritabilityChanged, and so pump, before it returns: count first
                while (left > 0 && ctx.channel().isWritable()) {
                    int n = (int) Math.min(size, left);
                    left -= n;
                    ctx.write(msg.retainedSlice(0, n));
                }
                ctx.flush();
            }

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object o) {
                ReferenceCountUtil.release(o);
                msg.release();
                done.complete(System.nanoTime() - start);
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                done.completeExceptionally(cause);
            }
        });
        try {
            return done.get(3, TimeUnit.MINUTES);
        } finally {
            ch.close().sync();
        }
    }

    private static Channel client(
            EventLoopGroup g, String transport, InetSocketAddress at, ChannelInboundHandlerAdapter h)
            throws InterruptedException {
        Bootstrap b = new Bootstrap().group(g).channel(clientChannel(transport)).handler(h);
        if (transport.equals("nio")) {
            b.option(ChannelOption.TCP_NODELAY, true);
        }
        return b.connect(at).sync().channel();
    }

    /** The bytes the next stream brings (0 while the run's connections are echo connections). */
    private static final class Sink {
        volatile long expected;

        void expect(long total) {
            expected = total;
        }
    }

    /** The server's side: echoes on an echo connection; counts a stream and answers one byte at its end. */
    private static final class ServerSide extends ChannelInboundHandlerAdapter {
        private final Sink sink;
        private long received;
        private boolean echo;

        ServerSide(Sink sink) {
            this.sink = sink;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            // a run's echo connections come before its streams, which set the expected count first
            echo = sink.expected == 0;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object o) {
            if (echo) {
                ctx.write(o);
                return;
            }
            received += ((ByteBuf) o).readableBytes();
            ReferenceCountUtil.release(o);
            if (received == sink.expected) {
                ctx.writeAndFlush(ctx.alloc().buffer(1).writeByte(1));
            }
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            if (echo) {
                ctx.flush();
            }
        }
    }

    static IoHandlerFactory factory(String transport) throws ReflectiveOperationException {
        return switch (transport) {
            case "nio" -> NioIoHandler.newFactory();
            case "rdma" ->
                (IoHandlerFactory) Class.forName("org.verbs4j.netty.RdmaIoHandler")
                        .getMethod("newFactory")
                        .invoke(null);
            case "rdma-busy" -> {
                // the transport with busy-polling on: never blocks in poll(2), as verbs-perf's loops
                Class<?> config = Class.forName("org.verbs4j.netty.RdmaTransportConfig");
                Object busy = config.getMethod("withBusyPoll", boolean.class)
                        .invoke(config.getMethod("defaults").invoke(null), true);
                yield (IoHandlerFactory) Class.forName("org.verbs4j.netty.RdmaIoHandler")
                        .getMethod("newFactory", config)
                        .invoke(null, busy);
            }
            default ->
                throw new CommandLine.ParameterException(
                        new CommandLine(new NettyBench()),
                        "--transports: " + transport + " is not rdma, rdma-busy or nio");
        };
    }

    @SuppressWarnings("unchecked")
    static Class<? extends ServerChannel> serverChannel(String transport) {
        return transport.equals("nio")
                ? NioServerSocketChannel.class
                : (Class<? extends ServerChannel>) rdma("RdmaServerSocketChannel");
    }

    @SuppressWarnings("unchecked")
    static Class<? extends Channel> clientChannel(String transport) {
        return transport.equals("nio") ? NioSocketChannel.class : (Class<? extends Channel>) rdma("RdmaSocketChannel");
    }

    private static Class<?> rdma(String simpleName) {
        try {
            return Class.forName("org.verbs4j.netty." + simpleName);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(
                    "org.verbs4j.netty." + simpleName + " is not in this build of the benchmarks", e);
        }
    }
}
