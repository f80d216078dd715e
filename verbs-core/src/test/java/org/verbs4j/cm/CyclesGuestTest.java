package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;

/**
 * Connect/disconnect cycles in one JVM (both ends through the public API): the kernel's counts of
 * cm ids, QPs, CQs and MRs and the resident set outside the Java heap end where they started;
 * the connects per second are printed next to librdmacm's own {@code cmtime} run in the same guest
 * boot. {@code -Dverbs4j.cmCycles} (default 20 in CI; the 1,000 figure is measured with 1000).
 */
@RdmaTest
class CyclesGuestTest {
    private static final int CYCLES = Integer.getInteger("verbs4j.cmCycles", 20);
    /** jcmd under TCG takes seconds: native memory tracking is read only for the long run. */
    private static final boolean MEASURE_NMT = CYCLES >= 100;

    @Test
    void connectDisconnectCyclesEndAtTheBaseline() throws Exception {
        try (CmEventChannel ch = CmEventChannel.open()) {
            int port = CmTestSupport.port();
            try (CmListener l = CmListener.bind(ch, address(port), 16)) {
                for (int i = 0; i < 5; i++) { // warm up: JIT, the library's per-device PD, malloc
                    cycle(ch, l, port);
                }
                settle();
                Map<String, Integer> before = CmTestSupport.leakCounts();
                long[] nmt0 = MEASURE_NMT ? nmtKb() : new long[] {-1, -1, -1};
                long rss0 = rssKb(), heap0 = heapKb();
                phases = new long[3];
                long t0 = System.nanoTime();
                for (int i = 0; i < CYCLES; i++) {
                    cycle(ch, l, port);
                }
                double seconds = (System.nanoTime() - t0) / 1e9;
                System.out.printf(
                        "CyclesGuestTest: per cycle: connect+accept %.1f ms, disconnect until the peer saw it %.1f ms, "
                                + "close both %.1f ms%n",
                        phases[0] / 1e6 / CYCLES, phases[1] / 1e6 / CYCLES, phases[2] / 1e6 / CYCLES);
                settle();
                long rss1 = rssKb(), heap1 = heapKb();
                long[] nmt1 = MEASURE_NMT ? nmtKb() : new long[] {-1, -1, -1};
                Map<String, Integer> after = CmTestSupport.leakCounts();
                System.out.printf(
                        "CyclesGuestTest: NMT committed: total %d -> %d KiB, Other (malloc of the arenas) %d -> %d KiB, "
                                + "Internal %d -> %d KiB%n",
                        nmt0[0], nmt1[0], nmt0[1], nmt1[1], nmt0[2], nmt1[2]);
                if (nmt0[1] >= 0 && nmt1[1] >= 0) {
                    assertTrue(nmt1[1] - nmt0[1] < 1024, "NMT Other grew by " + (nmt1[1] - nmt0[1]) + " KiB");
                }
                System.out.printf(
                        "CyclesGuestTest: %d connect/accept/disconnect/close cycles in %.1f s: %.1f connects/s "
                                + "(%.1f ms per cycle); rdma res %s -> %s; RSS %d -> %d KiB, Java heap committed %d -> %d KiB%n",
                        CYCLES,
                        seconds,
                        CYCLES / seconds,
                        seconds * 1000 / CYCLES,
                        before,
                        after,
                        rss0,
                        rss1,
                        heap0,
                        heap1);
                assertEquals(before, after, "kernel cm ids, QPs, CQs, MRs back at the baseline");
                long nonHeap = (rss1 - rss0) - (heap1 - heap0);
                assertTrue(nonHeap < 16 * 1024, "resident memory outside the Java heap grew by " + nonHeap + " KiB");
            }
        }
        cmtime();
    }

    /** Nanoseconds spent in: connect+accept, disconnect until the peer saw it, closing both. */
    private static long[] phases = new long[3];

    private static void cycle(CmEventChannel ch, CmListener l, int port) throws Exception {
        long t0 = System.nanoTime();
        CompletableFuture<RdmaConnection> s = CompletableFuture.supplyAsync(
                () -> l.accept(WAIT).accept(new ConnectionSetup().maxSendWr(16).maxRecvWr(16), null, WAIT));
        RdmaConnection c = RdmaConnection.connect(
                ch, address(port), new ConnectionSetup().maxSendWr(16).maxRecvWr(16), null, WAIT);
        RdmaConnection p = s.get(30, TimeUnit.SECONDS);
        long t1 = System.nanoTime();
        c.disconnect();
        assertTrue(p.awaitDisconnect(Duration.ofSeconds(10)), "the peer saw no disconnect: " + p.state());
        long t2 = System.nanoTime();
        c.close();
        p.close();
        long t3 = System.nanoTime();
        phases[0] += t1 - t0;
        phases[1] += t2 - t1;
        phases[2] += t3 - t2;
    }

    /** librdmacm's own cmtime, 100 connections, in this guest boot: its per-step times for the report. */
    private static void cmtime() throws Exception {
        if (!Files.isExecutable(Path.of("/usr/bin/cmtime"))) {
            System.out.println("CyclesGuestTest: cmtime is not installed here");
            return;
        }
        String ip = CmTestSupport.ip().getHostAddress();
        String port = Integer.toString(CmTestSupport.port());
        Path serverLog = Files.createTempFile("cmtime-server", ".log");
        Process server = new ProcessBuilder("cmtime", "-b", ip, "-p", port, "-c", "100")
                .redirectErrorStream(true)
                .redirectOutput(serverLog.toFile())
                .start();
        try {
            Thread.sleep(2000);
            String client = CmTestSupport.run(
                    List.of("sh", "-c", "cmtime -s " + ip + " -p " + port + " -c 100 2>&1; echo \"exit $?\""), 120);
            System.out.println("CyclesGuestTest: cmtime -s " + ip + " -c 100 (same guest boot):\n" + client);
        } finally {
            server.destroy();
            if (!server.waitFor(5, TimeUnit.SECONDS)) {
                server.destroyForcibly();
            }
            System.out.println("CyclesGuestTest: cmtime -b said:\n" + Files.readString(serverLog));
            Files.deleteIfExists(serverLog);
        }
    }

    private static void settle() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
    }

    /** NMT's committed KiB: {total, Other, Internal} of this JVM, or -1s where NMT is off or jcmd is missing. */
    private static long[] nmtKb() throws IOException, InterruptedException {
        long[] r = {-1, -1, -1};
        Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
        if (!Files.isExecutable(jcmd)) {
            return r;
        }
        String out = CmTestSupport.run(
                List.of(jcmd.toString(), Long.toString(ProcessHandle.current().pid()), "VM.native_memory", "summary"),
                120);
        String[] names = {
            "Total: reserved=\\d+KB, committed=(\\d+)KB",
            "Other \\(reserved=\\d+KB, committed=(\\d+)KB\\)",
            "Internal \\(reserved=\\d+KB, committed=(\\d+)KB\\)"
        };
        for (int i = 0; i < names.length; i++) {
            java.util.regex.Matcher m =
                    java.util.regex.Pattern.compile(names[i]).matcher(out);
            if (m.find()) {
                r[i] = Long.parseLong(m.group(1));
            }
        }
        return r;
    }

    private static long heapKb() {
        return Runtime.getRuntime().totalMemory() / 1024; // the committed heap
    }

    private static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("\\D+", ""));
            }
        }
        return -1;
    }
}
