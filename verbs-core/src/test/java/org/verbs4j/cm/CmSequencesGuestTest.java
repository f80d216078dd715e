package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;
import static org.verbs4j.cm.CmTestSupport.bytes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.engine.SourceOfRandomness;
import org.junit.jupiter.api.Test;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.testing.RdmaTest;

/**
 * Random interleavings of the connection manager's API on rxe0: listeners that accept, reject,
 * throw an Error, reject and close themselves, or queue their requests (then accepted or rejected
 * from the test thread); connects to them (some closed from another thread while they connect),
 * listener closes, disconnects and closes of established connections. Each connect must end as
 * the listener's behaviour says (connected, REJECTED, NO_LISTENER for a closed listener; never a
 * timeout), and after each sequence the channels close and the kernel's counts of cm ids, QPs, CQs
 * and MRs are back where they were. The sequences come from jqwik generators with a fixed seed
 * (the guest tier runs JUnit Jupiter), so a failure reproduces.
 */
@RdmaTest
class CmSequencesGuestTest {
    private static final long SEED = 20261206L;
    private static final int SEQUENCES = 6;
    private static final Duration LONG = Duration.ofSeconds(30);

    enum Mode {
        ACCEPT,
        REJECT,
        THROW_ERROR,
        REJECT_AND_CLOSE,
        QUEUE
    }

    enum Kind {
        LISTEN,
        CONNECT,
        CONNECT_AND_CLOSE,
        CLOSE_LISTENER,
        DISCONNECT,
        CLOSE_CONNECTION
    }

    record Op(Kind kind, Mode mode, int target, boolean yes) {}

    static Arbitrary<List<Op>> sequences() {
        Arbitrary<Op> op = Combinators.combine(
                        Arbitraries.of(Kind.class),
                        Arbitraries.of(Mode.class),
                        Arbitraries.integers().between(0, 7),
                        Arbitraries.of(true, false))
                .as(Op::new);
        return op.list().ofMinSize(4).ofMaxSize(8);
    }

    /** A listener of the sequence and what it does with a request. */
    static final class Listener {
        final CmListener l;
        final Mode mode;
        final int port;
        final CountDownLatch closedByHandler = new CountDownLatch(1);
        boolean open = true;

        Listener(CmListener l, Mode mode, int port) {
            this.l = l;
            this.mode = mode;
            this.port = port;
        }
    }

    /** An established connection: both ends. */
    record Pair(RdmaConnection client, RdmaConnection server) {}

    @Test
    void randomInterleavingsEndTrueAndReleaseEverything() throws Exception {
        SourceOfRandomness.create(String.valueOf(SEED)); // this thread's jqwik random: the same sequences each run
        List<List<Op>> all = sequences().sampleStream().limit(SEQUENCES).toList();
        for (int i = 0; i < all.size(); i++) {
            List<Op> ops = all.get(i);
            long t0 = System.nanoTime();
            run(ops);
            System.out.printf(
                    "CmSequencesGuestTest: sequence %d (%d ops) in %d ms: %s%n",
                    i, ops.size(), (System.nanoTime() - t0) / 1_000_000, ops);
        }
    }

    private static void run(List<Op> ops) throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        CmEventChannel server = CmEventChannel.open();
        CmEventChannel client = CmEventChannel.open();
        List<Listener> listeners = new ArrayList<>();
        List<Pair> pairs = new ArrayList<>();
        List<RdmaConnection> accepted = new CopyOnWriteArrayList<>();
        try {
            for (Op op : ops) {
                switch (op.kind()) {
                    case LISTEN -> listeners.add(listen(server, op.mode(), accepted));
                    case CONNECT, CONNECT_AND_CLOSE -> {
                        Listener t = listeners.isEmpty() ? null : listeners.get(op.target() % listeners.size());
                        connect(client, t, op, pairs, accepted);
                    }
                    case CLOSE_LISTENER -> {
                        if (!listeners.isEmpty()) {
                            Listener t = listeners.get(op.target() % listeners.size());
                            t.l.close();
                            t.open = false;
                        }
                    }
                    case DISCONNECT -> {
                        if (!pairs.isEmpty()) {
                            Pair p = pairs.remove(op.target() % pairs.size());
                            RdmaConnection from = op.yes() ? p.client() : p.server();
                            RdmaConnection to = op.yes() ? p.server() : p.client();
                            from.disconnect();
                            assertTrue(to.awaitDisconnect(WAIT), "the peer saw the disconnect: " + to);
                            from.close();
                            to.close();
                        }
                    }
                    case CLOSE_CONNECTION -> {
                        if (!pairs.isEmpty()) {
                            Pair p = pairs.remove(op.target() % pairs.size());
                            (op.yes() ? p.client() : p.server()).close();
                            RdmaConnection other = op.yes() ? p.server() : p.client();
                            assertTrue(other.awaitDisconnect(WAIT), "the peer saw the close: " + other);
                            other.close();
                        }
                    }
                }
            }
        } finally {
            for (Pair p : pairs) {
                p.client().close();
                p.server().close();
            }
            for (Listener t : listeners) {
                t.l.close();
            }
            client.close();
            // a handler may still be accepting for a connect closed meanwhile: it ends once the peer's
            // reject arrives, and the channel closes once every connection it accepted is closed
            CmTestSupport.within(
                    () -> {
                        for (RdmaConnection c : accepted) {
                            c.close();
                        }
                        try {
                            server.close();
                            return true;
                        } catch (ResourceBusyException e) {
                            return null;
                        }
                    },
                    "the server channel's close");
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts after " + ops);
    }

    private static Listener listen(CmEventChannel server, Mode mode, List<RdmaConnection> accepted) {
        int port = CmTestSupport.port();
        Listener t = new Listener(CmListener.bind(server, address(port), 8), mode, port);
        switch (mode) {
            case ACCEPT -> t.l.onRequest(r -> accepted.add(r.accept(new ConnectionSetup(), null, WAIT)));
            case REJECT -> t.l.onRequest(r -> r.reject(bytes("no")));
            case THROW_ERROR ->
                t.l.onRequest(r -> {
                    throw new AssertionError("a request handler's Error");
                });
            case REJECT_AND_CLOSE ->
                t.l.onRequest(r -> {
                    r.reject(bytes("closing"));
                    t.l.close();
                    t.closedByHandler.countDown();
                });
            case QUEUE -> {}
        }
        return t;
    }

    private static void connect(
            CmEventChannel client, Listener t, Op op, List<Pair> pairs, List<RdmaConnection> accepted)
            throws Exception {
        RdmaConnection c = RdmaConnection.create(client, new ConnectionSetup());
        CompletableFuture<Throwable> f = CompletableFuture.supplyAsync(
                () -> {
                    try {
                        c.connect(address(t == null ? CmTestSupport.port() : t.port), null, LONG);
                        return null;
                    } catch (Throwable x) {
                        return x;
                    }
                },
                CmTestSupport.ASYNC);
        // a queued request is answered from this thread: a connect closed meanwhile would leave it behind
        boolean racing = op.kind() == Kind.CONNECT_AND_CLOSE && (t == null || t.mode != Mode.QUEUE);
        if (racing) {
            c.close(); // from this thread, while the connect runs on another
        }
        RdmaConnection queuedServer = null;
        if (t != null && t.open && t.mode == Mode.QUEUE && !racing) {
            ConnectionRequest r = t.l.accept(WAIT);
            if (op.yes()) {
                queuedServer = r.accept(new ConnectionSetup(), null, WAIT);
            } else {
                r.reject(bytes("no"));
            }
        }
        Throwable x = f.get(LONG.toSeconds() + 30, TimeUnit.SECONDS);
        if (racing) {
            // closed meanwhile: the connect says so, or it had finished (then the close ended it)
            if (x != null && !(x instanceof ResourceClosedException) && !(x instanceof ConnectionFailedException)) {
                fail("a connect closed from another thread ended with " + x, x);
            }
            assertEquals(ConnectionState.CLOSED, c.state());
            return;
        }
        Mode expected =
                t == null || !t.open ? null : t.mode == Mode.QUEUE ? (op.yes() ? Mode.ACCEPT : Mode.REJECT) : t.mode;
        if (expected == Mode.ACCEPT) {
            if (x != null) {
                fail("the connect to an accepting listener ended with " + x, x);
            }
            assertEquals(ConnectionState.CONNECTED, c.state());
            RdmaConnection s = queuedServer;
            if (s == null) { // the handler's: the one whose peer is this connection
                int port = c.localAddress().getPort();
                s = CmTestSupport.within(
                        () -> accepted.stream()
                                .filter(a -> a.peerAddress() != null
                                        && a.peerAddress().getPort() == port)
                                .findFirst()
                                .orElse(null),
                        "the accepted end");
                accepted.remove(s);
            }
            pairs.add(new Pair(c, s));
            return;
        }
        c.close();
        ConnectionFailedException e = assertInstanceOf(ConnectionFailedException.class, x, "the connect's outcome");
        ConnectionFailedException.Reason want = expected == null
                ? ConnectionFailedException.Reason.NO_LISTENER
                : ConnectionFailedException.Reason.REJECTED;
        assertEquals(want, e.reason(), e.getMessage());
        if (expected == Mode.REJECT_AND_CLOSE) {
            assertTrue(t.closedByHandler.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the handler closed its listener");
            t.open = false;
        }
    }
}
