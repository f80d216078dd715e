package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Many connections through one event loop group: 1,000 opened, used and closed, then 100 held
 * open at once with traffic on each. The transport's totals ({@code RdmaStats}) and the device's
 * {@code rdma res show} are printed before, at the peak and after, and must be back to where
 * they started once every connection is closed.
 */
@OverTransport(inTier = false)
class ScaleOverTransportTest {
    private static final long WAIT_S = 120;

    private final TestTransport transport = TestTransport.current();
    private final ChannelGroup serverChildren = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
    private final AtomicInteger accepted = new AtomicInteger();
    private EventLoopGroup group;
    private Channel server;

    @BeforeEach
    void start() {
        group = transport.newGroup(2, "scale");
        server = transport
                .serverBootstrap(group)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.incrementAndGet();
                        serverChildren.add(ch);
                        ch.pipeline().addLast(new Echo());
                    }
                })
                .bind(transport.address(0))
                .syncUninterruptibly()
                .channel();
    }

    @AfterEach
    void stop() {
        TestTransport.close(server, group);
    }

    @Test
    void aThousandConnectionsOpenedUsedAndClosedThroughOneGroup() throws Exception {
        Map<String, Long> before = totals("before");
        int total = 1000, batch = 20;
        for (int start = 0; start < total; start += batch) {
            List<Conn> conns = new ArrayList<>(batch);
            for (int i = start; i < start + batch; i++) {
                conns.add(connect(i, 64));
            }
            for (Conn c : conns) {
                c.sendAll(64);
            }
            for (Conn c : conns) {
                c.echoed.get(WAIT_S, TimeUnit.SECONDS);
                c.channel.close().syncUninterruptibly();
            }
        }
        assertEquals(total, accepted.get(), "connections the server accepted");
        awaitServerChildrenClosed();
        assertBackTo(before, totals("after"));
    }

    @Test
    void aHundredConnectionsHeldOpenWithTrafficOnEach() throws Exception {
        Map<String, Long> before = totals("before");
        int n = 100, bytes = 64 << 10;
        List<Conn> conns = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            conns.add(connect(i, bytes));
        }
        for (Conn c : conns) {
            c.sendAll(4 << 10);
        }
        for (Conn c : conns) {
            c.echoed.get(WAIT_S, TimeUnit.SECONDS);
        }
        Map<String, Long> peak = totals("peak, " + n + " connections open");
        if (peak.containsKey("connections")) {
            assertEquals(before.get("connections") + 2L * n, peak.get("connections"), "open connections at the peak");
        }
        for (Conn c : conns) {
            c.channel.close().syncUninterruptibly();
        }
        awaitServerChildrenClosed();
        assertBackTo(before, totals("after"));
    }

    /** A client connection that sends {@code expected} pattern bytes of its own and checks their echo. */
    static final class Conn extends ChannelInboundHandlerAdapter {
        final int id;
        final int expected;
        final CompletableFuture<Void> echoed = new CompletableFuture<>();
        Channel channel;
        private int received;

        Conn(int id, int expected) {
            this.id = id;
            this.expected = expected;
        }

        void sendAll(int chunk) {
            for (int off = 0; off < expected; off += chunk) {
                int len = Math.min(chunk, expected - off);
                ByteBuf b = channel.alloc().buffer(len);
                for (int k = 0; k < len; k++) {
                    b.writeByte(pattern(id, off + k));
                }
                channel.write(b);
            }
            channel.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                while (b.isReadable()) {
                    byte got = b.readByte();
                    if (received >= expected || got != pattern(id, received)) {
                        echoed.completeExceptionally(new AssertionError(
                                "connection " + id + ": byte " + received + " of the echo is wrong"));
                        return;
                    }
                    received++;
                }
                if (received == expected) {
                    echoed.complete(null);
                }
            } finally {
                ReferenceCountUtil.release(b);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            echoed.completeExceptionally(new AssertionError(
                    "connection " + id + " closed after " + received + " of " + expected + " bytes"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            echoed.completeExceptionally(cause);
        }
    }

    private Conn connect(int id, int bytes) {
        Conn c = new Conn(id, bytes);
        ChannelFuture f = new Bootstrap()
                .group(group)
                .channel(transport.channelClass())
                .handler(c)
                .connect(new InetSocketAddress(transport.address(0).getAddress(), port()));
        assertTrue(f.awaitUninterruptibly(WAIT_S, TimeUnit.SECONDS), "connection " + id + " within " + WAIT_S + " s");
        if (!f.isSuccess()) {
            throw new AssertionError("connection " + id + " failed: " + f.cause(), f.cause());
        }
        c.channel = f.channel();
        return c;
    }

    private int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    private static byte pattern(int id, int offset) {
        return (byte) (id * 31 + offset * 7);
    }

    private void awaitServerChildrenClosed() {
        for (Channel ch : serverChildren) {
            assertTrue(
                    ch.closeFuture().awaitUninterruptibly(WAIT_S, TimeUnit.SECONDS),
                    "the server side of " + ch + " closed within " + WAIT_S + " s of the client's close");
        }
    }

    /**
     * The transport's totals ({@code RdmaStats}, over RDMA) and the device's queue pairs
     * ({@code rdma res show}, in the guest), printed under {@code label}.
     */
    private Map<String, Long> totals(String label) throws Exception {
        Map<String, Long> m = new LinkedHashMap<>();
        if (transport == TestTransport.RDMA) {
            Object s = Class.forName("org.verbs4j.netty.RdmaStats")
                    .getMethod("snapshot")
                    .invoke(null);
            for (RecordComponent rc : s.getClass().getRecordComponents()) {
                if (!rc.getName().equals("connectionsOpened")) {
                    m.put(rc.getName(), ((Number) rc.getAccessor().invoke(s)).longValue());
                }
            }
        }
        if (RdmaTestSupport.inGuest()) {
            String res = rdmaRes();
            System.out.println("[scale] rdma res show, " + label + ": " + res.strip());
            for (String line : res.split("\n")) {
                String[] t = line.strip().split("\\s+");
                for (int i = 2; i + 1 < t.length; i++) {
                    if (t[i].equals("qp")) {
                        m.merge("qp", Long.parseLong(t[i + 1]), Long::sum);
                    }
                }
            }
        }
        System.out.println("[scale] " + transport + " " + label + ": " + m);
        return m;
    }

    private static void assertBackTo(Map<String, Long> before, Map<String, Long> after) {
        for (String k : List.of("registeredBytes", "connections", "postedReceives", "qp")) {
            if (before.containsKey(k)) {
                assertEquals(before.get(k), after.get(k), k + " once every connection is closed");
            }
        }
    }

    static String rdmaRes() throws IOException, InterruptedException {
        Process p = new ProcessBuilder("rdma", "res", "show")
                .redirectErrorStream(true)
                .start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(20, TimeUnit.SECONDS), "rdma res show within 20 s");
        return out;
    }

    /** Echoes what it reads. */
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }
}
