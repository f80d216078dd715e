package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.verbs4j.cm.CmTestSupport.address;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.PeerJvm;
import org.verbs4j.testing.RdmaTest;

/**
 * Many connections held open at once by one process pair on rxe0 (opt-in: the configuration
 * parameter {@code verbs4j.cmPairConnections}, e.g. 1000, or several runs: {@code 100,1000}; the
 * guest tier passes it as {@code --config=verbs4j.cmPairConnections=1000}): a server JVM ({@link PairConnectionsPeer}) accepts
 * each request asynchronously, this JVM connects through {@link RdmaConnection#connectAsync} from
 * one thread, {@link #WINDOW} connects in flight at a time. Each connection carries a message both
 * ways (distinct per connection: the server checks each greeting is a client's, once; this side
 * that each answer is to its own greeting); {@code rdma res} shows all of them open at once; then
 * this side closes them all and the server sees each disconnect and closes. Each phase's time is
 * printed by both JVMs; each process's own cm ids, QPs, CQs and MRs are checked back at its
 * baseline, and the device's counts too. A failure prints everything the server JVM said.
 */
@RdmaTest
@EnabledIf("asked")
class PairConnectionsGuestTest {
    private static final String PARAMETER = "verbs4j.cmPairConnections";
    static final String GREETING = "to the server from client slot ";
    /** Connects in flight at a time: each bound then covers one connect, not a queue of them. */
    private static final int WINDOW = 64;
    /** The bound of each connect. */
    private static final Duration CONNECT = Duration.ofSeconds(120);

    /** The numbers of connections asked for, one run each (e.g. {@code 100,1000}); empty: not asked. */
    private static volatile String asked = "";

    static boolean asked(ExtensionContext context) {
        asked = context.getConfigurationParameter(PARAMETER).orElse("");
        return !asked.isBlank();
    }

    @Test
    void connectionsHeldOpenAtOnceByOneProcessPairCarryAMessageEachWayThenClose() throws Exception {
        for (String n : asked.split(",")) {
            heldOpenByOneProcessPair(Integer.parseInt(n.trim()));
        }
    }

    private static void heldOpenByOneProcessPair(int n) throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        long self = ProcessHandle.current().pid();
        Map<String, Integer> mineBefore = CmTestSupport.countsOf(self);
        int port = CmTestSupport.port();
        long start = System.nanoTime();
        // C1 only: a cold server JVM starts listening several times sooner under TCG
        PeerJvm peer = new PeerJvm(
                PairConnectionsPeer.class,
                List.of("-XX:TieredStopAtLevel=1", "-Xshare:auto"),
                CmTestSupport.ip().getHostAddress(),
                Integer.toString(port),
                Integer.toString(n));
        boolean passed = false;
        try {
            peer.awaitLine("LISTENING", 180);
            double listened = (System.nanoTime() - start) / 1e9;
            String times = connectTalkClose(n, port, before, peer);
            List<String> said = peer.awaitSuccess(300);
            System.out.printf(
                    "PairConnectionsGuestTest: %d connections between two JVMs; the server JVM listened %.1f s"
                            + " after it started; %s%n  the server JVM said:%n  %s%n",
                    n, listened, times, String.join("\n  ", said));
            passed = true;
        } finally {
            peer.close();
            if (!passed) {
                System.out.println("PairConnectionsGuestTest failed; the server JVM said:\n  "
                        + String.join("\n  ", peer.output(5)));
            }
        }
        assertEquals(mineBefore, CmTestSupport.countsOf(self), "this process's cm_id/qp/cq/mr counts");
        assertEquals(before, CmTestSupport.leakCounts(), "the device's cm_id/qp/cq/mr counts");
    }

    /** The client's three phases; returns their times, checked as it goes. */
    private static String connectTalkClose(int n, int port, Map<String, Integer> before, PeerJvm peer)
            throws Exception {
        List<RdmaConnection> clients = new ArrayList<>();
        List<CompletableFuture<RdmaConnection>> connects = new ArrayList<>();
        try (CmEventChannel client = CmEventChannel.open();
                ProtectionDomain pd = client.deviceContext(CmTestSupport.ip()).allocateProtectionDomain();
                MemoryRegion mr =
                        pd.allocateMemoryRegion((long) n * ManyConnectionsGuestTest.SLOT * 2, Access.LOCAL_WRITE)) {
            Map<RdmaConnection, Integer> slots = new ConcurrentHashMap<>();
            AtomicInteger next = new AtomicInteger();
            try {
                // phase 1: n connects from this thread, WINDOW in flight; each with one receive posted
                long t0 = System.nanoTime();
                Semaphore window = new Semaphore(WINDOW);
                for (int i = 0; i < n; i++) {
                    if (!window.tryAcquire(CONNECT.toSeconds() + 60, TimeUnit.SECONDS)) {
                        throw new AssertionError("no connect of the window ended within its bound");
                    }
                    CompletableFuture<RdmaConnection> f = RdmaConnection.connectAsync(
                            client, address(port), ManyConnectionsGuestTest.setup(pd, mr, next, slots), null, CONNECT);
                    f.whenComplete((c, x) -> window.release());
                    connects.add(f);
                }
                List<String> failed = new ArrayList<>();
                for (CompletableFuture<RdmaConnection> f : connects) {
                    try {
                        clients.add(f.get(CONNECT.toSeconds() + 60, TimeUnit.SECONDS));
                    } catch (java.util.concurrent.ExecutionException e) {
                        failed.add(String.valueOf(e.getCause()));
                    }
                }
                assertEquals(
                        List.of(), failed.subList(0, Math.min(5, failed.size())), failed.size() + " connects failed");
                long t1 = System.nanoTime();
                peer.awaitLine("PEER " + n + " connections accepted", 300);
                Map<String, Integer> open = CmTestSupport.leakCounts();
                assertEquals(before.get("qp") + 2 * n, open.get("qp"), "queue pairs while all are open: " + open);
                assertEquals(before.get("cm_id") + 2 * n + 1, open.get("cm_id"), "cm ids while all are open: " + open);

                // phase 2: a greeting each way on every connection, each answered with its own
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                        WorkCompletions wcs = new WorkCompletions(4)) {
                    for (RdmaConnection c : clients) {
                        ManyConnectionsGuestTest.send(c, mr, slots.get(c), GREETING + slots.get(c), wrs, wcs);
                    }
                    for (RdmaConnection c : clients) {
                        assertEquals(
                                "back: " + GREETING + slots.get(c),
                                ManyConnectionsGuestTest.received(c, mr, slots.get(c), wcs),
                                "the answer on " + c);
                    }
                }
                long t2 = System.nanoTime();

                // phase 3: this side closes every connection; the server sees each disconnect and closes
                for (RdmaConnection c : clients) {
                    c.close();
                }
                long t3 = System.nanoTime();
                return String.format(
                        "set up (connectAsync from one thread, %d in flight) in %.1f s (%.1f connections/s); rdma res"
                                + " while all were open %s; a message each way on all in %.1f s; closed by this side"
                                + " in %.1f s",
                        WINDOW, (t1 - t0) / 1e9, n / ((t1 - t0) / 1e9), open, (t2 - t1) / 1e9, (t3 - t2) / 1e9);
            } finally {
                for (CompletableFuture<RdmaConnection> f : connects) {
                    f.cancel(true);
                }
                for (RdmaConnection c : clients) {
                    c.close();
                }
            }
        }
    }
}
