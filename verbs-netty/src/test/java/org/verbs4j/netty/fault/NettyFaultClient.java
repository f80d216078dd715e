package org.verbs4j.netty.fault;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.verbs4j.ConnectOptions;
import org.verbs4j.netty.RdmaChannelOption;
import org.verbs4j.netty.RdmaIoHandler;
import org.verbs4j.netty.RdmaSocketChannel;
import org.verbs4j.netty.RdmaStats;

/**
 * The client of the transport's two-host fault test ({@code softroce/two-hosts-fault.sh --scenario
 * netty}), run in guest B, against {@link NettyFaultServer} in guest A.
 *
 * <ol>
 *   <li>Connects (retried until a deadline) and streams 4 KiB writes of a known pattern, keeping
 *       {@value #WINDOW} write promises pending against the peer's {@value NettyFaultServer#BUFFERS}
 *       credits, and checks every echoed byte. After {@code killAfter} frames echoed it writes the
 *       marker {@code streaming}; the host then SIGKILLs the server's guest.</li>
 *   <li>Asserts: exceptionCaught with a cause that says what failed, channelInactive within the
 *       bound the queue pair's retry count and ACK timeout give (or {@code boundS}, the larger)
 *       after the last echo, every write promise completed (succeeded before the kill, failed
 *       after: issued = succeeded + failed), {@link RdmaIoHandler#stats()} and {@code rdma res
 *       show}'s per-connection objects back to the baseline taken before the connect; writes the
 *       marker {@code closed}.</li>
 *   <li>The host restarts the server; the client connects again and checks an echo of 100,003
 *       bytes in writes of several sizes, every promise succeeded, then the baseline again.</li>
 * </ol>
 * Prints {@code Fault-tier: N passed, M failed}; exits 0 only if M == 0 and N > 0.
 *
 * <p>Arguments: {@code server-ip marker-dir [killAfter=2000] [boundS=60] [connectS=300] [deadlineS=0]}
 * (deadlineS: the JVM prints its result and exits 1 if it still runs then; 0 = no deadline).
 */
public final class NettyFaultClient {
    private static final long T0 = System.nanoTime();
    private static final int CHUNK = NettyFaultServer.BUFFER_SIZE;
    private static final int WINDOW = 64;
    /** How often the client probes the server while its writes wait for credits. */
    private static final int PROBE_MS = 1_000;
    /**
     * One connect try's timeout: generous, since the server's cold JVM in a one-CPU TCG guest takes
     * over 10 s from the request to its accept; a try that times out is retried.
     */
    private static final long CONNECT_TIMEOUT_MS = 120_000;
    /** The objects each connection makes in {@code rdma res show}. */
    private static final List<String> PER_CONNECTION = List.of("qp", "cq", "mr", "cm_id", "srq");

    private final List<String> passed = new ArrayList<>();
    private final List<String> failed = new ArrayList<>();
    private final InetSocketAddress server;
    private final Path markers;
    private final long killAfter;
    private final long boundS;
    private final long connectS;

    private NettyFaultClient(String[] a) {
        server = new InetSocketAddress(a[0], NettyFaultServer.PORT);
        markers = Path.of(a[1]);
        killAfter = a.length > 2 ? Long.parseLong(a[2]) : 2000;
        boundS = a.length > 3 ? Long.parseLong(a[3]) : 60;
        connectS = a.length > 4 ? Long.parseLong(a[4]) : 300;
    }

    private static double elapsedS() {
        return (System.nanoTime() - T0) / 1e9;
    }

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println(
                    "usage: NettyFaultClient server-ip marker-dir [killAfter] [boundS] [connectS] [deadlineS]");
            System.exit(2);
        }
        NettyFaultClient c = new NettyFaultClient(args);
        long deadlineS = args.length > 5 ? Long.parseLong(args[5]) : 0;
        if (deadlineS > 0) {
            Thread.ofPlatform().daemon().name("fault-deadline").start(() -> {
                try {
                    Thread.sleep(TimeUnit.SECONDS.toMillis(deadlineS));
                } catch (InterruptedException e) {
                    return;
                }
                c.check(false, "the client finished within its deadline of " + deadlineS + " s");
                c.report();
                Runtime.getRuntime().halt(1);
            });
        }
        try {
            c.run();
        } catch (Throwable t) {
            c.check(false, "no unexpected exception: " + t);
            t.printStackTrace(System.out);
        }
        c.report();
        System.exit(c.failed.isEmpty() && !c.passed.isEmpty() ? 0 : 1);
    }

    private synchronized void report() {
        System.out.println("Fault-tier: " + passed.size() + " passed, " + failed.size() + " failed");
        for (String f : failed) {
            System.out.println("  FAILED: " + f);
        }
    }

    private synchronized void check(boolean ok, String what) {
        (ok ? passed : failed).add(what);
        log((ok ? "PASS " : "FAIL ") + what);
    }

    private void run() throws Exception {
        String dev = System.getenv().getOrDefault("VERBS4J_DEVICE", "rxe0");
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            RdmaStats base = RdmaIoHandler.stats();
            Map<String, Integer> res = perConnection(dev);
            log("baseline: " + base + "; rdma res show " + dev + " " + res);
            ConnectOptions o = ConnectOptions.roce(0); // the transport's queue pairs use these defaults
            double ackS = 4.096e-6 * (1L << o.timeout());
            double probeS = PROBE_MS / 1e3; // the server stops reading: a probe finds its death
            double nominalS = probeS + (o.retryCount() + 1) * ackS;
            long boundMs = Math.max(TimeUnit.SECONDS.toMillis(boundS), (long) Math.ceil(nominalS * 1e3));
            log(String.format(
                    "bound on channelInactive after the last echo: probe interval %.1f s + retry_cnt %d, ACK timeout"
                            + " %d (%.0f ms): %.1f + (%d + 1) x %.0f ms = %.2f s nominal; %d ms used (rxe under TCG"
                            + " takes ~16 s)",
                    probeS,
                    o.retryCount(),
                    o.timeout(),
                    ackS * 1e3,
                    probeS,
                    o.retryCount(),
                    ackS * 1e3,
                    nominalS,
                    boundMs));

            // ---- 1. stream, kill ---------------------------------------------------------------
            Echoes s = new Echoes(true);
            Channel ch = connect(group, s);
            if (ch == null) {
                return;
            }
            CompletableFuture.anyOf(s.streaming, s.inactive).get(600, TimeUnit.SECONDS);
            if (!s.streaming.isDone()) {
                check(
                        false,
                        killAfter + " frames echoed before the kill; the connection ended first: "
                                + s.cause.getNow(null));
                return; // an error before the kill: the restart would prove nothing
            }
            long streamed = s.streaming.get();
            check(
                    s.maxPending.get() > NettyFaultServer.BUFFERS,
                    "writes queued behind the credits: " + s.maxPending.get() + " promises pending at most, "
                            + NettyFaultServer.BUFFERS + " credits");
            marker("streaming", Long.toString(streamed));
            log("marker 'streaming' written after " + streamed + " frames echoed: the host kills the server");
            long inactiveAt = s.inactive.get(boundMs + 120_000, TimeUnit.MILLISECONDS);
            marker("first-error", String.format("%.2f", elapsedS()));
            long afterLastEcho = TimeUnit.NANOSECONDS.toMillis(inactiveAt - s.lastEcho);
            check(
                    afterLastEcho <= boundMs,
                    "channelInactive " + afterLastEcho + " ms after the last echo (bound " + boundMs + " ms)");
            waitFor(s.cause::isDone, 5_000);
            Throwable cause = s.cause.getNow(null);
            check(
                    cause != null
                            && cause.getMessage() != null
                            && !cause.getMessage().isBlank(),
                    "exceptionCaught with a cause that says what failed: " + cause);
            check(
                    s.echoedBytes >= killAfter * CHUNK && s.mismatch == null,
                    "every echoed byte matched (" + s.echoedBytes + " bytes)"
                            + (s.mismatch == null ? "" : ": " + s.mismatch));
            waitFor(() -> s.issued.get() == s.succeeded.get() + s.failed.get(), 10_000);
            check(
                    s.issued.get() == s.succeeded.get() + s.failed.get() && s.failed.get() > 0 && s.succeeded.get() > 0,
                    "every write promise completed: " + s.issued.get() + " issued = " + s.succeeded.get()
                            + " succeeded before the kill + " + s.failed.get() + " failed after it; first failure: "
                            + s.firstFailure);
            backToBaseline("after the fault", base, dev, res);
            marker("closed", String.format("%.2f", elapsedS()));
            log("marker 'closed' written: the host restarts the server");

            // ---- 2. a new connection to the restarted server -----------------------------------
            long t = System.nanoTime();
            Echoes v = new Echoes(false);
            Channel ch2 = connect(group, v);
            if (ch2 == null) {
                return;
            }
            check(true, String.format("connected to the restarted server in %.1f s", (System.nanoTime() - t) / 1e9));
            List<ChannelFuture> promises = new ArrayList<>();
            int total = 0;
            for (int size : new int[] {1, 7, 4095, 4096, 4097, 20_000, 65_536, 2105}) {
                promises.add(ch2.writeAndFlush(v.next(ch2, size)));
                total += size;
            }
            int expected = total;
            waitFor(() -> v.echoedBytes >= expected || v.inactive.isDone(), 60_000);
            boolean allOk = true;
            for (ChannelFuture f : promises) {
                allOk &= f.await(10, TimeUnit.SECONDS) && f.isSuccess();
            }
            check(
                    v.echoedBytes == expected && v.mismatch == null && allOk,
                    "the restarted server echoed all " + expected + " bytes, each matched, every promise succeeded ("
                            + v.echoedBytes + " bytes back" + (v.mismatch == null ? "" : ", " + v.mismatch) + ")");
            ch2.close().await(30, TimeUnit.SECONDS);
            backToBaseline("after the second connection", base, dev, res);
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(30, TimeUnit.SECONDS);
        }
    }

    /** Connects, retrying a refused or failed connect each second until {@code connectS}; null if never. */
    private Channel connect(EventLoopGroup group, Echoes handler) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(connectS);
        Throwable last = null;
        int tries = 0;
        while (System.nanoTime() - until < 0) {
            tries++;
            ChannelFuture f = new Bootstrap()
                    .group(group)
                    .channel(RdmaSocketChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) CONNECT_TIMEOUT_MS)
                    .option(RdmaChannelOption.BUFFER_SIZE, CHUNK)
                    .option(RdmaChannelOption.RECEIVE_BUFFERS, NettyFaultServer.BUFFERS)
                    .option(RdmaChannelOption.SEND_BUFFERS, NettyFaultServer.BUFFERS)
                    .option(RdmaChannelOption.PROBE_INTERVAL_MILLIS, PROBE_MS)
                    .handler(handler)
                    .connect(server);
            if (f.await(CONNECT_TIMEOUT_MS + 10_000) && f.isSuccess()) {
                log("connected to " + server + " (try " + tries + ")");
                return f.channel();
            }
            last = f.cause();
            log("connect try " + tries + " to " + server + " failed: " + last);
            Thread.sleep(1000);
        }
        check(false, "a connection to " + server + " within " + connectS + " s (" + tries + " tries): " + last);
        return null;
    }

    /**
     * Checks that the transport's totals and the per-connection objects of {@code rdma res show}
     * return to the baseline within 20 s (the loop releases a connection after it closed).
     */
    private void backToBaseline(String when, RdmaStats base, String dev, Map<String, Integer> res)
            throws InterruptedException {
        Supplier<Boolean> statsBack = () -> {
            RdmaStats s = RdmaIoHandler.stats();
            return s.registeredBytes() == base.registeredBytes()
                    && s.connections() == base.connections()
                    && s.postedReceives() == base.postedReceives();
        };
        waitFor(statsBack, 20_000);
        check(statsBack.get(), when + ": RdmaIoHandler.stats() " + RdmaIoHandler.stats() + " back to " + base);
        waitFor(() -> perConnection(dev).equals(res), 20_000);
        Map<String, Integer> now = perConnection(dev);
        check(now.equals(res), when + ": rdma res show " + dev + " " + now + " back to " + res);
    }

    private static void waitFor(Supplier<Boolean> done, long ms) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!done.get() && System.nanoTime() - until < 0) {
            Thread.sleep(50);
        }
    }

    /** The counts of {@link #PER_CONNECTION} in {@code dev}'s line of {@code rdma res show} (20 s bound). */
    private static Map<String, Integer> perConnection(String dev) {
        try {
            Process p = new ProcessBuilder("rdma", "res", "show")
                    .redirectErrorStream(true)
                    .start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
            Map<String, Integer> m = new TreeMap<>();
            for (String line : out.split("\n")) {
                String[] t = line.trim().split("\\s+");
                for (int i = 2; t.length > 1 && t[1].equals(dev + ":") && i + 1 < t.length; i += 2) {
                    if (PER_CONNECTION.contains(t[i])) {
                        m.put(t[i], Integer.valueOf(t[i + 1]));
                    }
                }
            }
            return m;
        } catch (IOException e) {
            throw new UncheckedIOException("rdma res show could not run", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while rdma res show ran", e);
        }
    }

    private void marker(String name, String text) throws IOException {
        Files.createDirectories(markers);
        Path tmp = markers.resolve(name + ".tmp");
        Files.writeString(tmp, text + "\n", StandardCharsets.UTF_8);
        Files.move(tmp, markers.resolve(name), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    private static void log(String s) {
        System.out.printf("[netty-fault-client %7.2fs] %s%n", elapsedS(), s);
    }

    /** The byte at stream offset {@code i}: a pattern that a lost, repeated or reordered frame breaks. */
    private static byte pattern(long i) {
        return (byte) (i * 131 + (i >>> 12));
    }

    /**
     * One connection's handler: writes the pattern (in streaming mode keeping {@value #WINDOW}
     * promises pending, a new write for each that succeeds), checks every byte echoed, counts the
     * promises and records the first exception and the time of channelInactive. Event loop only,
     * read by the main thread.
     */
    @io.netty.channel.ChannelHandler.Sharable // the same handler for each try of a connect; one becomes active
    private final class Echoes extends ChannelInboundHandlerAdapter {
        final boolean streamingMode;
        final CompletableFuture<Long> streaming = new CompletableFuture<>();
        final CompletableFuture<Long> inactive = new CompletableFuture<>();
        final CompletableFuture<Throwable> cause = new CompletableFuture<>();
        final AtomicLong issued = new AtomicLong();
        final AtomicLong succeeded = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong pending = new AtomicLong();
        final AtomicLong maxPending = new AtomicLong();
        volatile long echoedBytes;
        volatile long lastEcho = System.nanoTime();
        volatile String mismatch;
        volatile Throwable firstFailure;
        long sent;
        volatile Channel active;

        Echoes(boolean streamingMode) {
            this.streamingMode = streamingMode;
        }

        ByteBuf next(Channel ch, int size) {
            ByteBuf b = ch.alloc().buffer(size);
            for (int i = 0; i < size; i++) {
                b.writeByte(pattern(sent + i));
            }
            sent += size;
            return b;
        }

        private void stream(Channel ch) {
            while (ch.isActive() && pending.get() < WINDOW) {
                issued.incrementAndGet();
                maxPending.accumulateAndGet(pending.incrementAndGet(), Math::max);
                ch.writeAndFlush(next(ch, CHUNK)).addListener(f -> {
                    pending.decrementAndGet();
                    if (f.isSuccess()) {
                        succeeded.incrementAndGet();
                        stream(ch);
                    } else {
                        if (failed.getAndIncrement() == 0) {
                            firstFailure = f.cause();
                        }
                    }
                });
            }
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            active = ctx.channel();
            if (streamingMode) {
                ctx.channel().eventLoop().execute(() -> stream(ctx.channel()));
            }
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            long at = echoedBytes;
            for (int i = b.readerIndex(); i < b.writerIndex() && mismatch == null; i++, at++) {
                if (b.getByte(i) != pattern(at)) {
                    mismatch = "byte " + at + " is " + b.getByte(i) + ", not " + pattern(at);
                }
            }
            echoedBytes += b.readableBytes();
            b.release();
            lastEcho = System.nanoTime();
            if (streamingMode && echoedBytes >= killAfter * CHUNK) {
                streaming.complete(echoedBytes / CHUNK);
            }
            if (mismatch != null) {
                ctx.close();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
            log("exceptionCaught: " + t);
            if (ctx.channel() == active) {
                cause.complete(t);
            }
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (ctx.channel() == active) {
                inactive.complete(System.nanoTime());
            }
            log("channelInactive; cause " + cause.getNow(null));
            ctx.fireChannelInactive();
        }
    }
}
