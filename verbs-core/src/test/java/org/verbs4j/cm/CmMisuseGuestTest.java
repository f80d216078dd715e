package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;
import static org.verbs4j.cm.CmTestSupport.bytes;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Misuse of the connection manager on rxe0 through the public API: request handlers that throw
 * Errors or close their own listener and channel, requests answered twice, used after their
 * listener closed or after their peer gave up, a listener closed while requests wait or while an
 * accept waits, and the refusals of {@code ibv_create_qp} and {@code rdma_reject}. The peer always
 * gets a true outcome (REJECTED, not a timeout), every refusal names the verb, what was wrong and a
 * fix, with one "failed", and the kernel's counts of cm ids, QPs, CQs and MRs return to where they
 * were after each case.
 */
@RdmaTest
class CmMisuseGuestTest {
    /** Long enough never to be reached: an outcome that comes as a timeout is the wrong outcome. */
    private static final Duration LONG = Duration.ofSeconds(30);

    private CmEventChannel client;
    private Map<String, Integer> before;

    @BeforeEach
    void open() {
        before = CmTestSupport.leakCounts();
        client = CmEventChannel.open();
    }

    @AfterEach
    void close() {
        client.close();
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts after the case");
    }

    /** Connects from another thread; the future holds the connection or what the connect threw. */
    private CompletableFuture<Object> connectAsync(InetSocketAddress to, Duration bound) {
        return CompletableFuture.supplyAsync(
                () -> {
                    try {
                        return RdmaConnection.connect(client, to, new ConnectionSetup(), null, bound);
                    } catch (Throwable t) {
                        return t;
                    }
                },
                CmTestSupport.ASYNC);
    }

    private static Object outcome(CompletableFuture<Object> f) throws Exception {
        Object o = f.get(LONG.toSeconds() + 30, TimeUnit.SECONDS);
        if (o instanceof RdmaConnection c) {
            c.close();
        }
        return o;
    }

    /** The connect ended REJECTED (the peer's application answered), not by a timeout nor connected. */
    private static ConnectionFailedException assertRejected(Object outcome) {
        ConnectionFailedException e = assertInstanceOf(ConnectionFailedException.class, outcome, "the outcome");
        assertEquals(ConnectionFailedException.Reason.REJECTED, e.reason(), e.getMessage());
        assertClear(e, "rdma_connect");
        return e;
    }

    /** A refusal that helps: the verb, one "failed", a hint; never a raw JDK exception. */
    static VerbsException assertClear(Throwable t, String verb, String... names) {
        VerbsException e = assertInstanceOf(VerbsException.class, t, "a verbs4j exception");
        assertEquals(verb, e.verb(), e.getMessage());
        String m = e.getMessage();
        assertEquals(1, m.split("failed", -1).length - 1, "one level of \"failed\": " + m);
        assertNotNull(e.hint(), "a hint: " + m);
        for (String n : names) {
            assertTrue(m.contains(n), "names " + n + ": " + m);
        }
        return e;
    }

    @Test
    void aRequestHandlerThatThrowsAnErrorRejectsTheRequest() throws Exception {
        int port = CmTestSupport.port();
        try (CmListener l = CmListener.bind(client, address(port), 4)) {
            List<Supplier<Error>> errors =
                    List.of(() -> new AssertionError("a handler's assertion"), StackOverflowError::new);
            for (Supplier<Error> error : errors) {
                l.onRequest(r -> {
                    throw error.get();
                });
                assertRejected(outcome(connectAsync(address(port), LONG)));
            }
            // the channel still dispatches: the next handler's reject reaches the peer, and its accept returns
            l.onRequest(r -> r.reject(bytes("answered after the Errors")));
            ConnectionFailedException e = assertRejected(outcome(connectAsync(address(port), LONG)));
            CmTestSupport.assertPrivateData(bytes("answered after the Errors"), e.peerPrivateData());
            List<Object> accepted = new CopyOnWriteArrayList<>();
            l.onRequest(r -> {
                try {
                    accepted.add(r.accept(new ConnectionSetup(), null, WAIT));
                } catch (Throwable t) {
                    accepted.add(t);
                }
            });
            assertInstanceOf(RdmaConnection.class, outcome(connectAsync(address(port), LONG)), "connected");
            Object a = CmTestSupport.within(() -> accepted.isEmpty() ? null : accepted.get(0), "the handler's accept");
            assertInstanceOf(RdmaConnection.class, a, "the handler's accept after the Errors");
            ((RdmaConnection) a).close();
        }
    }

    @Test
    void aHandlerThatRejectsThenClosesItsListenerAndChannel() throws Exception {
        for (boolean polled : new boolean[] {false, true}) {
            CmEventChannel server = polled ? CmEventChannel.openPolled() : CmEventChannel.open();
            int port = CmTestSupport.port();
            CmListener l = CmListener.bind(server, address(port), 4);
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<Throwable> inHandler = new AtomicReference<>();
            l.onRequest(r -> {
                try {
                    r.reject(bytes("closing down"));
                    l.close();
                    server.close();
                } catch (Throwable t) {
                    inHandler.set(t);
                } finally {
                    done.countDown();
                }
            });
            CompletableFuture<Void> loop = polled
                    ? CompletableFuture.runAsync(
                            () -> {
                                while (server.isOpen()) {
                                    try {
                                        server.processEvents(Duration.ofMillis(100));
                                    } catch (ResourceClosedException e) {
                                        return;
                                    }
                                }
                            },
                            CmTestSupport.ASYNC)
                    : CompletableFuture.<Void>completedFuture(null);
            ConnectionFailedException e = assertRejected(outcome(connectAsync(address(port), LONG)));
            CmTestSupport.assertPrivateData(bytes("closing down"), e.peerPrivateData());
            assertTrue(done.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the handler returned");
            assertEquals(null, inHandler.get(), "the handler's calls");
            loop.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertFalse(server.isOpen(), "the channel was closed by its own handler");
            server.close(); // a second close does nothing
        }
    }

    @Test
    void aHandlerThatClosesItsListenerThenThrowsAnError() throws Exception {
        int port = CmTestSupport.port();
        CmListener l = CmListener.bind(client, address(port), 4);
        l.onRequest(r -> {
            l.close();
            throw new AssertionError("after closing the listener");
        });
        assertRejected(outcome(connectAsync(address(port), LONG)));
        assertTrue(l.toString().contains("closed"), l.toString());
    }

    @Test
    void aListenerClosedRejectsTheRequestsItHandedOut() throws Exception {
        int port = CmTestSupport.port();
        CmListener l = CmListener.bind(client, address(port), 4);
        CompletableFuture<Object> f = connectAsync(address(port), LONG);
        ConnectionRequest r = l.accept(WAIT);
        l.close();
        assertRejected(outcome(f));
        ResourceClosedException a =
                assertThrows(ResourceClosedException.class, () -> r.accept(new ConnectionSetup(), null, WAIT));
        assertClear(a, "rdma_accept", "listener");
        assertClear(assertThrows(ResourceClosedException.class, () -> r.reject(null)), "rdma_reject", "listener");
        r.close(); // nothing left to do
    }

    @Test
    void aListenerClosedRejectsTheRequestsItQueued() throws Exception {
        int port = CmTestSupport.port();
        CmListener l = CmListener.bind(client, address(port), 4);
        CompletableFuture<Object> f = connectAsync(address(port), LONG);
        CmTestSupport.within(() -> l.queued() == 1 ? true : null, "the request's arrival");
        l.close();
        assertRejected(outcome(f));
        assertClear(assertThrows(ResourceClosedException.class, () -> l.accept(WAIT)), "rdma_get_cm_event", "closed");
    }

    @Test
    void aListenerClosedWhileAnAcceptWaitsEndsTheAccept() throws Exception {
        CmListener l = CmListener.bind(client, address(CmTestSupport.port()), 4);
        CountDownLatch waiting = new CountDownLatch(1);
        CompletableFuture<Object> f = CompletableFuture.supplyAsync(
                () -> {
                    waiting.countDown();
                    try {
                        return l.accept(LONG);
                    } catch (Throwable t) {
                        return t;
                    }
                },
                CmTestSupport.ASYNC);
        assertTrue(waiting.await(WAIT.toSeconds(), TimeUnit.SECONDS));
        l.close();
        Object o = f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertClear(assertInstanceOf(ResourceClosedException.class, o), "rdma_get_cm_event", "closed");
    }

    @Test
    void aRequestAnsweredTwiceIsRefusedTheSecondTime() throws Exception {
        int port = CmTestSupport.port();
        try (CmListener l = CmListener.bind(client, address(port), 4)) {
            CompletableFuture<Object> f = connectAsync(address(port), LONG);
            ConnectionRequest r = l.accept(WAIT);
            r.reject(bytes("no"));
            assertRejected(outcome(f));
            assertClear(
                    assertThrows(ResourceClosedException.class, () -> r.reject(null)),
                    "rdma_reject",
                    "already rejected");
            assertClear(
                    assertThrows(ResourceClosedException.class, () -> r.accept(new ConnectionSetup(), null, WAIT)),
                    "rdma_accept",
                    "already rejected");
            r.close();

            CompletableFuture<Object> g = connectAsync(address(port), LONG);
            ConnectionRequest r2 = l.accept(WAIT);
            try (RdmaConnection c = r2.accept(new ConnectionSetup(), null, WAIT)) {
                assertEquals(ConnectionState.CONNECTED, c.state());
                assertClear(
                        assertThrows(ResourceClosedException.class, () -> r2.reject(null)),
                        "rdma_reject",
                        "already accepted");
                assertInstanceOf(RdmaConnection.class, outcome(g));
            }
        }
    }

    /**
     * The peer's connect ended (its bound) while the request was unanswered: rxe's connection
     * manager does not tell the listener's side, so the accept is what finds out; it ends with a
     * clear exception within its bound, and the request's one answer is spent.
     */
    @Test
    void anAnswerAfterThePeerGaveUpFailsClearly() throws Exception {
        int port = CmTestSupport.port();
        try (CmListener l = CmListener.bind(client, address(port), 4)) {
            CompletableFuture<Object> f = connectAsync(address(port), Duration.ofSeconds(5));
            ConnectionRequest r = l.accept(WAIT);
            assertInstanceOf(VerbsTimeoutException.class, outcome(f), "the peer's own bound ended its connect");
            VerbsException e = assertThrows(
                    VerbsException.class, () -> r.accept(new ConnectionSetup(), null, Duration.ofSeconds(10)));
            assertClear(e, e.verb());
            assertClear(
                    assertThrows(ResourceClosedException.class, () -> r.reject(null)), "rdma_reject", "was already");
        }
    }

    @Test
    void aRequestTimeoutThatIsNotPositiveIsRefused() {
        try (CmListener l = CmListener.bind(client, address(CmTestSupport.port()), 4)) {
            for (Duration d : new Duration[] {Duration.ZERO, Duration.ofSeconds(-1), null}) {
                assertClear(
                        assertThrows(InvalidRequestException.class, () -> l.requestTimeout(d)),
                        "CmListener.requestTimeout",
                        "positive");
            }
            assertEquals(CmListener.DEFAULT_REQUEST_TIMEOUT, l.requestTimeout(), "unchanged by the refusals");
        }
    }

    @Test
    void aClosedListenerIsNeverAskedForItsDevice() {
        CmListener l = CmListener.bind(client, address(CmTestSupport.port()), 4);
        assertNotNull(l.context(), "bound to rxe0's address");
        l.close();
        assertClear(assertThrows(ResourceClosedException.class, l::context), "CmListener.context", "closed");
    }

    @Test
    void createQpRefusalsNameTheSettingAndTheLimit() throws Exception {
        InetSocketAddress nobody = address(CmTestSupport.port()); // the QP is created before anybody is asked
        VerbsException wr = assertThrows(
                InvalidRequestException.class,
                () -> RdmaConnection.connect(client, nobody, new ConnectionSetup().maxSendWr(1 << 30), null, WAIT));
        assertClear(wr, "ibv_create_qp", "maxSendWr", "at most");
        VerbsException inline = assertThrows(
                InvalidRequestException.class,
                () -> RdmaConnection.connect(client, nobody, new ConnectionSetup().maxInlineData(1 << 20), null, WAIT));
        assertEquals(Errno.EINVAL, inline.errno());
        assertClear(inline, "ibv_create_qp", "maxInlineData");

        // the passive side: the handler's accept is refused the same way, and the peer is rejected
        int port = CmTestSupport.port();
        AtomicReference<Throwable> refused = new AtomicReference<>();
        try (CmListener l = CmListener.bind(client, address(port), 4)) {
            l.onRequest(r -> {
                try {
                    r.accept(new ConnectionSetup().maxInlineData(1 << 20), null, WAIT);
                } catch (Throwable t) {
                    refused.set(t);
                }
            });
            Object o = outcome(connectAsync(address(port), LONG));
            assertInstanceOf(ConnectionFailedException.class, o, "the peer's outcome");
            assertClear(refused.get(), "ibv_create_qp", "maxInlineData");
        }
    }

    @Test
    void anAddressErrorSaysFailedOnce() throws Exception {
        InetSocketAddress unroutable = new InetSocketAddress(InetAddress.getByName("192.0.2.1"), 7471);
        ConnectionFailedException e = assertThrows(
                ConnectionFailedException.class,
                () -> RdmaConnection.connect(
                        client,
                        unroutable,
                        new ConnectionSetup().addressTimeout(Duration.ofSeconds(3)),
                        null,
                        Duration.ofSeconds(8)));
        assertEquals(ConnectionFailedException.Reason.ADDRESS_ERROR, e.reason(), e.getMessage());
        assertClear(e, "rdma_connect", "192.0.2.1");
    }

    /** A request handler that keeps a request unanswered: the request stays the application's. */
    @Test
    void anUnansweredRequestIsAnsweredByItsListenersClose() throws Exception {
        int port = CmTestSupport.port();
        CmListener l = CmListener.bind(client, address(port), 4);
        List<ConnectionRequest> kept = new CopyOnWriteArrayList<>();
        l.onRequest(kept::add);
        CompletableFuture<Object> f = connectAsync(address(port), LONG);
        ConnectionRequest r = CmTestSupport.within(() -> kept.isEmpty() ? null : kept.get(0), "the request's arrival");
        l.close();
        assertRejected(outcome(f));
        assertClear(
                assertThrows(ResourceClosedException.class, () -> r.accept(new ConnectionSetup(), null, WAIT)),
                "rdma_accept",
                "listener");
    }
}
