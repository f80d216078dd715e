package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.verbs4j.VerbsException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.testing.PeerJvm;
import org.verbs4j.testing.RdmaTest;

/**
 * The connection manager under load on rxe0: outcomes that are true whatever the interleaving of
 * events (a connection closed right after it connected is an accepted connection that then closed),
 * bounds that hold with 100 concurrent callers on platform and on virtual threads, a listener's
 * backlog honoured, and unanswered requests (their peer gone, or never answered) released at the
 * listener's request timeout while it stays open. The kernel's counts of cm ids, QPs, CQs and MRs
 * return to their baseline after each case.
 */
@RdmaTest
class CmUnderLoadGuestTest {
    /** The verbs a connect's timeout names: the step that got no answer in time. */
    private static final List<String> SETUP_VERBS = List.of("rdma_resolve_addr", "rdma_resolve_route", "rdma_connect");

    private static final ConnectionSetup SMALL =
            new ConnectionSetup().maxSendWr(4).maxRecvWr(4);

    @Test
    void aConnectionClosedRightAfterItConnectedIsAcceptedThenClosed() throws Exception {
        int cycles = 150;
        Map<String, Integer> before = CmTestSupport.leakCounts();
        List<String> wrong = new ArrayList<>();
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(server, address(port), 16)) {
                long t0 = System.nanoTime();
                for (int i = 0; i < cycles; i++) {
                    List<CmEventType> seen = new CopyOnWriteArrayList<>();
                    List<ConnectionState> states = new CopyOnWriteArrayList<>();
                    ConnectionSetup passive = new ConnectionSetup()
                            .maxSendWr(4)
                            .maxRecvWr(4)
                            .beforeConnect(p -> p.onEvent((c, e) -> {
                                seen.add(e.type());
                                states.add(c.state());
                            }));
                    CompletableFuture<Object> accepted = CompletableFuture.supplyAsync(
                            () -> {
                                try {
                                    return l.accept(WAIT).accept(passive, null, WAIT);
                                } catch (Throwable t) {
                                    return t;
                                }
                            },
                            CmTestSupport.ASYNC);
                    try {
                        RdmaConnection.connect(client, address(port), SMALL, null, WAIT)
                                .close();
                    } catch (RuntimeException e) {
                        wrong.add("cycle " + i + ", the connect: " + e);
                    }
                    Object o = accepted.get(WAIT.toSeconds() * 3, TimeUnit.SECONDS);
                    if (!(o instanceof RdmaConnection p)) {
                        wrong.add("cycle " + i + ", the accept: " + o);
                        continue;
                    }
                    try {
                        if (!p.awaitDisconnect(WAIT)) {
                            wrong.add("cycle " + i + ": the accepted connection saw no disconnect: " + p.state());
                        }
                        CmTestSupport.within(
                                () -> seen.contains(CmEventType.DISCONNECTED) ? true : null, "the DISCONNECTED event");
                        String order = inOrder(seen, states);
                        if (order != null) {
                            wrong.add("cycle " + i + ": " + order);
                        }
                    } finally {
                        p.close();
                    }
                }
                double s = (System.nanoTime() - t0) / 1e9;
                System.out.printf(
                        "CmUnderLoadGuestTest: %d connect-then-close cycles in %.1f s, %d wrong outcomes%n",
                        cycles, s, wrong.size());
            }
        }
        assertEquals(List.of(), wrong, "every connection accepted, then closed, each event once and in order");
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts");
    }

    /** Null when the passive side's events came once each, in order, each with the state it leads to; else what was wrong. */
    private static String inOrder(List<CmEventType> seen, List<ConnectionState> states) {
        List<CmEventType> order = List.of(CmEventType.ESTABLISHED, CmEventType.DISCONNECTED, CmEventType.TIMEWAIT_EXIT);
        List<ConnectionState> after =
                List.of(ConnectionState.CONNECTED, ConnectionState.DISCONNECTED, ConnectionState.TIMEWAIT_EXITED);
        int last = -1;
        // the callback adds the event, then its state: read no event whose state is not added yet
        int n = Math.min(seen.size(), states.size());
        for (int i = 0; i < n; i++) {
            int at = order.indexOf(seen.get(i));
            if (at <= last) {
                return "events " + seen + " (states " + states + "): not once each in order";
            }
            last = at;
            // the state when the callback ran: the event's own state, or a later one it was overtaken by
            if (states.get(i).ordinal() < after.get(at).ordinal()) {
                return "event " + seen.get(i) + " observed in state " + states.get(i);
            }
        }
        return null;
    }

    /**
     * Threads that spin on the CPU beside the 100-connect bound test ({@code
     * --config=verbs4j.cmLoad=N}, default none): the load of a busy machine, reproduced in the guest.
     */
    private static volatile int load;

    /**
     * Whether the run asked for the 100-connect bound test ({@code --config=verbs4j.cmBounds=true}):
     * a wall-clock bound, measured on a guest of its own, not beside another emulator in CI.
     */
    static boolean boundsAsked(ExtensionContext context) {
        load = context.getConfigurationParameter("verbs4j.cmLoad")
                .map(Integer::parseInt)
                .orElse(0);
        return context.getConfigurationParameter("verbs4j.cmBounds")
                .map(Boolean::parseBoolean)
                .orElse(false);
    }

    /**
     * 100 connects at once to a listener that never accepts, each bounded by 8 s: every one ends
     * with a timeout naming the step it waited on (address, route, or the connect) and a fix, within
     * 8 s plus {@link RdmaConnection#BOUND_MARGIN},
     * on platform and on virtual threads; then the kernel's counts return to the baseline.
     */
    @ParameterizedTest(name = "{0}")
    @EnabledIf("boundsAsked")
    @ValueSource(strings = {"platform threads", "virtual threads", "virtual threads joining connectAsync"})
    void hundredConnectsToAListenerThatNeverAcceptsEndWithinTheirBound(String threading) throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        Bounds b = connectsToAListenerThatNeverAccepts(threading, 100, Duration.ofSeconds(8), load);
        System.out.print(b.report());
        assertEquals(List.of(), b.wrong(), "every connect ended by its bound");
        assertEquals(0, b.over(), "connects that returned later than " + b.bound() + " + " + b.margin());
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts");
    }

    /**
     * The same 100 connects in a second JVM whose virtual threads have {@code N} carriers ({@code
     * --config=verbs4j.cmBoundsCarriers=N}, or several: {@code 1,2}; {@code
     * -Djdk.virtualThreadScheduler.parallelism=N}), on platform and virtual threads, each bound held
     * within the margin; the setup timings of the timeouts (when the deadline timer fired, the
     * release ran, the future completed and the waiting thread returned, each after the deadline)
     * are printed per step.
     */
    @Test
    @EnabledIf("carriersAsked")
    void hundredConnectsEndWithinTheirBoundWithFewCarriers() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        List<String> failed = new ArrayList<>();
        List<String> runs = new ArrayList<>();
        for (String n : carriers.split(",")) {
            if (!earlier.isBlank()) {
                runs.add(earlier + " " + n.trim());
            }
            runs.add(" " + n.trim());
        }
        for (String run : runs) {
            String n = run.substring(run.lastIndexOf(' ') + 1);
            String classes = run.substring(0, run.lastIndexOf(' '));
            PeerJvm peer = new PeerJvm(
                    classes.isEmpty() ? "" : classes + java.io.File.pathSeparator,
                    BoundsPeer.class,
                    Stream.concat(
                                    Stream.of(
                                            "-Djdk.virtualThreadScheduler.parallelism=" + Integer.parseInt(n.trim()),
                                            "-Dorg.slf4j.simpleLogger.log.org.verbs4j.cm.SetupTimings=debug"),
                                    Stream.of(peerOptions.split(" ")).filter(o -> !o.isBlank()))
                            .toList());
            try {
                peer.awaitSuccess(600);
            } catch (AssertionError e) {
                failed.add(
                        n + " carrier(s): " + e.getMessage().lines().findFirst().orElse(""));
            } finally {
                peer.close();
                List<String> said = peer.output(1);
                System.out.println("CmUnderLoadGuestTest: " + n + " carrier(s)"
                        + (classes.isEmpty() ? "" : ", the library's classes from " + classes)
                        + "; the bounds JVM said:\n  "
                        + String.join(
                                "\n  ",
                                said.stream()
                                        .filter(l -> !l.contains("SetupTimings"))
                                        .toList()));
                System.out.print(BoundsPeer.lateness(said));
            }
            CmTestSupport.within(
                    () -> before.equals(CmTestSupport.leakCounts()) ? Boolean.TRUE : null,
                    "counts back to " + before + " (now " + CmTestSupport.leakCounts() + ")");
        }
        assertEquals(List.of(), failed, "runs with a bound overshot or a wrong outcome");
    }

    /** Carriers of the virtual threads in the second JVM ({@code verbs4j.cmBoundsCarriers}); empty: not asked. */
    private static volatile String carriers = "";

    /** Earlier library classes to run the same peer with first ({@code verbs4j.cmBoundsBefore}); empty: none. */
    private static volatile String earlier = "";

    /** More options for the second JVM ({@code verbs4j.cmBoundsJvmOptions}, space-separated: a profiler's, say). */
    private static volatile String peerOptions = "";

    static boolean carriersAsked(ExtensionContext context) {
        peerOptions =
                context.getConfigurationParameter("verbs4j.cmBoundsJvmOptions").orElse("");
        earlier = context.getConfigurationParameter("verbs4j.cmBoundsBefore").orElse("");
        carriers = context.getConfigurationParameter("verbs4j.cmBoundsCarriers").orElse("");
        return !carriers.isBlank();
    }

    /** What one run of {@link #connectsToAListenerThatNeverAccepts} saw. */
    record Bounds(
            String threading,
            Duration bound,
            Duration margin,
            long[] took,
            long[] completed,
            List<String> wrong,
            String lateness) {
        /** Connects that returned later than the bound plus the margin. */
        int over() {
            int over = 0;
            for (long t : took) {
                over += t > bound.plus(margin).toNanos() ? 1 : 0;
            }
            return over;
        }

        String report() {
            int n = took.length;
            StringBuilder out = new StringBuilder(lateness);
            if (threading.endsWith("connectAsync")) {
                long[] gap = new long[n], done = completed.clone();
                for (int i = 0; i < n; i++) {
                    gap[i] = took[i] - completed[i];
                }
                java.util.Arrays.sort(gap);
                java.util.Arrays.sort(done);
                out.append(String.format(
                        "CmUnderLoadGuestTest: the futures completed after %.2f s (median), %.2f s (the slowest); the"
                                + " joining virtual threads returned %.1f ms (median), %.1f ms (the most) after%n",
                        done[n / 2] / 1e9, done[n - 1] / 1e9, gap[n / 2] / 1e6, gap[n - 1] / 1e6));
            }
            long[] sorted = took.clone();
            java.util.Arrays.sort(sorted);
            out.append(String.format(
                    "CmUnderLoadGuestTest: %d concurrent connects (%s), bound %s: returned after %.2f s"
                            + " (median), %.2f s (90th percentile), %.2f s (the slowest); %d beyond the bound plus %s%n",
                    n,
                    threading,
                    bound,
                    sorted[n / 2] / 1e9,
                    sorted[n * 9 / 10] / 1e9,
                    sorted[n - 1] / 1e9,
                    over(),
                    margin));
            return out.toString();
        }
    }

    /**
     * {@code n} connects at once, each bounded by {@code bound}, to a listener that never accepts,
     * on platform threads, virtual threads, or virtual threads joining {@code connectAsync}
     * ({@code threading}), with {@code load} threads spinning beside them.
     */
    static Bounds connectsToAListenerThatNeverAccepts(String threading, int n, Duration bound, int load)
            throws Exception {
        boolean virtual = threading.startsWith("virtual");
        boolean async = threading.endsWith("connectAsync");
        Duration margin = RdmaConnection.BOUND_MARGIN;
        List<String> wrong = new CopyOnWriteArrayList<>();
        long[] took = new long[n], completed = new long[n];
        java.util.concurrent.atomic.AtomicBoolean running = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<Thread> hogs = new ArrayList<>();
        String released = "";
        for (int i = 0; i < load; i++) {
            hogs.add(Thread.ofPlatform().daemon().start(() -> {
                while (running.get()) {
                    Thread.onSpinWait();
                }
            }));
        }
        // how late a 20 ms sleep wakes, on a virtual and on a platform thread, during the connects
        long[] lateVirtual = new long[2], latePlatform = new long[2];
        Thread probeV = Thread.ofVirtual().start(() -> lateness(running, lateVirtual));
        Thread probeP = Thread.ofPlatform().daemon().start(() -> lateness(running, latePlatform));
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(server, address(port), n)) {
                CountDownLatch go = new CountDownLatch(1);
                try (ExecutorService threads = virtual
                        ? Executors.newVirtualThreadPerTaskExecutor()
                        : Executors.newThreadPerTaskExecutor(
                                Thread.ofPlatform().daemon().factory())) {
                    for (int i = 0; i < n; i++) {
                        int k = i;
                        threads.submit(() -> {
                            go.await();
                            long t0 = System.nanoTime();
                            try {
                                if (async) {
                                    // when the future completed, apart from when this thread saw it
                                    CompletableFuture<RdmaConnection> f =
                                            RdmaConnection.connectAsync(client, address(port), SMALL, null, bound);
                                    f.whenComplete((c, x) -> completed[k] = System.nanoTime() - t0);
                                    try {
                                        f.join().close();
                                    } catch (java.util.concurrent.CompletionException e) {
                                        throw e.getCause();
                                    }
                                } else {
                                    RdmaConnection.connect(client, address(port), SMALL, null, bound)
                                            .close();
                                }
                                wrong.add("connect " + k + " connected to a listener that never accepts");
                            } catch (VerbsTimeoutException e) {
                                if (!SETUP_VERBS.contains(e.verb()) || e.hint() == null) {
                                    wrong.add("connect " + k + ": a timeout that names no verb or fix: " + e);
                                }
                            } catch (Throwable e) {
                                wrong.add("connect " + k + ": " + e);
                            }
                            took[k] = System.nanoTime() - t0;
                            return null;
                        });
                    }
                    go.countDown();
                }
                if (l.queued() > n) {
                    wrong.add("queued: " + l.queued());
                }
                // the timed-out connections are released after their callers returned: the channel's
                // close waits for that (within its bound), this waits longer, and says how long it took
                long t0 = System.nanoTime();
                long until = t0 + Duration.ofSeconds(120).toNanos();
                while (releasing(client) > 0 && System.nanoTime() < until) {
                    Thread.sleep(10);
                }
                released = String.format(
                        "CmUnderLoadGuestTest: the %d connections released %.2f s after the last connect returned%n",
                        n, (System.nanoTime() - t0) / 1e9);
                if (releasing(client) > 0) {
                    wrong.add(releasing(client) + " connections still being released 120 s after their connects");
                }
            }
        } finally {
            running.set(false);
            for (Thread t : hogs) {
                t.join();
            }
            probeV.join();
            probeP.join();
        }
        String late = String.format(
                        "CmUnderLoadGuestTest: %d spinning threads; a 20 ms sleep woke late by at most %.1f ms (mean %.1f)"
                                + " on a virtual thread, %.1f ms (mean %.1f) on a platform thread%n",
                        load, lateVirtual[0] / 1e6, lateVirtual[1] / 1e6, latePlatform[0] / 1e6, latePlatform[1] / 1e6)
                + released;
        return new Bounds(threading, bound, margin, took, completed, wrong, late);
    }

    /** Connections of {@code ch} still being released; 0 with earlier library classes (verbs4j.cmBoundsBefore). */
    private static int releasing(CmEventChannel ch) {
        try {
            return ch.core().releasing.get();
        } catch (NoSuchFieldError e) { // classes that released before the connect returned
            return 0;
        }
    }

    /** Sleeps 20 ms until {@code running} ends; {@code late}: the most and the mean it woke late, in ns. */
    private static void lateness(java.util.concurrent.atomic.AtomicBoolean running, long[] late) {
        long sum = 0, count = 0;
        while (running.get()) {
            long t0 = System.nanoTime();
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
            long l = System.nanoTime() - t0 - 20_000_000L;
            late[0] = Math.max(late[0], l);
            sum += l;
            late[1] = sum / ++count;
        }
    }

    /**
     * A listener with a backlog of 4 that never accepts, and 12 connects: 4 requests wait, the 8
     * beyond the backlog are rejected at once (as the kernel's rdma_cm rejects requests beyond
     * {@code rdma_listen}'s backlog), so that the cm ids held stay at the listener, the 4 waiting
     * requests and their 4 connects; the listener's close rejects the 4.
     */
    @Test
    void aListenerHonoursItsBacklog() throws Exception {
        int backlog = 4, n = 12;
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            CmListener l = CmListener.bind(server, address(port), backlog);
            List<CompletableFuture<Object>> connects = new ArrayList<>();
            try {
                for (int i = 0; i < n; i++) {
                    connects.add(connectAsync(client, port, Duration.ofSeconds(20)));
                }
                List<Object> early = CmTestSupport.within(
                        () -> {
                            List<Object> done = connects.stream()
                                    .filter(CompletableFuture::isDone)
                                    .map(CompletableFuture::join)
                                    .toList();
                            return done.size() >= n - backlog ? done : null;
                        },
                        "the requests beyond the backlog turned away");
                assertEquals(n - backlog, early.size(), "ended before the listener closed: " + early);
                for (Object o : early) {
                    ConnectionFailedException e = assertInstanceOf(ConnectionFailedException.class, o);
                    assertEquals(ConnectionFailedException.Reason.REJECTED, e.reason(), e.getMessage());
                }
                assertEquals(backlog, l.queued(), "requests queued");
                int held = before.get("cm_id") + 1 + 2 * backlog;
                int[] ids = {0};
                CmTestSupport.within(
                        () -> (ids[0] = CmTestSupport.leakCounts().get("cm_id")) == held ? true : null,
                        "cm ids back to the listener, its " + backlog + " requests and their connects (" + held
                                + "; now " + ids[0] + ")");
                l.close();
                for (CompletableFuture<Object> f : connects) {
                    Object o = f.get(30, TimeUnit.SECONDS);
                    ConnectionFailedException e = assertInstanceOf(ConnectionFailedException.class, o);
                    assertEquals(ConnectionFailedException.Reason.REJECTED, e.reason(), e.getMessage());
                }
            } finally {
                l.close();
                for (CompletableFuture<Object> f : connects) {
                    if (f.get(30, TimeUnit.SECONDS) instanceof RdmaConnection c) {
                        c.close();
                    }
                }
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts");
    }

    /**
     * Requests that nobody answers, with the listener open: with a request timeout of 3 s and
     * connects bounded by 30 s, the 4 waiting requests (a listener that never accepts) are rejected
     * at the request timeout: their connects end REJECTED long before their bound, and the cm ids
     * are back to the listener's alone while it stays open.
     */
    @Test
    void requestsUnansweredPastTheRequestTimeoutAreRejected() throws Exception {
        Duration timeout = Duration.ofSeconds(3);
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(server, address(port), 4).requestTimeout(timeout)) {
                assertEquals(timeout, l.requestTimeout());
                List<CompletableFuture<Object>> connects = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    connects.add(connectAsync(client, port, Duration.ofSeconds(30)));
                }
                CmTestSupport.within(() -> l.queued() == 4 ? true : null, "4 requests queued");
                long t0 = System.nanoTime(); // the last request came before this: none waits longer
                for (CompletableFuture<Object> f : connects) {
                    ConnectionFailedException e =
                            assertInstanceOf(ConnectionFailedException.class, f.get(60, TimeUnit.SECONDS));
                    assertEquals(ConnectionFailedException.Reason.REJECTED, e.reason(), e.getMessage());
                }
                double s = (System.nanoTime() - t0) / 1e9;
                System.out.printf(
                        "CmUnderLoadGuestTest: 4 requests unanswered, request timeout %s: their connects were"
                                + " rejected %.1f s after the last request came%n",
                        timeout, s);
                assertTrue(s < 15, "rejected at the request timeout, not at the connects' bound: " + s + " s");
                CmTestSupport.within(
                        () -> CmTestSupport.leakCounts().get("cm_id") == before.get("cm_id") + 1 ? true : null,
                        "the requests released while the listener stays open");
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts");
    }

    /**
     * Abandoned requests: two clients connect and destroy their ids (cancel) before the listener
     * answers, one request handed out by accept, one still queued. rxe tells the listener nothing;
     * with the listener still open both are released at its request timeout (4 s): its cm ids are
     * back to the listener's alone, and the late accept of the handed-out one is refused, naming
     * the timeout.
     */
    @Test
    void requestsWhosePeerGaveUpAreReleasedAtTheRequestTimeout() throws Exception {
        Duration timeout = Duration.ofSeconds(4);
        Map<String, Integer> before = CmTestSupport.leakCounts();
        try (CmEventChannel server = CmEventChannel.open();
                CmEventChannel client = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(server, address(port), 8).requestTimeout(timeout)) {
                CompletableFuture<RdmaConnection> first =
                        RdmaConnection.connectAsync(client, address(port), SMALL, null, Duration.ofSeconds(60));
                ConnectionRequest handedOut = l.accept(WAIT);
                CompletableFuture<RdmaConnection> second =
                        RdmaConnection.connectAsync(client, address(port), SMALL, null, Duration.ofSeconds(60));
                CmTestSupport.within(() -> l.queued() == 1 ? true : null, "the second request queued");
                long t0 = System.nanoTime();
                assertTrue(first.cancel(true), "the first connect still waited");
                assertTrue(second.cancel(true), "the second connect still waited");
                int listening = before.get("cm_id") + 1;
                String[] last = {""};
                CmTestSupport.within(
                        () -> {
                            int ids = CmTestSupport.leakCounts().get("cm_id");
                            last[0] =
                                    "queued " + l.queued() + ", cm ids " + ids + " (the listener's: " + listening + ")";
                            return l.queued() == 0 && ids == listening ? true : null;
                        },
                        "the abandoned requests released");
                System.out.printf(
                        "CmUnderLoadGuestTest: 2 requests whose peers gave up released %.1f s after they did,"
                                + " request timeout %s (%s)%n",
                        (System.nanoTime() - t0) / 1e9, timeout, last[0]);
                VerbsException late = assertThrows(
                        VerbsException.class,
                        () -> handedOut.accept(SMALL, null, WAIT).close(),
                        "an accept after the release");
                assertEquals("rdma_accept", late.verb(), late.getMessage());
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts");
    }

    /** Connects on another thread; the future holds the connection or what the connect threw. */
    private static CompletableFuture<Object> connectAsync(CmEventChannel client, int port, Duration bound) {
        return CompletableFuture.supplyAsync(
                () -> {
                    try {
                        return RdmaConnection.connect(client, address(port), SMALL, null, bound);
                    } catch (Throwable t) {
                        return t;
                    }
                },
                CmTestSupport.ASYNC);
    }
}
