package org.verbs4j.perf;

import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.cm.CmEventChannel;
import org.verbs4j.cm.CmEventType;
import org.verbs4j.cm.CmListener;
import org.verbs4j.cm.ConnectionSetup;
import org.verbs4j.cm.RdmaConnection;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code verbs-perf cm-setup}: how fast connections are set up through rdma_cm, as librdmacm's
 * {@code cmtime} measures it, and against it as the peer (its protocol is plain rdma_cm: a
 * request without private data, an accept, a disconnect by the active side). With {@code -s
 * SERVER} it is the active side: it sets up {@code -c} connections at once (all started before
 * any is waited for), prints the time from the first connect to the last one established and
 * the rate, then disconnects and closes them. Without {@code -s} it is the passive side: it
 * accepts {@code -c} connections on {@code -b ADDR -p PORT}, prints the time from the first
 * request to the last connection established and the rate, closes each connection once its peer
 * disconnects, and exits when all are closed. {@code --api async} drives every connect or accept
 * from one thread (the futures of {@code connectAsync}/{@code acceptAsync}); {@code --api
 * blocking} runs one blocking {@code connect}/{@code accept} per thread ({@code --threads
 * virtual|platform}). The queue pairs are cmtime's: one work request and one SGE each way, and
 * ({@code --cqs shared}, the default) one pair of completion queues that every connection shares:
 * cmtime passes the same {@code ibv_qp_init_attr} to every {@code rdma_create_qp}, which writes
 * the completion queues it created for the first connection back into it, so that all later ones
 * use those ({@code --cqs own}: two of its own per connection). With {@code --rounds R} the
 * active side connects to port {@code -p} + r in round r (a fresh cmtime server for each: a
 * cmtime server whose first connection closed creates its next queue pairs on that connection's
 * destroyed completion queues, and refuses them, "failure creating qp"), and the passive side
 * accepts R runs of its peer, one after another, reporting each (the first pays the JVM's warm-up,
 * which cmtime, compiled ahead of time, does not). Not a timed test: a
 * benchmark to run next to {@code cmtime} on the same machine.
 */
@Command(
        name = "cm-setup",
        mixinStandardHelpOptions = true,
        description = "Sets up -c connections at once through rdma_cm (cmtime's measurement)")
final class CmSetupCommand implements java.util.concurrent.Callable<Integer> {
    @Option(names = "-s", description = "the server's address (active side); none: passive side")
    String server;

    @Option(names = "-b", description = "the address to listen on (passive side)", defaultValue = "0.0.0.0")
    String bind;

    @Option(names = "-p", description = "port (cmtime's default: 7471)", defaultValue = "7471")
    int port;

    @Option(names = "-c", description = "connections (default: 100)", defaultValue = "100")
    int connections;

    @Option(names = "--api", description = "async or blocking (default: async)", defaultValue = "async")
    String api;

    @Option(
            names = "--threads",
            description = "blocking API: virtual or platform threads, one per connection (default: virtual)",
            defaultValue = "virtual")
    String threads;

    @Option(
            names = "--timeout",
            description = "bound of each connect or accept, seconds (default: 60)",
            defaultValue = "60")
    int timeoutSeconds;

    @Option(
            names = "--rounds",
            description = "set up and close the -c connections this many times, one report each (the "
                    + "first includes the JIT's warm-up; passive side: the peer runs once per round; default: 1)",
            defaultValue = "1")
    int rounds;

    @Option(
            names = "--cqs",
            description = "shared (one pair for all connections, as cmtime ends up with) or own "
                    + "(two per connection; default: shared)",
            defaultValue = "shared")
    String cqs;

    private final PrintStream out;
    /** The completion queues every connection shares ({@code --cqs shared}), or null. */
    private CompletionQueue sharedCq;

    CmSetupCommand(PrintStream out) {
        this.out = out;
    }

    static int run(String[] args, PrintStream out) {
        return new CommandLine(new CmSetupCommand(out)).execute(args);
    }

    private ConnectionSetup setup() {
        ConnectionSetup s = new ConnectionSetup();
        if (sharedCq != null) {
            s.completionQueues(sharedCq, sharedCq);
        }
        return s.maxSendWr(1).maxRecvWr(1).maxSendSge(1).maxRecvSge(1).maxInlineData(0);
    }

    private Duration timeout() {
        return Duration.ofSeconds(timeoutSeconds);
    }

    private ExecutorService threadsFor() {
        return threads.equals("platform")
                ? Executors.newCachedThreadPool(Thread.ofPlatform().daemon().factory())
                : Executors.newVirtualThreadPerTaskExecutor();
    }

    @Override
    public Integer call() throws Exception {
        if (!api.equals("async") && !api.equals("blocking")) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--api is async or blocking, not " + api);
        }
        if (!threads.equals("virtual") && !threads.equals("platform")) {
            throw new CommandLine.ParameterException(
                    new CommandLine(this), "--threads is virtual or platform, not " + threads);
        }
        if (connections <= 0) {
            throw new CommandLine.ParameterException(new CommandLine(this), "-c must be positive: " + connections);
        }
        if (rounds <= 0) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--rounds must be positive: " + rounds);
        }
        if (!cqs.equals("shared") && !cqs.equals("own")) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--cqs is shared or own, not " + cqs);
        }
        try (CmEventChannel channel = CmEventChannel.open()) {
            InetAddress local = InetAddress.getByName(server != null ? server : bind);
            if (cqs.equals("shared") && !local.isAnyLocalAddress()) {
                // the device of the local address: the server's on the active side (the benchmark
                // runs both sides on one device), the bound one on the passive side (a wildcard
                // address names no device: own queues then)
                Context device = channel.deviceContext(local);
                sharedCq = device.createCompletionQueue(Math.max(2, 2 * connections));
            }
            try {
                if (server == null) {
                    return passive(channel);
                }
                int rc = 0;
                for (int r = 0; r < rounds; r++) {
                    roundBegins(r);
                    rc = Math.max(rc, active(channel, port + r));
                }
                return rc;
            } finally {
                if (sharedCq != null) {
                    sharedCq.close();
                }
            }
        }
    }

    /**
     * Marks the start of round {@code r} on standard error, where the setup timings are logged
     * ({@code SetupTimings}): "ROUND r", so that a profile can sum the steps of one round (the
     * last, the warmest) apart from the others.
     */
    private static void roundBegins(int r) {
        System.err.println("ROUND " + r);
        System.err.flush();
    }

    private String label() {
        return "verbs4j " + api + (api.equals("blocking") ? " (" + threads + " threads)" : "");
    }

    private void report(String side, int ok, int failed, long nanos) {
        double ms = nanos / 1e6;
        out.printf(
                "%s %s: %d connections in %.1f ms = %.1f connects/s (%d failed)%n",
                label(), side, ok, ms, ok / (nanos / 1e9), failed);
    }

    private int active(CmEventChannel channel, int port) throws Exception {
        InetSocketAddress remote = new InetSocketAddress(InetAddress.getByName(server), port);
        List<RdmaConnection> up = new ArrayList<>();
        AtomicInteger failed = new AtomicInteger();
        long t0 = System.nanoTime();
        if (api.equals("async")) {
            List<CompletableFuture<RdmaConnection>> fs = new ArrayList<>(connections);
            for (int i = 0; i < connections; i++) {
                fs.add(RdmaConnection.connectAsync(channel, remote, setup(), null, timeout()));
            }
            for (CompletableFuture<RdmaConnection> f : fs) {
                try {
                    up.add(f.join());
                } catch (RuntimeException e) {
                    if (failed.getAndIncrement() == 0) {
                        out.println("first failure: " + e);
                    }
                }
            }
        } else {
            ConcurrentLinkedQueue<RdmaConnection> q = new ConcurrentLinkedQueue<>();
            try (ExecutorService ex = threadsFor()) {
                for (int i = 0; i < connections; i++) {
                    ex.execute(() -> {
                        try {
                            q.add(RdmaConnection.connect(channel, remote, setup(), null, timeout()));
                        } catch (RuntimeException e) {
                            if (failed.getAndIncrement() == 0) {
                                out.println("first failure: " + e);
                            }
                        }
                    });
                }
            }
            up.addAll(q);
        }
        long took = System.nanoTime() - t0;
        report("active", up.size(), failed.get(), took);
        long c0 = System.nanoTime();
        for (RdmaConnection c : up) {
            c.disconnect();
        }
        for (RdmaConnection c : up) {
            c.close();
        }
        out.printf("%s active: disconnected and closed in %.1f ms%n", label(), (System.nanoTime() - c0) / 1e6);
        return failed.get() == 0 ? 0 : 1;
    }

    /** One passive round: the -c connections of one run of the peer, from its first request to the last established. */
    private static final class Round {
        final AtomicLong first = new AtomicLong();
        final AtomicLong last = new AtomicLong();
        final AtomicInteger ok = new AtomicInteger();
        final AtomicInteger failed = new AtomicInteger();
        final CountDownLatch settled;
        final CountDownLatch closed;
        final ConcurrentLinkedQueue<RdmaConnection> all = new ConcurrentLinkedQueue<>();

        Round(int n) {
            settled = new CountDownLatch(n);
            closed = new CountDownLatch(n);
        }
    }

    private int passive(CmEventChannel channel) throws Exception {
        InetSocketAddress local = new InetSocketAddress(InetAddress.getByName(bind), port);
        Round[] rs = new Round[rounds];
        for (int i = 0; i < rounds; i++) {
            rs[i] = new Round(connections);
        }
        AtomicInteger requests = new AtomicInteger();
        ExecutorService ex = api.equals("blocking") ? threadsFor() : null;
        int failedAll = 0;
        try (CmListener listener = CmListener.bind(channel, local, Math.max(connections, 128))) {
            listener.onRequest(r -> {
                int i = requests.getAndIncrement() / connections; // the peer's runs come one after another
                if (i >= rounds) {
                    r.reject(null); // more than asked for: not part of this run
                    return;
                }
                Round round = rs[i];
                if (round.first.compareAndSet(0, System.nanoTime())) {
                    roundBegins(i);
                }
                if (ex == null) {
                    r.acceptAsync(setup(), null, timeout()).whenComplete((c, x) -> accepted(c, x, round));
                } else {
                    ex.execute(() -> {
                        RdmaConnection c = null;
                        Throwable x = null;
                        try {
                            c = r.accept(setup(), null, timeout());
                        } catch (RuntimeException e) {
                            x = e;
                        }
                        accepted(c, x, round);
                    });
                }
            });
            out.println(label() + " passive: listening on " + listener.localAddress() + " for " + connections
                    + " connections" + (rounds > 1 ? " in each of " + rounds + " rounds" : ""));
            out.flush();
            for (Round round : rs) {
                round.settled.await();
                report("passive", round.ok.get(), round.failed.get(), round.last.get() - round.first.get());
                out.flush();
                if (!round.closed.await(timeoutSeconds, TimeUnit.SECONDS)) {
                    out.println(label() + " passive: " + round.closed.getCount()
                            + " connections not disconnected by the peer");
                }
                closeAll(round.all);
                failedAll += round.failed.get();
            }
        } finally {
            for (Round round : rs) {
                closeAll(round.all);
            }
            if (ex != null) {
                ex.shutdown();
            }
        }
        return failedAll == 0 ? 0 : 1;
    }

    private static void closeAll(ConcurrentLinkedQueue<RdmaConnection> all) {
        for (RdmaConnection c; (c = all.poll()) != null; ) {
            c.close();
        }
    }

    private void accepted(RdmaConnection c, Throwable x, Round round) {
        if (x != null) {
            if (round.failed.getAndIncrement() == 0) {
                out.println("first failure: " + x);
            }
            round.closed.countDown();
        } else {
            round.ok.incrementAndGet();
            round.last.accumulateAndGet(System.nanoTime(), Math::max);
            round.all.add(c);
            AtomicBoolean down = new AtomicBoolean();
            c.onEvent((conn, e) -> {
                if (e.type() == CmEventType.DISCONNECTED && down.compareAndSet(false, true)) {
                    round.closed.countDown();
                }
            });
            if (c.state().isDown() && down.compareAndSet(false, true)) { // disconnected before the callback was set
                round.closed.countDown();
            }
        }
        round.settled.countDown();
    }
}
