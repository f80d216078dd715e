package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.internal.CoreAccess;
import org.verbs4j.testing.RdmaTest;

/**
 * Leaks are found, not hidden: a listener, a connected pair, an unanswered request and an event
 * channel dropped without close() are each reported by the cleaner and their native resources
 * released (the port is free again, the peer's connect is rejected, the kernel's counts are back,
 * the event thread has stopped). And the channel's close is bounded: a callback that does not
 * return makes it fail with EBUSY after its bound, and a later close finishes.
 */
@RdmaTest
class LeaksAndBoundsGuestTest {

    private static long leaks() {
        return CoreAccess.get().leaksReported();
    }

    /** Collects garbage until {@code done} (at most 30 s); {@code done} is asked once more only while false. */
    private static boolean gcUntil(BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        boolean ok;
        while (!(ok = done.getAsBoolean()) && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(50);
        }
        return ok;
    }

    private static String threads() {
        StringBuilder b = new StringBuilder();
        Thread.getAllStackTraces().forEach((t, st) -> {
            b.append(t.getName()).append(' ').append(t.getState()).append('\n');
            for (StackTraceElement e : st) {
                b.append("    ").append(e).append('\n');
            }
        });
        return b.toString();
    }

    private static void dropListener(CmEventChannel ch, int port) {
        CmListener.bind(ch, address(port), 4); // never closed
    }

    private static void dropConnectedPair(CmEventChannel ch, int port) throws Exception {
        try (CmListener l = CmListener.bind(ch, address(port), 4)) {
            CompletableFuture<RdmaConnection> s =
                    CompletableFuture.supplyAsync(() -> l.accept(WAIT).accept(new ConnectionSetup(), null, WAIT));
            RdmaConnection a = RdmaConnection.connect(ch, address(port), new ConnectionSetup(), null, WAIT);
            RdmaConnection b = s.get(30, TimeUnit.SECONDS);
            assertEquals(ConnectionState.CONNECTED, a.state());
            assertEquals(ConnectionState.CONNECTED, b.state());
        } // both connections dropped unclosed
    }

    @Test
    void droppedListenerConnectionsAndRequestAreReportedAndReleased() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel ch = CmEventChannel.open()) {
            // a listener: reported, its id destroyed, so the port can be bound again
            int port = CmTestSupport.port();
            long l0 = leaks();
            dropListener(ch, port);
            assertTrue(gcUntil(() -> leaks() >= l0 + 1), "the dropped listener was reported");
            // the warning comes first, then the release: the port is free once the id is destroyed
            CmListener[] again = new CmListener[1];
            assertTrue(
                    gcUntil(() -> {
                        try {
                            again[0] = CmListener.bind(ch, address(port), 4);
                            return true;
                        } catch (org.verbs4j.VerbsException e) {
                            return false; // EADDRINUSE until the cleaner destroyed the leaked id
                        }
                    }),
                    () -> "the port can be bound again; threads:\n" + threads());
            assertEquals(port, again[0].localAddress().getPort());
            again[0].close();

            // a connected pair: each connection reported, (and its QP and CQs by their own cleaners)
            long l1 = leaks();
            dropConnectedPair(ch, CmTestSupport.port());
            // 2 connections, 2 QPs, 4 CQs
            assertTrue(
                    gcUntil(() ->
                            leaks() >= l1 + 2 && CmTestSupport.leakCounts().equals(before)),
                    "reported " + (leaks() - l1) + "; counts " + CmTestSupport.leakCounts() + " vs " + before);

            // a request a handler ignored: reported and rejected, so the peer's connect is refused
            int port3 = CmTestSupport.port();
            try (CmListener l = CmListener.bind(ch, address(port3), 4)) {
                CountDownLatch seen = new CountDownLatch(1);
                l.onRequest(r -> seen.countDown()); // neither accepts nor rejects
                long l2 = leaks();
                CompletableFuture<Throwable> connect = CompletableFuture.supplyAsync(() -> {
                    try {
                        RdmaConnection.connect(ch, address(port3), new ConnectionSetup(), null, Duration.ofSeconds(60))
                                .close();
                        return null;
                    } catch (Throwable t) {
                        return t;
                    }
                });
                assertTrue(seen.await(30, TimeUnit.SECONDS), "the request came");
                assertTrue(gcUntil(connect::isDone), "the connect ended");
                Throwable t = connect.get();
                assertTrue(
                        t instanceof ConnectionFailedException f
                                && f.reason() == ConnectionFailedException.Reason.REJECTED,
                        "the connect was rejected by the cleaner: " + t);
                assertTrue(leaks() >= l2 + 1, "the request was reported");
            }
        }
        assertTrue(
                gcUntil(() -> CmTestSupport.leakCounts().equals(before)),
                "counts back: " + CmTestSupport.leakCounts() + " vs " + before);
    }

    private static int dropChannel() {
        CmEventChannel ch = CmEventChannel.open(); // never closed
        return ch.fd();
    }

    private static boolean eventThreadAlive(int fd) {
        return Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().equals("verbs4j-cm-events-" + fd) && t.isAlive());
    }

    /** Whether {@code fd} is (still) an open librdmacm channel, {@code /dev/infiniband/rdma_cm}. */
    private static boolean isRdmaCm(int fd) {
        try {
            return java.nio.file.Files.readSymbolicLink(java.nio.file.Path.of("/proc/self/fd/" + fd))
                    .toString()
                    .contains("rdma_cm");
        } catch (java.io.IOException e) {
            return false; // closed
        }
    }

    @Test
    void aDroppedChannelIsReportedItsThreadStopsAndItsFdIsClosed() throws Exception {
        long l0 = leaks();
        int fd = dropChannel();
        assertTrue(eventThreadAlive(fd));
        assertTrue(isRdmaCm(fd), "the channel's fd is /dev/infiniband/rdma_cm");
        assertTrue(
                gcUntil(() -> leaks() >= l0 + 1 && !eventThreadAlive(fd) && !isRdmaCm(fd)),
                "reported " + (leaks() - l0) + ", thread alive " + eventThreadAlive(fd));
    }

    @Test
    void closeIsBoundedWhileACallbackDoesNotReturn() throws Exception {
        CmEventChannel ch = CmEventChannel.open();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        int port = CmTestSupport.port();
        try (CmEventChannel client = CmEventChannel.open()) {
            CmListener l = CmListener.bind(ch, address(port), 4);
            l.onRequest(r -> {
                r.reject(null);
                entered.countDown();
                try {
                    release.await(); // a callback that does not return (until the test lets it)
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            CompletableFuture<Throwable> connect = CompletableFuture.supplyAsync(() -> {
                try {
                    RdmaConnection.connect(client, address(port), new ConnectionSetup(), null, WAIT)
                            .close();
                    return null;
                } catch (Throwable t) {
                    return t;
                }
            });
            assertTrue(entered.await(30, TimeUnit.SECONDS), "the callback runs");
            l.close();
            Duration bound = Duration.ofSeconds(2);
            long t0 = System.nanoTime();
            CompletableFuture<Throwable> closing = CompletableFuture.supplyAsync(() -> {
                try {
                    ch.close(bound);
                    return null;
                } catch (Throwable t) {
                    return t;
                }
            });
            Throwable t = closing.get(20, TimeUnit.SECONDS);
            double ms = (System.nanoTime() - t0) / 1e6;
            System.out.printf(
                    "LeaksAndBoundsGuestTest: close with a callback stuck returned after %.1f ms: %s%n", ms, t);
            assertTrue(t instanceof ResourceBusyException, "close failed with EBUSY: " + t);
            assertTrue(t.getMessage().contains("a callback of this channel has not returned"), t.getMessage());
            assertTrue(ms >= 1900 && ms < 10_000, "within the bound: " + ms + " ms");
            assertFalse(ch.isOpen());
            assertThrows(ResourceClosedException.class, () -> CmListener.bind(ch, address(CmTestSupport.port()), 4));
            release.countDown();
            long t1 = System.nanoTime();
            ch.close(Duration.ofSeconds(20)); // finishes once the callback returned
            ch.close(); // a second close does nothing
            Throwable c = connect.get(30, TimeUnit.SECONDS);
            System.out.printf(
                    "LeaksAndBoundsGuestTest: the second close returned after %.1f ms; the connect ended with %s%n",
                    (System.nanoTime() - t1) / 1e6, c);
            assertTrue(c instanceof ConnectionFailedException, "the connect was rejected: " + c);
        } finally {
            release.countDown();
        }
    }
}
