package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.verbs4j.Access;
import org.verbs4j.CompletionStatus;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.RdmaTest;

/**
 * Many connections held open at once between two channels of one JVM on rxe0, the connecting side
 * on one and the accepting side on the other (opt-in: the configuration parameter or system
 * property {@code verbs4j.cmConnections}, e.g. 1000; the guest tier passes it as
 * {@code --config=verbs4j.cmConnections=1000}): all set up by 32 connecting and 32 accepting
 * threads, each carrying a message both ways, then all closed; the time of each phase is printed
 * and the kernel's counts of cm ids, QPs, CQs and MRs return to their baseline.
 */
@RdmaTest
@EnabledIf("asked")
class ManyConnectionsGuestTest {
    private static final String PARAMETER = "verbs4j.cmConnections";
    private static final int THREADS = 32;
    static final int SLOT = 64;

    /** How many connections the run asked for (read by the condition, before the test). */
    private static volatile int asked;

    static boolean asked(ExtensionContext context) {
        asked = context.getConfigurationParameter(PARAMETER)
                .map(Integer::parseInt)
                .orElse(0);
        return asked > 0;
    }

    @Test
    void connectionsHeldOpenAtOnceCarryAMessageEachWayThenClose() throws Exception {
        int n = asked;
        Map<String, Integer> before = CmTestSupport.leakCounts();
        List<RdmaConnection> clients = new ArrayList<>(), servers = new ArrayList<>();
        List<Future<RdmaConnection>> accepted = new ArrayList<>(), connected = new ArrayList<>();
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.open();
                ExecutorService threads = Executors.newFixedThreadPool(
                        2 * THREADS, Thread.ofPlatform().daemon().factory())) {
            ProtectionDomain pd = server.deviceContext(CmTestSupport.ip()).allocateProtectionDomain();
            MemoryRegion cm = pd.allocateMemoryRegion((long) n * SLOT * 2, Access.LOCAL_WRITE);
            MemoryRegion sm = pd.allocateMemoryRegion((long) n * SLOT * 2, Access.LOCAL_WRITE);
            Map<RdmaConnection, Integer> slots = new ConcurrentHashMap<>();
            AtomicInteger cslot = new AtomicInteger(), sslot = new AtomicInteger();
            int port = CmTestSupport.port();
            CmListener l = CmListener.bind(server, address(port), n);
            try {
                // phase 1: set up n connections, each with one receive posted at its slot
                long t0 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    ConnectionSetup ss = setup(pd, sm, sslot, slots);
                    accepted.add(threads.submit(() -> l.accept(WAIT).accept(ss, null, WAIT)));
                    ConnectionSetup cs = setup(pd, cm, cslot, slots);
                    connected.add(threads.submit(() -> RdmaConnection.connect(client, address(port), cs, null, WAIT)));
                }
                List<String> failed = new ArrayList<>();
                collect(connected, clients, failed);
                collect(accepted, servers, failed);
                assertEquals(
                        List.of(), failed.subList(0, Math.min(5, failed.size())), failed.size() + " setups failed");
                long t1 = System.nanoTime();
                Map<String, Integer> open = CmTestSupport.leakCounts();

                // phase 2: a message each way on every connection
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                        WorkCompletions wcs = new WorkCompletions(4)) {
                    for (RdmaConnection c : clients) {
                        send(c, cm, slots.get(c), "to the server from client slot " + slots.get(c), wrs, wcs);
                    }
                    for (RdmaConnection s : servers) {
                        String got = received(s, sm, slots.get(s), wcs);
                        send(s, sm, slots.get(s), "back: " + got, wrs, wcs);
                    }
                    for (RdmaConnection c : clients) {
                        assertEquals(
                                "back: to the server from client slot " + slots.get(c),
                                received(c, cm, slots.get(c), wcs),
                                "the answer on " + c);
                    }
                }
                long t2 = System.nanoTime();

                // phase 3: the clients close; each server side sees it and closes
                for (RdmaConnection c : clients) {
                    c.close();
                }
                for (RdmaConnection s : servers) {
                    s.awaitDisconnect(WAIT);
                    s.close();
                }
                long t3 = System.nanoTime();
                System.out.printf(
                        "ManyConnectionsGuestTest: %d connections: set up (%d connecting and %d accepting threads) in"
                                + " %.1f s (%.1f connections/s); rdma res while open %s; a message each way on all in"
                                + " %.1f s; closed in %.1f s%n",
                        n,
                        THREADS,
                        THREADS,
                        (t1 - t0) / 1e9,
                        n / ((t1 - t0) / 1e9),
                        open,
                        (t2 - t1) / 1e9,
                        (t3 - t2) / 1e9);
            } finally {
                threads.shutdownNow();
                collect(connected, clients, new ArrayList<>());
                collect(accepted, servers, new ArrayList<>());
                for (RdmaConnection c : clients) {
                    c.close();
                }
                for (RdmaConnection s : servers) {
                    s.close();
                }
                l.close();
                cm.close();
                sm.close();
                pd.close();
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts");
    }

    /** The connections the futures made (each once), and what the others threw. */
    static void collect(List<Future<RdmaConnection>> futures, List<RdmaConnection> into, List<String> failed)
            throws InterruptedException {
        for (Future<RdmaConnection> f : futures) {
            try {
                RdmaConnection c = f.get(120, TimeUnit.SECONDS);
                if (!into.contains(c)) {
                    into.add(c);
                }
            } catch (java.util.concurrent.ExecutionException
                    | java.util.concurrent.TimeoutException
                    | java.util.concurrent.CancellationException e) {
                failed.add(String.valueOf(e.getCause() != null ? e.getCause() : e));
            }
        }
    }

    /** Small queues on {@code pd}; once the queue pair exists, one receive at the connection's slot of {@code mr}. */
    static ConnectionSetup setup(
            ProtectionDomain pd, MemoryRegion mr, AtomicInteger next, Map<RdmaConnection, Integer> slots) {
        return new ConnectionSetup()
                .protectionDomain(pd)
                .maxSendWr(2)
                .maxRecvWr(2)
                .beforeConnect(c -> {
                    int slot = next.getAndIncrement();
                    slots.put(c, slot);
                    try (ReceiveWorkRequests r = new ReceiveWorkRequests(1, 1)) {
                        r.add(slot).sge(mr, (long) slot * SLOT * 2, SLOT);
                        c.queuePair().postRecv(r);
                    }
                });
    }

    static void send(
            RdmaConnection c, MemoryRegion mr, int slot, String text, SendWorkRequests wrs, WorkCompletions wcs) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        long at = (long) slot * SLOT * 2 + SLOT;
        MemorySegment.copy(b, 0, mr.segment(), ValueLayout.JAVA_BYTE, at, b.length);
        wrs.clear().send(slot).sge(mr, at, b.length).signaled();
        c.queuePair().postSend(wrs);
        CmTestSupport.poll(c.sendCompletionQueue(), wcs, 1);
        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
    }

    static String received(RdmaConnection c, MemoryRegion mr, int slot, WorkCompletions wcs) {
        CmTestSupport.poll(c.receiveCompletionQueue(), wcs, 1);
        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
        assertEquals(slot, wcs.wrId(0), "the receive's slot");
        byte[] b =
                mr.segment().asSlice((long) slot * SLOT * 2, wcs.byteLength(0)).toArray(ValueLayout.JAVA_BYTE);
        return new String(b, StandardCharsets.UTF_8);
    }
}
