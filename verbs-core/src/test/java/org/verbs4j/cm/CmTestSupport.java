package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.verbs4j.CompletionQueue;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.RdmaTestSupport;

/** Helpers of the connection-manager guest tests: the guest's address, fresh ports, {@code rdma res show}, bounded polls. */
final class CmTestSupport {
    static final Duration WAIT = Duration.ofSeconds(20);
    /**
     * Threads for the connects and accepts a test runs beside its own thread: never the common pool,
     * whose one worker on a two-CPU guest would make each such task wait for the one before.
     */
    static final java.util.concurrent.ExecutorService ASYNC = java.util.concurrent.Executors.newCachedThreadPool(
            Thread.ofPlatform().daemon().name("cm-test-", 0).factory());

    private static final AtomicInteger PORT =
            new AtomicInteger(20_000 + (int) (ProcessHandle.current().pid() % 20_000));

    private CmTestSupport() {}

    static InetAddress ip() {
        try {
            return InetAddress.getByName(RdmaTestSupport.guestIp());
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    /** A port no other test of this JVM used. */
    static int port() {
        return PORT.getAndIncrement();
    }

    static InetSocketAddress address(int port) {
        return new InetSocketAddress(ip(), port);
    }

    /** Polls exactly {@code n} completions within {@link #WAIT}. */
    static WorkCompletions poll(CompletionQueue cq, WorkCompletions wcs, int n) {
        assertEquals(n, cq.poll(wcs, n, WAIT), "completions within " + WAIT);
        return wcs;
    }

    /**
     * The InfiniBand CM carries private data in fixed-size fields (a request 56 bytes after
     * librdmacm's header, an accept 196, a reject 148): the receiver sees what was sent, then zeros.
     */
    static void assertPrivateData(byte[] sent, byte[] received) {
        org.junit.jupiter.api.Assertions.assertTrue(
                received.length >= sent.length,
                "received " + received.length + " bytes of private data, sent " + sent.length);
        org.junit.jupiter.api.Assertions.assertArrayEquals(sent, java.util.Arrays.copyOf(received, sent.length));
        for (int i = sent.length; i < received.length; i++) {
            assertEquals(0, received[i], "padding byte " + i);
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** {@code rdma res show} counts of the test device: {pd=1, cq=2, qp=1, cm_id=0, mr=0, ctx=1, srq=0}. */
    static Map<String, Integer> counts() {
        String out = run(List.of("rdma", "res", "show"), 20);
        for (String line : out.split("\n")) {
            String[] t = line.trim().split("\\s+");
            if (t.length >= 3 && t[1].equals(RdmaTestSupport.deviceName() + ":")) {
                Map<String, Integer> m = new HashMap<>();
                for (int i = 2; i + 1 < t.length; i += 2) {
                    m.put(t[i], Integer.parseInt(t[i + 1]));
                }
                return m;
            }
        }
        throw new AssertionError("no line for the device in `rdma res show`:\n" + out);
    }

    /** The counts that matter for leaks here: cm ids, queue pairs, completion queues, memory regions. */
    static Map<String, Integer> leakCounts() {
        Map<String, Integer> c = counts();
        Map<String, Integer> m = new HashMap<>();
        for (String k : List.of("cm_id", "qp", "cq", "mr")) {
            m.put(k, c.getOrDefault(k, 0));
        }
        return m;
    }

    /**
     * The cm ids, QPs, CQs and MRs that process {@code pid} holds ({@code rdma res show KIND}, its
     * lines with {@code pid PID}): what one side of a two-JVM test still holds.
     */
    static Map<String, Integer> countsOf(long pid) {
        java.util.regex.Pattern mine = java.util.regex.Pattern.compile("\\bpid " + pid + "\\b");
        Map<String, Integer> m = new HashMap<>();
        for (String k : List.of("cm_id", "qp", "cq", "mr")) {
            m.put(k, (int) run(List.of("rdma", "res", "show", k), 20)
                    .lines()
                    .filter(l -> mine.matcher(l).find())
                    .count());
        }
        return m;
    }

    static String run(List<String> cmd, int seconds) {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            p.getOutputStream().close();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError(String.join(" ", cmd) + " did not finish within " + seconds + " s");
            }
            return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new AssertionError(String.join(" ", cmd) + " could not run", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Polls {@code s} until it gives a value, for at most {@link #WAIT}; {@code what} names it in the failure. */
    static <T> T within(java.util.function.Supplier<T> s, String what) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            T v = s.get();
            if (v != null) {
                return v;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
        throw new AssertionError(what + " did not happen within " + WAIT);
    }
}
