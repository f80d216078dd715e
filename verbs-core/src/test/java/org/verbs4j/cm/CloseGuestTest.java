package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.time.Duration;
import java.util.EnumSet;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.QueuePair;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.testing.RdmaTest;

/**
 * Closing in every state, twice, and from another thread during a connect: never connected,
 * resolving, connecting (a listener that does not accept), connected, disconnected, listening,
 * the channel; then the kernel's counts of cm ids, QPs, CQs and MRs are back where they were.
 */
@RdmaTest
class CloseGuestTest {
    @Test
    @SuppressWarnings("try") // the listener is closed twice inside its try-with-resources on purpose
    void closeInEveryStateTwiceAndDuringAConnect() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel ch = CmEventChannel.open()) {
            // never connected
            RdmaConnection idle = RdmaConnection.create(ch, new ConnectionSetup());
            assertEquals(ConnectionState.IDLE, idle.state());
            idle.close();
            idle.close();
            assertEquals(ConnectionState.CLOSED, idle.state());
            assertThrows(ResourceClosedException.class, () -> idle.connect(address(1), null, WAIT));

            int port = CmTestSupport.port();
            try (CmListener silent = CmListener.bind(ch, address(port), 4)) {
                // closed by another thread while resolving / connecting: the connect throws at once
                for (ConnectionState at :
                        new ConnectionState[] {ConnectionState.RESOLVING_ADDRESS, ConnectionState.CONNECTING}) {
                    RdmaConnection c = RdmaConnection.create(ch, new ConnectionSetup());
                    // on a thread of its own: a task of the common pool (one worker on a two-CPU guest)
                    // may wait behind another test's task, and the close would come before the connect
                    CompletableFuture<Throwable> f = CompletableFuture.supplyAsync(
                            () -> {
                                try {
                                    c.connect(address(port), null, Duration.ofSeconds(30));
                                    return null;
                                } catch (Throwable t) {
                                    return t;
                                }
                            },
                            CmTestSupport.ASYNC);
                    long deadline = System.nanoTime() + 20_000_000_000L;
                    while (c.state().ordinal() < at.ordinal() && System.nanoTime() < deadline) {
                        Thread.onSpinWait();
                    }
                    ConnectionState seen = c.state();
                    long t0 = System.nanoTime();
                    c.close();
                    c.close();
                    Throwable t = f.get(10, TimeUnit.SECONDS);
                    System.out.printf(
                            "CloseGuestTest: closed in %s (aiming at %s); the connect returned after %.1f ms: %s%n",
                            seen, at, (System.nanoTime() - t0) / 1e6, t);
                    assertTrue(t instanceof ResourceClosedException, "the connect ended with " + t);
                    assertEquals(ConnectionState.CLOSED, c.state());
                }
                // a request the listener holds is rejected when the listener closes (listening state: close twice)
            }

            // connected, then disconnected, each closed twice; the QP closed by the user first
            int port2 = CmTestSupport.port();
            try (CmListener l = CmListener.bind(ch, address(port2), 4)) {
                CompletableFuture<RdmaConnection> s = CompletableFuture.supplyAsync(
                        () -> l.accept(WAIT).accept(new ConnectionSetup(), null, WAIT), CmTestSupport.ASYNC);
                RdmaConnection a = RdmaConnection.connect(ch, address(port2), new ConnectionSetup(), null, WAIT);
                RdmaConnection b = s.get(30, TimeUnit.SECONDS);
                CompletableFuture<RdmaConnection> s2 = CompletableFuture.supplyAsync(
                        () -> l.accept(WAIT).accept(new ConnectionSetup(), null, WAIT), CmTestSupport.ASYNC);
                RdmaConnection a2 = RdmaConnection.connect(ch, address(port2), new ConnectionSetup(), null, WAIT);
                RdmaConnection b2 = s2.get(30, TimeUnit.SECONDS);
                assertEquals(ConnectionState.CONNECTED, a.state());
                assertEquals(ConnectionState.CONNECTED, a2.state());
                // connected: close at once (it disconnects); the peer sees it; the queue pair the
                // application still holds is closed with it: a post is refused, never a crash
                QueuePair held = a.queuePair();
                a.close();
                a.close();
                assertTrue(!held.isOpen(), "the connection's queue pair closed with it");
                try (org.verbs4j.SendWorkRequests wrs = new org.verbs4j.SendWorkRequests(1, 1)) {
                    wrs.send(1).signaled();
                    assertThrows(ResourceClosedException.class, () -> held.postSend(wrs));
                }
                assertTrue(b.awaitDisconnect(Duration.ofSeconds(10)), "peer of a closed connection: " + b.state());
                b.close();
                b.close();
                // disconnected, and the queue pair closed by the user before the connection
                a2.disconnect();
                a2.disconnect();
                assertEquals(ConnectionState.DISCONNECTED, a2.state());
                QueuePair qp = a2.queuePair();
                qp.close();
                a2.close();
                a2.close();
                assertTrue(b2.awaitDisconnect(Duration.ofSeconds(10)));
                b2.close();
                l.close();
                l.close(); // listening, twice
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts after closing everything");
    }

    @Test
    void aChannelClosesOnlyWhenItsObjectsAreClosedAndThenTwice() {
        CmEventChannel ch = CmEventChannel.open();
        CmListener l = CmListener.bind(ch, address(CmTestSupport.port()), 1);
        assertThrows(org.verbs4j.ResourceBusyException.class, ch::close);
        l.close();
        ch.close();
        ch.close();
        assertThrows(ResourceClosedException.class, () -> RdmaConnection.create(ch, new ConnectionSetup()));
    }

    @Test
    void aPolledChannelIsDrivenByItsWaiters() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.openPolled()) {
            assertTrue(client.fd() >= 0);
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(server, address(port), 4)) {
                CompletableFuture<RdmaConnection> s = CompletableFuture.supplyAsync(
                        () -> l.accept(WAIT).accept(new ConnectionSetup(), null, WAIT), CmTestSupport.ASYNC);
                try (RdmaConnection c =
                                RdmaConnection.connect(client, address(port), new ConnectionSetup(), null, WAIT);
                        RdmaConnection p = s.get(30, TimeUnit.SECONDS)) {
                    assertEquals(ConnectionState.CONNECTED, c.state());
                    p.disconnect();
                    // the client learns of it only by processing its channel
                    long deadline = System.nanoTime() + 10_000_000_000L;
                    while (c.state() == ConnectionState.CONNECTED && System.nanoTime() < deadline) {
                        client.processEvents(Duration.ofMillis(100));
                    }
                    assertEquals(ConnectionState.DISCONNECTED, c.state());
                    assertTrue(EnumSet.of(ConnectionState.DISCONNECTED, ConnectionState.TIMEWAIT_EXITED)
                            .contains(p.state()));
                }
            }
        }
        assertEquals(before, CmTestSupport.leakCounts());
    }
}
