package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;
import static org.verbs4j.cm.CmTestSupport.bytes;
import static org.verbs4j.cm.CmTestSupport.poll;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.CompletionStatus;
import org.verbs4j.MemoryRegion;
import org.verbs4j.QueuePairAttributes;
import org.verbs4j.QueuePairState;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.RdmaTest;

/**
 * One JVM, both ends through the public API on rxe0: connect by address and port with private
 * data each way, SEND and RDMA WRITE in both directions, then a disconnect the peer sees within a
 * bound, its posted receives flushed with WR_FLUSH_ERR (each wr_id exactly once), and the
 * kernel's counts of cm ids, QPs, CQs and MRs back where they were.
 */
@RdmaTest
class ConnectionGuestTest {
    private static final int SIZE = 4096;

    /** One side: its connection's region, posted through the beforeConnect hook. */
    static final class Side {
        final AtomicReference<MemoryRegion> mr = new AtomicReference<>();
        final ReceiveWorkRequests recvs = new ReceiveWorkRequests(8, 1);
        final SendWorkRequests sends = new SendWorkRequests(8, 1);
        final WorkCompletions wcs = new WorkCompletions(16);

        ConnectionSetup setup(long firstWrId, int receives) {
            return new ConnectionSetup()
                    .remoteAccess(EnumSet.of(Access.REMOTE_WRITE))
                    .beforeConnect(c -> {
                        MemoryRegion m = c.protectionDomain()
                                .allocateMemoryRegion(SIZE, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                        mr.set(m);
                        recvs.clear();
                        for (int i = 0; i < receives; i++) {
                            recvs.add(firstWrId + i).sge(m, 256L * i, 256);
                        }
                        c.queuePair().postRecv(recvs);
                    });
        }

        void close() {
            if (mr.get() != null) {
                mr.get().close();
            }
            recvs.close();
            sends.close();
            wcs.close();
        }
    }

    @Test
    void connectSendAndWriteBothWaysThenTheDisconnectFlushesThePeer() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        int port = CmTestSupport.port();
        Side cs = new Side(), ss = new Side();
        ExecutorService server = Executors.newSingleThreadExecutor();
        RdmaConnection client = null, srv = null;
        CmEventChannel ch = CmEventChannel.open();
        CmListener listener = CmListener.bind(ch, address(port), 4);
        try {
            assertEquals(port, listener.localAddress().getPort());
            Future<RdmaConnection> accepted = server.submit(() -> {
                ConnectionRequest r = listener.accept(WAIT);
                CmTestSupport.assertPrivateData(bytes("hello from the client"), r.privateData());
                assertEquals(CmTestSupport.ip(), r.peerAddress().getAddress());
                return r.accept(ss.setup(100, 4), bytes("welcome"), WAIT);
            });
            long t0 = System.nanoTime();
            client = RdmaConnection.connect(ch, address(port), cs.setup(200, 3), bytes("hello from the client"), WAIT);
            srv = accepted.get(60, TimeUnit.SECONDS);
            System.out.printf(
                    "ConnectionGuestTest: connect+accept in one JVM %.1f ms%n", (System.nanoTime() - t0) / 1e6);
            assertEquals(ConnectionState.CONNECTED, client.state());
            assertEquals(ConnectionState.CONNECTED, srv.state());
            CmTestSupport.assertPrivateData(bytes("welcome"), client.peerPrivateData());
            CmTestSupport.assertPrivateData(bytes("hello from the client"), srv.peerPrivateData());
            assertEquals(port, client.peerAddress().getPort());

            // the queue pairs as this library set them: RTS, least privilege, bounded retries
            for (RdmaConnection c : new RdmaConnection[] {client, srv}) {
                QueuePairAttributes a = c.queuePair().query();
                assertEquals(QueuePairState.RTS, a.state(), c.toString());
                assertEquals(Access.mask(EnumSet.of(Access.REMOTE_WRITE)), a.accessFlags(), "access flags of " + c);
                assertEquals(6, a.retryCount(), "retry count of " + c);
                assertTrue(a.rnrRetry() <= 6, "rnr retry of " + c);
                RdmaConnection peer = c == client ? srv : client;
                assertEquals(peer.queuePair().qpNumber(), a.destQpNumber(), "destination QP of " + c);
            }

            // SEND client -> server, then server -> client
            sendText(client, cs, "ping", 1);
            assertReceived(srv, ss, 100, "ping");
            sendText(srv, ss, "pong", 2);
            assertReceived(client, cs, 200, "pong");

            // RDMA WRITE both ways into the far end of each other's region
            write(client, cs, ss.mr.get(), (byte) 0x5a, 3);
            write(srv, ss, cs.mr.get(), (byte) 0x3c, 4);
            assertFilled(ss.mr.get(), (byte) 0x5a);
            assertFilled(cs.mr.get(), (byte) 0x3c);

            // the client disconnects: the server sees it within a bound; its 3 posted receives flush
            java.util.List<String> events = new java.util.concurrent.CopyOnWriteArrayList<>();
            client.onEvent((c, e) -> events.add(e.name()));
            long d0 = System.nanoTime();
            client.disconnect();
            assertTrue(
                    srv.awaitDisconnect(Duration.ofSeconds(10)),
                    "the server saw no disconnect within 10 s: " + srv.state());
            System.out.printf(
                    "ConnectionGuestTest: the peer saw the disconnect after %.1f ms%n", (System.nanoTime() - d0) / 1e6);
            assertFlushed(srv, ss, Set.of(101L, 102L, 103L));
            assertFlushed(client, cs, Set.of(201L, 202L));
            // the transport's time-wait ends: a state change to wait for, and a callback
            assertEquals(
                    ConnectionState.TIMEWAIT_EXITED,
                    client.awaitState(EnumSet.of(ConnectionState.TIMEWAIT_EXITED), Duration.ofSeconds(20)));
            System.out.printf(
                    "ConnectionGuestTest: time-wait exit %.1f ms after the disconnect; callbacks: %s%n",
                    (System.nanoTime() - d0) / 1e6, events);
            // the state changes before the callback runs on the event thread: give the callback its turn
            long until = System.nanoTime() + 5_000_000_000L;
            while (!events.contains("RDMA_CM_EVENT_TIMEWAIT_EXIT") && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertTrue(events.contains("RDMA_CM_EVENT_TIMEWAIT_EXIT"), events.toString());
            client.close();
            client.close(); // twice: nothing
            srv.close();
            srv.close();
        } finally {
            server.shutdownNow();
            if (client != null) {
                client.close();
            }
            if (srv != null) {
                srv.close();
            }
            listener.close();
            ch.close();
            cs.close();
            ss.close();
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts after closing everything");
    }

    private static void sendText(RdmaConnection c, Side s, String text, long wrId) {
        MemorySegment buf = s.mr.get().segment();
        buf.setString(SIZE - 3072, text);
        s.sends.clear().send(wrId).sge(s.mr.get(), SIZE - 3072, text.length()).signaled();
        c.queuePair().postSend(s.sends);
        poll(c.sendCompletionQueue(), s.wcs, 1);
        assertEquals(CompletionStatus.SUCCESS, s.wcs.status(0), s.wcs.statusText(0));
        assertEquals(wrId, s.wcs.wrId(0));
    }

    private static void assertReceived(RdmaConnection c, Side s, long wrId, String text) {
        poll(c.receiveCompletionQueue(), s.wcs, 1);
        assertEquals(CompletionStatus.SUCCESS, s.wcs.status(0), s.wcs.statusText(0));
        assertEquals(wrId, s.wcs.wrId(0));
        assertEquals(text.length(), s.wcs.byteLength(0));
        byte[] got =
                s.mr.get().segment().asSlice(256L * (wrId % 100), text.length()).toArray(ValueLayout.JAVA_BYTE);
        assertEquals(text, new String(got, java.nio.charset.StandardCharsets.UTF_8));
    }

    /** Writes 1 KiB of {@code value} from [SIZE-2048, SIZE-1024) of this side into [SIZE-1024, SIZE) of the other's. */
    private static void write(RdmaConnection c, Side s, MemoryRegion remote, byte value, long wrId) {
        s.mr.get().segment().asSlice(SIZE - 2048, 1024).fill(value);
        s.sends
                .clear()
                .write(wrId, remote.address() + SIZE - 1024, remote.rkey())
                .sge(s.mr.get(), SIZE - 2048, 1024)
                .signaled();
        c.queuePair().postSend(s.sends);
        poll(c.sendCompletionQueue(), s.wcs, 1);
        assertEquals(CompletionStatus.SUCCESS, s.wcs.status(0), s.wcs.statusText(0));
    }

    private static void assertFilled(MemoryRegion mr, byte value) {
        MemorySegment s = mr.segment().asSlice(SIZE - 1024, 1024);
        for (int i = 0; i < 1024; i++) {
            assertEquals(value, s.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
        }
    }

    private static void assertFlushed(RdmaConnection c, Side s, Set<Long> wrIds) {
        poll(c.receiveCompletionQueue(), s.wcs, wrIds.size());
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < wrIds.size(); i++) {
            assertEquals(
                    CompletionStatus.WR_FLUSH_ERR,
                    s.wcs.status(i),
                    "receive " + s.wcs.wrId(i) + ": " + s.wcs.statusText(i));
            assertTrue(seen.add(s.wcs.wrId(i)), "wr_id " + s.wcs.wrId(i) + " completed twice");
        }
        assertEquals(wrIds, seen);
        assertEquals(0, c.receiveCompletionQueue().poll(s.wcs), "no further completion");
    }
}
