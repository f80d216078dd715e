package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.address;
import static org.verbs4j.cm.CmTestSupport.bytes;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.VerbsException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Every way a connect fails is bounded by its timeout and reported as itself, on rxe0 through the
 * public API: no listener on the port, a listener that rejects (the client gets its private data),
 * a listener that never accepts, an address nobody has, an address with no route, a port already
 * in use, a name that does not resolve. Each prints how long it took to fail.
 */
@RdmaTest
class FailureModesGuestTest {
    private static CmEventChannel channel;
    private static Map<String, Integer> before;

    @BeforeAll
    static void open() {
        before = CmTestSupport.leakCounts();
        channel = CmEventChannel.open();
    }

    @AfterAll
    static void close() {
        channel.close();
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts after the failures");
    }

    private static long report(String what, long t0) {
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("FailureModesGuestTest: %s reported after %d ms%n", what, ms);
        return ms;
    }

    @Test
    void noListenerOnThePort() {
        long t0 = System.nanoTime();
        ConnectionFailedException e = assertThrows(
                ConnectionFailedException.class,
                () -> RdmaConnection.connect(
                        channel, address(CmTestSupport.port()), new ConnectionSetup(), null, Duration.ofSeconds(20)));
        long ms = report("no listener (" + e.getMessage() + ")", t0);
        assertEquals(ConnectionFailedException.Reason.NO_LISTENER, e.reason(), e.getMessage());
        assertEquals(CmEventType.REJECTED, e.event().type());
        assertEquals("RDMA_CM_EVENT_REJECTED", e.event().name());
        assertEquals(8, e.status(), "IB CM reject reason: invalid service ID");
        assertEquals(Errno.ECONNREFUSED, e.errno());
        assertTrue(ms < 20_000, "bounded by the timeout");
    }

    @Test
    void aListenerThatRejectsSendsItsPrivateData() {
        int port = CmTestSupport.port();
        try (CmListener l = CmListener.bind(channel, address(port), 4)) {
            l.onRequest(r -> r.reject(bytes("go away: full")));
            long t0 = System.nanoTime();
            ConnectionFailedException e = assertThrows(
                    ConnectionFailedException.class,
                    () -> RdmaConnection.connect(
                            channel, address(port), new ConnectionSetup(), bytes("may I?"), Duration.ofSeconds(20)));
            report("rejected (" + e.getMessage() + ")", t0);
            assertEquals(ConnectionFailedException.Reason.REJECTED, e.reason(), e.getMessage());
            assertEquals(28, e.status(), "IB CM reject reason: consumer defined");
            CmTestSupport.assertPrivateData(bytes("go away: full"), e.peerPrivateData());
        }
    }

    @Test
    void aListenerThatNeverAcceptsTimesOutAtTheBound() {
        int port = CmTestSupport.port();
        try (CmListener l = CmListener.bind(channel, address(port), 4)) {
            long t0 = System.nanoTime();
            VerbsTimeoutException e = assertThrows(
                    VerbsTimeoutException.class,
                    () -> RdmaConnection.connect(
                            channel, address(port), new ConnectionSetup(), null, Duration.ofSeconds(3)));
            long ms = report("never accepted (" + e.getMessage() + ")", t0);
            assertEquals("rdma_connect", e.verb());
            assertEquals(port, l.localAddress().getPort());
            assertTrue(ms >= 2_900 && ms < 6_000, "the 3 s bound, not more: " + ms + " ms");
            // the request that waited is turned away when the listener closes
        }
    }

    @Test
    void anAddressNobodyHas() throws Exception {
        // on the guest's /24 (dummy0 resolves every neighbour at once), nobody answers the request:
        // the IB CM would retry for about a minute; the caller's bound ends it, naming the state
        InetSocketAddress nobody = new InetSocketAddress(InetAddress.getByName("10.0.0.99"), CmTestSupport.port());
        long t0 = System.nanoTime();
        VerbsTimeoutException e = assertThrows(
                VerbsTimeoutException.class,
                () -> RdmaConnection.connect(channel, nobody, new ConnectionSetup(), null, Duration.ofSeconds(3)));
        long ms = report("an address nobody has (" + e.getMessage() + ")", t0);
        assertTrue(e.getMessage().contains("state CONNECTING"), e.getMessage());
        assertTrue(ms >= 2_900 && ms < 6_000, "the 3 s bound: " + ms);
    }

    @Test
    void anAddressWithNoRouteIsAnAddressError() throws Exception {
        InetSocketAddress unroutable = new InetSocketAddress(InetAddress.getByName("192.0.2.1"), 7471);
        long t0 = System.nanoTime();
        ConnectionFailedException e = assertThrows(
                ConnectionFailedException.class,
                () -> RdmaConnection.connect(
                        channel,
                        unroutable,
                        new ConnectionSetup().addressTimeout(Duration.ofSeconds(3)),
                        null,
                        Duration.ofSeconds(8)));
        long ms = report("no route (" + e.getMessage() + ")", t0);
        assertEquals(ConnectionFailedException.Reason.ADDRESS_ERROR, e.reason(), e.getMessage());
        assertTrue(ms < 9_000, "bounded: " + ms);
    }

    @Test
    void aPortAlreadyInUse() {
        int port = CmTestSupport.port();
        try (CmListener first = CmListener.bind(channel, address(port), 4)) {
            VerbsException e = assertThrows(VerbsException.class, () -> CmListener.bind(channel, address(port), 4));
            System.out.println("FailureModesGuestTest: port in use: " + e.getMessage());
            assertEquals("rdma_bind_addr", e.verb());
            assertEquals(Errno.EADDRINUSE, e.errno());
            assertEquals(port, first.localAddress().getPort());
        }
    }

    @Test
    void aNameThatDoesNotResolve() {
        long t0 = System.nanoTime();
        VerbsException e = assertThrows(
                VerbsException.class,
                () -> RdmaConnection.connect(
                        channel, "no-such-host.invalid", 7471, new ConnectionSetup(), null, Duration.ofSeconds(5)));
        report("unresolvable name (" + e.getMessage() + ")", t0);
        assertEquals("rdma_getaddrinfo", e.verb());
        assertEquals(
                address(7471),
                RdmaAddresses.resolve(CmTestSupport.ip().getHostAddress(), 7471).get(0),
                "a numeric address resolves");
    }
}
