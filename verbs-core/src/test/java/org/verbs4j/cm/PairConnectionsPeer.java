package org.verbs4j.cm;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.PeerJvm;

/**
 * The server of {@link PairConnectionsGuestTest}, run in a second JVM: listens on {@code
 * args[0]}:{@code args[1]} with a backlog of {@code args[2]} and accepts that many connections
 * asynchronously, each from the event thread as its request comes ({@link
 * ConnectionRequest#acceptAsync}, each bounded from its own request on, so a slow client queues no
 * bound), each with one receive posted; once all are accepted, receives each client's message,
 * checks it is a client's greeting not seen before and answers {@code "back: "} and the greeting;
 * then waits for every client's disconnect, closes everything and checks that this process holds
 * no cm id, QP, CQ or MR ({@code rdma res}). Prints LISTENING, each phase's time, then PEER OK;
 * exits 0, or 1 with the failure.
 */
public final class PairConnectionsPeer {
    /** The bound of each accept, from its request on. */
    private static final Duration ACCEPT = Duration.ofSeconds(120);

    private PairConnectionsPeer() {}

    public static void main(String[] args) {
        PeerJvm.exitAfter(
                () -> run(new InetSocketAddress(args[0], Integer.parseInt(args[1])), Integer.parseInt(args[2])));
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static void run(InetSocketAddress at, int n) throws Exception {
        List<RdmaConnection> servers = new ArrayList<>();
        ConcurrentLinkedQueue<RdmaConnection> accepted = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> failed = new ConcurrentLinkedQueue<>();
        Map<RdmaConnection, Integer> slots = new ConcurrentHashMap<>();
        CountDownLatch answered = new CountDownLatch(n);
        AtomicLong first = new AtomicLong();
        try (CmEventChannel ch = CmEventChannel.open();
                ProtectionDomain pd = ch.deviceContext(at.getAddress()).allocateProtectionDomain();
                MemoryRegion mr =
                        pd.allocateMemoryRegion((long) n * ManyConnectionsGuestTest.SLOT * 2, Access.LOCAL_WRITE);
                CmListener l = CmListener.bind(ch, at, n)) {
            try {
                AtomicInteger next = new AtomicInteger();
                l.onRequest(r -> {
                    first.compareAndSet(0, System.nanoTime());
                    r.acceptAsync(ManyConnectionsGuestTest.setup(pd, mr, next, slots), null, ACCEPT)
                            .whenComplete((c, x) -> {
                                if (c != null) {
                                    accepted.add(c);
                                } else {
                                    failed.add(String.valueOf(x));
                                }
                                answered.countDown();
                            });
                });
                System.out.println("LISTENING " + l.localAddress());
                System.out.flush();
                // the client's setup phase bounds this wait; this bound only ends a peer left behind
                check(
                        answered.await(1800, TimeUnit.SECONDS),
                        (n - answered.getCount()) + " of " + n + " requests answered");
                long t1 = System.nanoTime();
                servers.addAll(accepted);
                check(
                        failed.isEmpty(),
                        failed.size() + " accepts failed; the first: "
                                + failed.stream().findFirst().orElse(""));
                check(servers.size() == n, servers.size() + " connections accepted, not " + n);
                System.out.printf(
                        "PEER %d connections accepted in %.1f s from the first request%n", n, (t1 - first.get()) / 1e9);
                Set<String> seen = new TreeSet<>();
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                        WorkCompletions wcs = new WorkCompletions(4)) {
                    for (RdmaConnection s : servers) {
                        int slot = slots.get(s);
                        String got = ManyConnectionsGuestTest.received(s, mr, slot, wcs);
                        check(
                                got.startsWith(PairConnectionsGuestTest.GREETING) && seen.add(got),
                                "connection " + s + " received " + got + ", not a client's greeting not seen before");
                        ManyConnectionsGuestTest.send(s, mr, slot, "back: " + got, wrs, wcs);
                    }
                }
                long t2 = System.nanoTime();
                System.out.printf(
                        "PEER %d distinct greetings received and answered in %.1f s%n", seen.size(), (t2 - t1) / 1e9);
                int disconnected = 0;
                for (RdmaConnection s : servers) {
                    disconnected += s.awaitDisconnect(CmTestSupport.WAIT) ? 1 : 0;
                    s.close();
                }
                check(disconnected == n, disconnected + " of " + n + " connections saw the client's disconnect");
                System.out.printf(
                        "PEER %d disconnects seen and connections closed in %.1f s%n",
                        disconnected, (System.nanoTime() - t2) / 1e9);
            } finally {
                for (RdmaConnection s : accepted) {
                    s.close();
                }
            }
        }
        Map<String, Integer> left =
                CmTestSupport.countsOf(ProcessHandle.current().pid());
        System.out.println("PEER holds after closing: " + left);
        check(left.values().stream().allMatch(v -> v == 0), "this process still holds " + left);
    }
}
