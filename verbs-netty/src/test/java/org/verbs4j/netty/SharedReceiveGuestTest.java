package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.netty.ScaleOverTransportTest.Conn;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * The shared receive queue per event loop ({@link RdmaTransportConfig#withSharedReceiveQueue}) on
 * rxe: {@value #CONNECTIONS} connections (and, for the measurement, as many more as
 * {@code --config=verbs4j.netty.sharedConnections=N} or that system property asks)
 * held open at once through one client loop and one server loop, an echo on each with every byte
 * checked, with the shared queue and the loop's shared send buffers, with the shared queue and
 * per-connection send buffers, and with per-connection buffers alone; the registered memory at the
 * peak is printed for each and must fall in that order, the loops' reservations within their cap
 * and covered by the buffers posted, their shared send buffers within theirs, and the device's objects
 * ({@code rdma res}) back to where they were once the connections closed; the same after
 * connections opened, used and closed in batches, and through one shared send buffer per loop. And the cap: a
 * connection past it is refused, in either mode and on either side, the loop's other connections
 * unaffected.
 */
@RdmaTest
class SharedReceiveGuestTest {
    private static final int CONNECTIONS = 20;
    /** A larger count measured too, when asked (0: none). */
    private static int larger = Integer.getInteger("verbs4j.netty.sharedConnections", 0);

    @org.junit.jupiter.api.extension.RegisterExtension
    static final org.junit.jupiter.api.extension.BeforeAllCallback LARGER =
            c -> c.getConfigurationParameter("verbs4j.netty.sharedConnections")
                    .map(Integer::parseInt)
                    .ifPresent(n -> larger = n);
    /** Connections opened, used and closed in batches of 20 (system property {@code verbs4j.netty.sharedChurn}). */
    private static final int CHURN = Integer.getInteger("verbs4j.netty.sharedChurn", 40);

    private static final int BYTES = 8 << 10, CHUNK = 1 << 10;
    private static final long WAIT_S = 120;
    private static final int BUFFER = 16 << 10;
    /** The receive bytes one shared-queue connection reserves by default: its credits and two probe buffers. */
    private static final long SHARED_RESERVATION = (RdmaTransportConfig.DEFAULT_SHARED_CREDITS + 2L) * BUFFER;

    @Test
    void connectionsHeldOpenOnOneLoopRegisterLessWithASharedReceiveQueue() throws Exception {
        measure(CONNECTIONS);
        if (larger > 0 && larger != CONNECTIONS) {
            measure(larger);
        }
    }

    private static void measure(int connections) throws Exception {
        long cap = 64L << 20;
        RdmaTransportConfig sharedQueue =
                RdmaTransportConfig.defaults().withSharedReceiveQueue().withMaxReceiveBytes(cap);
        long both = peakRegistered("shared receive queue and send buffers", sharedQueue, connections);
        long shared = peakRegistered(
                "shared receive queue, per-connection send buffers", sharedQueue.withSharedSendBytes(0), connections);
        long own =
                peakRegistered("per-connection receive and send buffers", RdmaTransportConfig.defaults(), connections);
        System.out.printf(
                "[shared-receive] %d connections on one loop per side: %d bytes registered with the shared receive"
                        + " queue and send buffers (%.2fx), %d with the shared receive queue alone (%.2fx), %d with"
                        + " per-connection buffers%n",
                connections, both, (double) both / own, shared, (double) shared / own, own);
        assertTrue(shared < own, "the shared receive queue registers less: " + shared + " < " + own);
        assertTrue(both < shared, "the shared send buffers register less again: " + both + " < " + shared);
    }

    /**
     * One shared send buffer per loop for {@link #CONNECTIONS} connections and an anchor: writes
     * wait for it (never fail) and every byte of every echo arrives; half the connections close
     * with their writes in flight or waiting, and the anchor's echo still comes (the one buffer
     * came back on each side); none is left in use, and nothing registered once all closed.
     */
    @Test
    void connectionsSharingOneSendBufferPerLoopSendEveryByte() throws Exception {
        RdmaTransportConfig config =
                RdmaTransportConfig.defaults().withSharedReceiveQueue().withSharedSendBytes(1);
        try (Loops loops = new Loops(config)) {
            Conn anchor = connect(loops.clientGroup, loops.server, 1000);
            List<Conn> echoes = new ArrayList<>();
            for (int i = 0; i < CONNECTIONS; i++) {
                echoes.add(connect(loops.clientGroup, loops.server, i));
            }
            for (Conn e : echoes) {
                e.sendAll(CHUNK);
            }
            for (Conn e : echoes.subList(0, CONNECTIONS / 2)) {
                e.channel.close().syncUninterruptibly(); // its writes in flight, or waiting for the buffer
            }
            for (Conn e : echoes.subList(CONNECTIONS / 2, CONNECTIONS)) {
                e.echoed.get(WAIT_S, TimeUnit.SECONDS);
            }
            anchor.sendAll(CHUNK);
            anchor.echoed.get(WAIT_S, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (RdmaLoopStats loop = loops.client();
                    loop.sharedSendBytesInUse() + loops.serverLoop().sharedSendBytesInUse() > 0;
                    loop = loops.client()) {
                assertTrue(System.nanoTime() - deadline < 0, "the send buffers come back: " + loop);
                Thread.sleep(50);
            }
            for (RdmaLoopStats loop : List.of(loops.client(), loops.serverLoop())) {
                assertEquals(BUFFER, loop.sharedSendRegisteredBytes(), "one buffer, the cap's: " + loop);
            }
            System.out.println("[shared-receive] one send buffer per loop: client loop " + loops.client()
                    + ", server loop " + loops.serverLoop());
            for (Conn e : echoes.subList(CONNECTIONS / 2, CONNECTIONS)) {
                e.channel.close().syncUninterruptibly();
            }
            anchor.channel.close().syncUninterruptibly();
            loops.assertBackAfter(CONNECTIONS + " connections and an anchor through one send buffer per loop");
        }
    }

    /**
     * {@link #CHURN} connections opened, used and closed in batches through one loop per side with
     * the shared queue: the queue is made and released again as batches come and go, frames of
     * connections closing meet their buffers reposted, and every echo is checked.
     */
    @Test
    void connectionsOpenedUsedAndClosedInBatchesLeaveNothingBehind() throws Exception {
        try (Loops loops = new Loops(RdmaTransportConfig.defaults().withSharedReceiveQueue())) {
            for (int start = 0; start < CHURN; start += 20) {
                List<Conn> batch = new ArrayList<>();
                for (int i = start; i < Math.min(CHURN, start + 20); i++) {
                    batch.add(connect(loops.clientGroup, loops.server, i));
                }
                for (Conn c : batch) {
                    c.sendAll(CHUNK);
                }
                for (Conn c : batch) {
                    c.echoed.get(WAIT_S, TimeUnit.SECONDS);
                    c.channel.close().syncUninterruptibly();
                }
            }
            loops.assertBackAfter(CHURN + " connections in batches of 20");
            assertEquals(new RdmaLoopStats(0, 0, 0, Long.MAX_VALUE, 0, 0, 0, 0), loops.client());
            assertEquals(new RdmaLoopStats(0, 0, 0, Long.MAX_VALUE, 0, 0, 0, 0), loops.serverLoop());
        }
    }

    /**
     * Connections closed while another stays open on the same loops: each closing queue pair's
     * {@code IBV_EVENT_QP_LAST_WQE_REACHED} is waited for where the device sends it (the events the
     * device queued tell), and where it does not each loop waits once, to the bound; once they
     * are gone every buffer of each loop's queue is posted again.
     */
    @Test
    void closedConnectionsWaitForTheirLastWqeAndGiveEveryBufferBack() throws Exception {
        try (Loops loops = new Loops(RdmaTransportConfig.defaults().withSharedReceiveQueue())) {
            Conn anchor = connect(loops.clientGroup, loops.server, 1000);
            anchor.sendAll(CHUNK);
            anchor.echoed.get(WAIT_S, TimeUnit.SECONDS);
            org.verbs4j.Context device = Connector.deviceOf(java.net.InetAddress.getByName(RdmaTestSupport.guestIp()));
            lastWqeEvents(device); // those of earlier tests
            long arrived = RdmaIoHandler.LAST_WQE_ARRIVED.get(), missed = RdmaIoHandler.LAST_WQE_MISSED.get();
            long nanos = RdmaIoHandler.LAST_WQE_NANOS.get();
            int closed = 0;
            for (int round = 0; round < 3; round++) {
                List<Conn> batch = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    batch.add(connect(loops.clientGroup, loops.server, closed + i));
                }
                for (Conn c : batch) {
                    c.sendAll(CHUNK);
                }
                for (Conn c : batch) {
                    c.echoed.get(WAIT_S, TimeUnit.SECONDS);
                    c.channel.close().syncUninterruptibly();
                    closed++;
                }
            }
            Channel anchorChild = loops.children.poll();
            for (Channel ch; (ch = loops.children.poll()) != null; ) {
                assertTrue(ch.closeFuture().await(WAIT_S, TimeUnit.SECONDS), "server side closed");
            }
            long got = RdmaIoHandler.LAST_WQE_ARRIVED.get() - arrived;
            long waitsMissed = RdmaIoHandler.LAST_WQE_MISSED.get() - missed;
            Thread.sleep(2_000); // late events still count as sent
            int sent = lastWqeEvents(device);
            System.out.printf(
                    "[shared-receive] %d connections closed: the device queued %d IBV_EVENT_QP_LAST_WQE_REACHED; %d"
                            + " waited for (%.3f ms on average), %d waits past the %d ms bound; client loop %s, server"
                            + " loop %s%n",
                    closed,
                    sent,
                    got,
                    got == 0 ? 0.0 : (RdmaIoHandler.LAST_WQE_NANOS.get() - nanos) / 1e6 / got,
                    waitsMissed,
                    RdmaIoHandler.LAST_WQE_WAIT_MS,
                    loops.client(),
                    loops.serverLoop());
            if (sent > 0) {
                assertTrue(got >= closed, "a LAST_WQE_REACHED waited for on each connection the client closed: " + got);
            } else {
                assertEquals(0, got, "none sent, none seen");
                assertEquals(
                        2L * RdmaIoHandler.LAST_WQE_MISSES_TO_STOP,
                        waitsMissed,
                        "a loop whose device never sends it waits to the bound for so many closes in a row, then no more");
            }
            for (RdmaLoopStats loop : List.of(loops.client(), loops.serverLoop())) {
                assertEquals(1, loop.connections(), "the anchor only: " + loop);
                assertEquals(
                        loop.sharedRegisteredBytes(),
                        loop.sharedPostedReceives() * BUFFER,
                        "every buffer of the loop's queue is posted again: " + loop);
            }
            anchor.channel.close().syncUninterruptibly();
            assertTrue(anchorChild.closeFuture().await(WAIT_S, TimeUnit.SECONDS), "the anchor's server side closed");
            loops.assertBackAfter("connections closed beside an anchor");
        }
    }

    /**
     * The loop's shared queue goes, whatever way its last connection went: a connect refused by
     * the peer, one refused by the loop's own cap, and the loop shut down with a connect in flight.
     */
    @Test
    void aLoopsQueueGoesWithItsLastConnectionHoweverItWent() throws Exception {
        RdmaTransportConfig config = RdmaTransportConfig.defaults().withSharedReceiveQueue();
        Map<String, Long> before = rdmaRes();
        InetSocketAddress nobody = new InetSocketAddress(RdmaTestSupport.guestIp(), 1);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
        EventLoopGroup capped = new MultiThreadIoEventLoopGroup(
                1, RdmaIoHandler.newFactory(config.withMaxReceiveBytes(SHARED_RESERVATION - 1)));
        boolean ok = false;
        try {
            ChannelFuture refused = bootstrap(group, null).connect(nobody);
            assertTrue(refused.await(WAIT_S, TimeUnit.SECONDS), "the refusal reaches the connect promise");
            assertInstanceOf(ConnectException.class, refused.cause());
            awaitRes(before, "after a connect nothing listened for");
            assertEquals(new RdmaLoopStats(0, 0, 0, Long.MAX_VALUE, 0, 0, 0, 0), RdmaIoHandler.stats(group.next()));

            ChannelFuture past = bootstrap(capped, null).connect(nobody);
            assertTrue(past.await(WAIT_S, TimeUnit.SECONDS), "the refusal reaches the connect promise");
            assertInstanceOf(ReceiveLimitException.class, past.cause());
            awaitRes(before, "after a connect refused by the loop's cap");
            ok = true;
        } finally {
            TestTransport.close(null, capped);
            if (!ok) {
                TestTransport.close(null, group);
            }
        }
        ChannelFuture inFlight = bootstrap(group, null).connect(nobody);
        TestTransport.close(null, group); // the loop goes with the connect in flight
        assertTrue(inFlight.await(WAIT_S, TimeUnit.SECONDS), "the connect ends");
        awaitRes(before, "after the loop was shut down with a connect in flight");
    }

    /**
     * A loop's queue made on a connection's allocator's protection domain holds it: the allocator
     * closes while another connection still uses the queue, and the domain goes with the queue.
     */
    @Test
    void theQueueHoldsTheProtectionDomainOfTheAllocatorItWasMadeOn() throws Exception {
        try (Loops loops = new Loops(RdmaTransportConfig.defaults().withSharedReceiveQueue())) {
            RdmaByteBufAllocator alloc =
                    RdmaByteBufAllocator.forAddress(java.net.InetAddress.getByName(RdmaTestSupport.guestIp()));
            org.verbs4j.ProtectionDomain pd = alloc.pool().regions().getFirst().protectionDomain();
            Conn first = new Conn(0, BYTES);
            first.channel = bootstrap(loops.clientGroup, alloc)
                    .handler(first)
                    .connect(loops.server.localAddress())
                    .syncUninterruptibly()
                    .channel();
            Conn second = connect(loops.clientGroup, loops.server, 1);
            first.sendAll(CHUNK);
            first.echoed.get(WAIT_S, TimeUnit.SECONDS);
            first.channel.close().syncUninterruptibly();
            alloc.close(); // the loop's queue still holds its domain
            assertTrue(pd.isOpen(), "the allocator's domain stays open while the loop's queue lives");
            second.sendAll(CHUNK);
            second.echoed.get(WAIT_S, TimeUnit.SECONDS);
            second.channel.close().syncUninterruptibly();
            loops.assertBackAfter("the allocator closed before the loop's queue");
            assertFalse(pd.isOpen(), "the domain went with the loop's queue");
        }
    }

    /** Takes every async event {@code device} queued; returns how many were LAST_WQE_REACHED. */
    private static int lastWqeEvents(org.verbs4j.Context device) {
        int n = 0;
        for (java.util.Optional<org.verbs4j.AsyncEvent> e;
                (e = device.nextAsyncEvent(java.time.Duration.ZERO)).isPresent(); ) {
            n += e.get().type() == org.verbs4j.AsyncEvent.QP_LAST_WQE_REACHED ? 1 : 0;
        }
        return n;
    }

    private static Bootstrap bootstrap(EventLoopGroup group, RdmaByteBufAllocator alloc) {
        Bootstrap b = new Bootstrap()
                .group(group)
                .channel(RdmaSocketChannel.class)
                .handler(new ChannelInboundHandlerAdapter());
        return alloc == null ? b : b.option(io.netty.channel.ChannelOption.ALLOCATOR, alloc);
    }

    /** Waits (bounded) until the device's qp, cq, mr, srq and pd counts are back to {@code before}. */
    private static void awaitRes(Map<String, Long> before, String what) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Map<String, Long> now;
        while (true) {
            now = rdmaRes();
            boolean back = true;
            for (String k : List.of("qp", "cq", "mr", "srq", "pd")) {
                back &= java.util.Objects.equals(before.get(k), now.get(k));
            }
            if (back) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("rdma res " + what + ": " + now + ", before: " + before);
            }
            Thread.sleep(100);
        }
    }

    /** Runs the echo on {@code connections} connections with {@code config}; returns the registered bytes at the peak. */
    private static long peakRegistered(String mode, RdmaTransportConfig config, int connections) throws Exception {
        try (Loops loops = new Loops(config)) {
            List<Conn> echoes = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                echoes.add(connect(loops.clientGroup, loops.server, i));
            }
            for (Conn e : echoes) {
                e.sendAll(CHUNK);
            }
            for (Conn e : echoes) {
                e.echoed.get(WAIT_S, TimeUnit.SECONDS);
            }
            long peak = RdmaIoHandler.stats().registeredBytes() - loops.registeredBefore;
            RdmaLoopStats client = loops.client(), serverLoop = loops.serverLoop();
            System.out.println("[shared-receive] " + mode + ", before: registered " + loops.registeredBefore
                    + " B, rdma res " + loops.resBefore);
            System.out.println("[shared-receive] " + mode + ", peak: registered +" + peak + " B, client loop " + client
                    + ", server loop " + serverLoop + ", rdma res " + rdmaRes());
            for (RdmaLoopStats loop : List.of(client, serverLoop)) {
                assertEquals(connections, loop.connections(), "connections reserved on the loop: " + loop);
                assertTrue(loop.receiveBytesReserved() <= loop.maxReceiveBytes(), "within the cap: " + loop);
                if (config.shared()) {
                    assertEquals(connections * SHARED_RESERVATION, loop.receiveBytesReserved(), "reserved: " + loop);
                    assertTrue(
                            loop.sharedPostedReceives() * BUFFER >= loop.receiveBytesReserved(),
                            "the buffers posted cover every credit granted and the probe buffers: " + loop);
                } else {
                    assertEquals(0, loop.sharedPostedReceives(), "no shared queue: " + loop);
                }
                if (config.sharedSends()) {
                    assertTrue(
                            loop.sharedSendRegisteredBytes() >= BUFFER
                                    && loop.sharedSendRegisteredBytes() <= config.sharedSendBytes(),
                            "shared send buffers registered, within their cap: " + loop);
                    assertTrue(loop.sharedSendBytesInUse() <= loop.sharedSendRegisteredBytes(), "in use: " + loop);
                } else {
                    assertEquals(0, loop.sharedSendRegisteredBytes(), "no shared send buffers: " + loop);
                }
            }
            for (Conn e : echoes) {
                e.channel.close().syncUninterruptibly();
            }
            loops.assertBackAfter(mode);
            assertEquals(0, loops.client().sharedRegisteredBytes(), "the idle loop's queue is gone");
            assertEquals(0, loops.client().sharedSendRegisteredBytes(), "the idle loop's send buffers are gone");
            return peak;
        }
    }

    @Test
    void aConnectionPastTheLoopsCapIsRefusedAndTheOthersGoOn() throws Exception {
        refusedPastTheCap(RdmaTransportConfig.defaults().withSharedReceiveQueue(), SHARED_RESERVATION);
        refusedPastTheCap(RdmaTransportConfig.defaults(), (RdmaSocketChannelConfig.DEFAULT_BUFFERS + 2L) * BUFFER);
    }

    /** Caps the client's loop at two connections of {@code reservation} bytes, then the server's at one. */
    private static void refusedPastTheCap(RdmaTransportConfig config, long reservation) throws Exception {
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(
                1, RdmaIoHandler.newFactory(config.withMaxReceiveBytes(2 * reservation)));
        EventLoopGroup cappedServerGroup =
                new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config.withMaxReceiveBytes(reservation)));
        BlockingQueue<Channel> children = new LinkedBlockingQueue<>();
        Channel server = null, cappedServer = null;
        try {
            server = echoServer(serverGroup, children);
            Conn a = connect(clientGroup, server, 0), b = connect(clientGroup, server, 1);
            long t0 = System.nanoTime();
            ChannelFuture third = new Bootstrap()
                    .group(clientGroup)
                    .channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress());
            assertTrue(third.await(WAIT_S, TimeUnit.SECONDS), "the refusal reaches the connect promise");
            assertFalse(third.isSuccess(), "a third connection past the client loop's cap");
            ReceiveLimitException e = assertInstanceOf(ReceiveLimitException.class, third.cause());
            System.out.printf("[shared-receive] %s: the client's refusal in %d ms%n", config, ms(t0));
            assertTrue(
                    e.getMessage().contains("maxReceiveBytes " + 2 * reservation)
                            && e.getMessage().contains((2 * reservation) + " bytes reserved for 2 connections"),
                    e.getMessage());
            for (Conn c : List.of(a, b)) {
                c.sendAll(CHUNK);
                c.echoed.get(WAIT_S, TimeUnit.SECONDS); // the loop's other connections go on
            }
            assertEquals(2, RdmaIoHandler.stats(clientGroup.next()).connections());

            cappedServer = echoServer(cappedServerGroup, new LinkedBlockingQueue<>());
            EventLoopGroup plain = serverGroup; // any loop without a cap for these clients
            Conn first = connect(plain, cappedServer, 2);
            t0 = System.nanoTime();
            ChannelFuture second = new Bootstrap()
                    .group(plain)
                    .channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(cappedServer.localAddress());
            assertTrue(second.await(WAIT_S, TimeUnit.SECONDS), "the server's refusal reaches the client");
            assertInstanceOf(ConnectException.class, second.cause(), "refused by the server past its loop's cap");
            System.out.printf("[shared-receive] %s: the server's refusal in %d ms%n", config, ms(t0));
            assertFalse(
                    second.cause() instanceof io.netty.channel.ConnectTimeoutException,
                    "the server rejects the request, it does not leave it to time out: " + second.cause());
            assertTrue(
                    second.cause().getMessage().contains("connection refused by"),
                    second.cause().toString());
            first.sendAll(CHUNK);
            first.echoed.get(WAIT_S, TimeUnit.SECONDS);
            first.channel.close().syncUninterruptibly();
            a.channel.close().syncUninterruptibly();
            b.channel.close().syncUninterruptibly();
        } finally {
            TestTransport.close(cappedServer, cappedServerGroup);
            TestTransport.close(server, serverGroup);
            TestTransport.close(null, clientGroup);
        }
    }

    private static long ms(long since) {
        return (System.nanoTime() - since) / 1_000_000;
    }

    private static Channel echoServer(EventLoopGroup group, BlockingQueue<Channel> children) {
        return new ServerBootstrap()
                .group(group)
                .channel(RdmaServerSocketChannel.class)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        children.add(ch);
                        ch.pipeline().addLast(new RdmaEchoGuestTest.Echo());
                    }
                })
                .bind(new InetSocketAddress(RdmaTestSupport.guestIp(), 0))
                .syncUninterruptibly()
                .channel();
    }

    /** A client on {@code group} that sends {@link #BYTES} pattern bytes of its own and checks every byte of the echo. */
    private static Conn connect(EventLoopGroup group, Channel server, int id) throws InterruptedException {
        Conn e = new Conn(id, BYTES);
        ChannelFuture f = new Bootstrap()
                .group(group)
                .channel(RdmaSocketChannel.class)
                .handler(e)
                .connect(server.localAddress());
        assertTrue(f.await(WAIT_S, TimeUnit.SECONDS), "connection " + id + " within " + WAIT_S + " s");
        if (!f.isSuccess()) {
            throw new AssertionError("connection " + id + " failed: " + f.cause(), f.cause());
        }
        e.channel = f.channel();
        return e;
    }

    /** The device's object counts ({@code rdma res show}: pd, cq, qp, mr, srq, ...), summed over devices. */
    private static Map<String, Long> rdmaRes() throws Exception {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String line : ScaleOverTransportTest.rdmaRes().split("\n")) {
            String[] t = line.strip().split("\\s+");
            for (int i = 2; i + 1 < t.length; i += 2) {
                if (t[i + 1].matches("\\d+")) {
                    m.merge(t[i], Long.parseLong(t[i + 1]), Long::sum);
                }
            }
        }
        return m;
    }

    /**
     * A client loop and a server loop made with one configuration, an echo server on the second, and
     * the totals before anything connected.
     */
    private static final class Loops implements AutoCloseable {
        final EventLoopGroup serverGroup, clientGroup;
        final BlockingQueue<Channel> children = new LinkedBlockingQueue<>();
        final Map<String, Long> resBefore;
        final long registeredBefore, sendRegisteredBefore;
        Channel server;

        Loops(RdmaTransportConfig config) throws Exception {
            serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
            clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
            resBefore = rdmaRes();
            registeredBefore = RdmaIoHandler.stats().registeredBytes();
            sendRegisteredBefore = RdmaIoHandler.stats().sharedSendRegisteredBytes();
            server = echoServer(serverGroup, children);
        }

        RdmaLoopStats client() {
            return RdmaIoHandler.stats(clientGroup.next());
        }

        RdmaLoopStats serverLoop() {
            return RdmaIoHandler.stats(serverGroup.next());
        }

        /** Once the server side of every connection closed: registered bytes and {@code rdma res} as before. */
        void assertBackAfter(String what) throws Exception {
            for (int i = 0; children.peek() != null; i++) {
                Channel ch = children.poll();
                assertTrue(ch.closeFuture().await(WAIT_S, TimeUnit.SECONDS), "server side " + i + " closed");
            }
            Map<String, Long> resAfter = rdmaRes();
            long registeredAfter = RdmaIoHandler.stats().registeredBytes();
            System.out.println("[shared-receive] " + what + ", after close: registered " + registeredAfter
                    + " B, client loop " + client() + ", server loop " + serverLoop() + ", rdma res " + resAfter);
            assertEquals(registeredBefore, registeredAfter, "registered bytes once every connection closed");
            for (RdmaLoopStats loop : List.of(client(), serverLoop())) {
                assertEquals(0, loop.sharedSendBytesInUse(), "no shared send buffer held: " + loop);
                assertEquals(0, loop.sharedSendRegisteredBytes(), "the loop's shared send buffers are gone: " + loop);
            }
            assertEquals(
                    sendRegisteredBefore,
                    RdmaIoHandler.stats().sharedSendRegisteredBytes(),
                    "the loops' shared send bytes once every connection closed");
            for (String k : List.of("qp", "cq", "mr", "srq")) {
                assertEquals(resBefore.get(k), resAfter.get(k), "rdma res " + k + " once every connection closed");
            }
        }

        @Override
        public void close() {
            TestTransport.close(server, serverGroup);
            TestTransport.close(null, clientGroup);
        }
    }
}
