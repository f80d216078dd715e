package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.VerbsException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.testing.RdmaTest;

/**
 * The asynchronous connect and accept: one thread starts many connects and the listener accepts
 * each from its event thread; a future that gets no answer completes with the timeout exception,
 * never before its bound; a cancelled future releases its cm id and queue pair; hundreds of
 * blocking connects from virtual threads on one polled channel all get a result. The kernel's
 * counts ({@code rdma res}) are back to where they were after each.
 */
@RdmaTest
class AsyncSetupGuestTest {
    /** Connects started at once from the test thread. */
    private static final int MANY = 64;

    private static ConnectionSetup small() {
        return new ConnectionSetup()
                .maxSendWr(1)
                .maxRecvWr(1)
                .maxSendSge(1)
                .maxRecvSge(1)
                .maxInlineData(0);
    }

    private static Throwable cause(CompletableFuture<?> f) throws InterruptedException {
        try {
            f.get(2 * WAIT.toSeconds() + 60, TimeUnit.SECONDS);
            throw new AssertionError("the future succeeded; a failure was expected");
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("the future did not complete", e);
        }
    }

    private static void assertBackTo(Map<String, Integer> before) {
        CmTestSupport.within(
                () -> before.equals(CmTestSupport.leakCounts()) ? Boolean.TRUE : null,
                "counts back to " + before + " (now " + CmTestSupport.leakCounts() + ")");
    }

    @Test
    void oneThreadDrivesManyConnectsAndTheListenerAcceptsAsynchronously() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        ConcurrentLinkedQueue<CompletableFuture<RdmaConnection>> accepted = new ConcurrentLinkedQueue<>();
        List<RdmaConnection> all = new ArrayList<>();
        try (CmEventChannel ch = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(ch, address(port), MANY)) {
                l.onRequest(r -> accepted.add(r.acceptAsync(small(), null, WAIT.multipliedBy(3))));
                List<CompletableFuture<RdmaConnection>> fs = new ArrayList<>();
                for (int i = 0; i < MANY; i++) {
                    fs.add(RdmaConnection.connectAsync(ch, address(port), small(), null, WAIT.multipliedBy(3)));
                }
                for (CompletableFuture<RdmaConnection> f : fs) {
                    RdmaConnection c = f.get(WAIT.toSeconds() * 6, TimeUnit.SECONDS);
                    all.add(c);
                    assertEquals(ConnectionState.CONNECTED, c.state(), c.toString());
                    assertNotNull(c.queuePair());
                }
                assertEquals(MANY, accepted.size(), "requests accepted");
                for (CompletableFuture<RdmaConnection> f : accepted) {
                    RdmaConnection c = f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    all.add(c);
                    assertTrue(c.state() == ConnectionState.CONNECTED, c.toString());
                }
            } finally {
                for (RdmaConnection c : all) {
                    c.close();
                }
            }
            assertBackTo(before);
        }
    }

    @Test
    void unansweredConnectsTimeOutWithTheirBoundAndReleaseEverything() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        Duration bound = Duration.ofSeconds(2);
        int n = 16;
        try (CmEventChannel ch = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(ch, address(port), 4 * n)) { // never accepts
                assertEquals(port, l.localAddress().getPort());
                List<CompletableFuture<RdmaConnection>> fs = new ArrayList<>();
                List<Long> done = new java.util.concurrent.CopyOnWriteArrayList<>();
                long t0 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    CompletableFuture<RdmaConnection> f =
                            RdmaConnection.connectAsync(ch, address(port), small(), null, bound);
                    f.whenComplete((c, x) -> done.add(System.nanoTime()));
                    fs.add(f);
                }
                for (CompletableFuture<RdmaConnection> f : fs) {
                    Throwable x = cause(f);
                    VerbsTimeoutException t = assertInstanceOf(VerbsTimeoutException.class, x, String.valueOf(x));
                    assertTrue(t.getMessage().contains("within the timeout"), t.getMessage());
                }
                for (long d : done) {
                    assertTrue(d - t0 >= bound.toNanos(), "a future completed before its bound");
                }
            }
            assertBackTo(before); // a request still being dispatched at the listener's close is released after it
        }
    }

    @Test
    void cancellingAConnectReleasesItsIdAndQueuePair() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel ch = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(ch, address(port), 4)) { // takes the request, never answers
                CompletableFuture<RdmaConnection> f =
                        RdmaConnection.connectAsync(ch, address(port), small(), null, WAIT.multipliedBy(3));
                try (ConnectionRequest r = l.accept(WAIT)) { // the connect is waiting for the answer now
                    assertNotNull(r);
                    Map<String, Integer> waiting = CmTestSupport.leakCounts();
                    assertEquals(before.get("qp") + 1, waiting.get("qp"), "the connecting side's queue pair");
                    assertTrue(f.cancel(true), "cancel of a connect in progress");
                    assertTrue(f.isCancelled());
                    Map<String, Integer> after = CmTestSupport.leakCounts(); // released before cancel returned
                    assertEquals(before.get("qp"), after.get("qp"), "queue pair released by the cancel");
                    assertTrue(
                            after.get("cm_id") <= waiting.get("cm_id") - 1,
                            "cm id released by the cancel: " + waiting + " -> " + after);
                    assertThrows(CancellationException.class, () -> f.get(WAIT.toSeconds(), TimeUnit.SECONDS));
                }
            }
            assertBackTo(before);
        }
    }

    @Test
    void hundredsOfVirtualThreadsOnAPolledChannelAllGetAResult() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        int n = 256;
        Duration bound = Duration.ofSeconds(3);
        ConcurrentLinkedQueue<Object> results = new ConcurrentLinkedQueue<>();
        try (CmEventChannel listening = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(listening, address(port), 4 * n); // never accepts
                    CmEventChannel polled = CmEventChannel.openPolled()) {
                assertEquals(port, l.localAddress().getPort());
                try (ExecutorService vt = Executors.newVirtualThreadPerTaskExecutor()) {
                    for (int i = 0; i < n; i++) {
                        vt.execute(() -> {
                            try (RdmaConnection c =
                                    RdmaConnection.connect(polled, address(port), small(), null, bound)) {
                                results.add(c);
                            } catch (RuntimeException e) {
                                results.add(e);
                            }
                        });
                    }
                    vt.shutdown();
                    assertTrue(
                            vt.awaitTermination(WAIT.toSeconds() * 6, TimeUnit.SECONDS),
                            "only " + results.size() + " of " + n + " connects returned");
                }
            }
            assertBackTo(before);
        }
        assertEquals(n, results.size());
        for (Object r : results) {
            VerbsException e = assertInstanceOf(VerbsException.class, r, String.valueOf(r));
            assertTrue(
                    e instanceof VerbsTimeoutException || e instanceof ConnectionFailedException,
                    "a timeout or a failure naming the verb: " + e);
        }
    }
}
