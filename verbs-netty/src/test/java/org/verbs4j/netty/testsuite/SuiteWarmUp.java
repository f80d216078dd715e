package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.verbs4j.netty.TestTransport;

/**
 * Runs the transport once per JVM before the first of Netty's timed cases: one connection through
 * the suite's shared groups ({@link TransportTestPermutation}), {@value #ROUND_TRIPS} echoed
 * messages of 1 KiB and {@value #LARGE} of 64 KiB, each byte checked, then closed; the time of
 * each phase is printed. Netty's bounds (3 to 30 s a case) assume compiled code: in the Soft-RoCE
 * guest, whose CPUs are emulated, the first connection of a JVM waits for the class loading,
 * linking and compiling of the whole path, so the first cases of a boot ran into their bounds
 * whatever they tested. A case that fails after this does so on its own account.
 */
final class SuiteWarmUp extends OncePerJvm {
    static final int ROUND_TRIPS = 300, LARGE = 20;
    private static final long BOUND_SECONDS = 300;

    /** For JUnit's extension registry. */
    SuiteWarmUp() {}

    @Override
    void run() throws Exception {
        int[] sizes = new int[ROUND_TRIPS + LARGE];
        java.util.Arrays.fill(sizes, 0, ROUND_TRIPS, 1024);
        java.util.Arrays.fill(sizes, ROUND_TRIPS, sizes.length, 64 * 1024);
        long[] t = echo(() -> null, () -> null, sizes);
        System.out.printf(
                "suite warm-up (%s): bind %d ms, connect %d ms, %d round trips of 1 KiB and %d of 64 KiB %d ms%n",
                TestTransport.current().name(), ms(t[0]), ms(t[1]), ROUND_TRIPS, LARGE, ms(t[2]));
    }

    /**
     * One connection through the suite's groups ({@link TransportTestPermutation}), the server
     * echoing, the client sending a message of each of {@code sizes} in turn and checking each byte
     * of its echo before the next; the handlers the suppliers give (none where null) go first in
     * the server's child and the client's pipeline. Returns the nanoseconds of the bind (the groups
     * made on first use included), the connect and the echoes.
     */
    static long[] echo(Supplier<ChannelHandler> serverFirst, Supplier<ChannelHandler> clientFirst, int... sizes)
            throws Exception {
        long t0 = System.nanoTime();
        ServerBootstrap sb = TransportTestPermutation.socket().getFirst().newServerInstance();
        Bootstrap cb = TransportTestPermutation.socket().getFirst().newClientInstance();
        sb.childHandler(new ChannelInitializer<>() {
            @Override
            protected void initChannel(Channel ch) {
                addIfAny(ch, serverFirst);
                ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ctx.writeAndFlush(msg);
                    }
                });
            }
        });
        Checker checker = new Checker();
        cb.handler(new ChannelInitializer<>() {
            @Override
            protected void initChannel(Channel ch) {
                addIfAny(ch, clientFirst);
                ch.pipeline().addLast(checker);
            }
        });
        Channel server = sb.bind(TransportTestPermutation.address()).sync().channel();
        long bound = System.nanoTime();
        Channel client = null;
        try {
            client = cb.connect(server.localAddress()).sync().channel();
            long connected = System.nanoTime();
            for (int size : sizes) {
                CompletableFuture<Void> echoed = checker.expect(size);
                ByteBuf out = client.alloc().buffer(size);
                for (int k = 0; k < size; k++) {
                    out.writeByte(Checker.pattern(checker.sent + k));
                }
                checker.sent += size;
                client.writeAndFlush(out);
                echoed.get(BOUND_SECONDS, TimeUnit.SECONDS);
            }
            return new long[] {bound - t0, connected - bound, System.nanoTime() - connected};
        } finally {
            if (client != null) {
                client.close().sync();
            }
            server.close().sync();
        }
    }

    private static void addIfAny(Channel ch, Supplier<ChannelHandler> first) {
        ChannelHandler h = first.get();
        if (h != null) {
            ch.pipeline().addLast(h);
        }
    }

    static long ms(long nanos) {
        return TimeUnit.NANOSECONDS.toMillis(nanos);
    }

    /** The client's side: every echoed byte compared with what was sent at its offset of the stream. */
    private static final class Checker extends ChannelInboundHandlerAdapter {
        long sent;
        private long received, until;
        private CompletableFuture<Void> waiting;

        static byte pattern(long offset) {
            return (byte) (offset * 31 + (offset >>> 8));
        }

        synchronized CompletableFuture<Void> expect(int size) {
            until = sent + size;
            waiting = new CompletableFuture<>();
            return waiting;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                synchronized (this) {
                    while (in.isReadable()) {
                        byte b = in.readByte();
                        if (b != pattern(received)) {
                            waiting.completeExceptionally(new AssertionError(
                                    "warm-up echo: byte " + received + " is " + b + ", sent " + pattern(received)));
                            return;
                        }
                        received++;
                    }
                    if (received == until) {
                        waiting.complete(null);
                    }
                }
            } finally {
                in.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            synchronized (this) {
                waiting.completeExceptionally(cause);
            }
        }
    }
}
