package org.verbs4j.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The guest tier's leak report. Created (with a baseline {@code rdma res show}) the first time an
 * {@link RdmaTest} is about to run in the guest, and closed by JUnit when all Jupiter tests of the
 * JVM have run, while the JVM is still alive: it then prints {@code rdma res show}, the counts
 * that grew since the baseline, and every user-space rdma resource (ctx, pd, cq, qp, mr, srq,
 * cm_id) still held. In the guest the test JVM is the only user-space process, so anything listed
 * is most likely a leak of the tests or of verbs4j. (The kernel's restrack names the creating
 * <em>thread</em>, so the {@code pid} shown is a JVM thread id, not the JVM's pid.)
 * Report only: it fails nothing.
 *
 * <p>{@link RdmaDeviceCondition} puts the one instance into the root extension store, in the guest
 * only ({@code VERBS4J_GUEST=1}); JUnit closes it when the engine finishes.
 */
final class RdmaResourceReport implements AutoCloseable {
    private static final List<String> KINDS = List.of("ctx", "pd", "cq", "qp", "mr", "srq", "cm_id");

    private final String baseline;

    RdmaResourceReport() {
        baseline = run(List.of("rdma", "res", "show"));
    }

    @Override
    public void close() {
        String after = run(List.of("rdma", "res", "show"));
        StringBuilder out = new StringBuilder();
        out.append("===== rdma resources after all tests (test JVM pid ")
                .append(ProcessHandle.current().pid())
                .append(" still alive) =====\n");
        out.append("before the first @RdmaTest: ").append(baseline.strip()).append('\n');
        out.append("after all tests:            ").append(after.strip()).append('\n');
        Map<String, Long> before = counts(baseline);
        StringBuilder grew = new StringBuilder();
        counts(after).forEach((k, v) -> {
            long b = before.getOrDefault(k, 0L);
            if (v > b) {
                grew.append(' ').append(k).append(" +").append(v - b);
            }
        });
        StringBuilder held = new StringBuilder();
        for (String kind : KINDS) {
            for (String line : run(List.of("rdma", "res", "show", kind)).split("\n")) {
                if (line.contains(" pid ")) {
                    held.append("  ")
                            .append(kind)
                            .append(": ")
                            .append(line.strip())
                            .append('\n');
                }
            }
        }
        out.append(
                grew.isEmpty()
                        ? "rdma resource counts: no growth\n"
                        : "rdma resource counts grew (possible leak):" + grew + "\n");
        out.append(
                held.isEmpty()
                        ? "user-space rdma resources still held: none\n"
                        : "user-space rdma resources still held (possible leaks):\n" + held);
        System.out.print(out);
        System.out.flush();
    }

    /** "0: rxe0: pd 1 cq 1 qp 1 ..." lines to {"rxe0 pd": 1, ...}. */
    private static Map<String, Long> counts(String summary) {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String line : summary.split("\n")) {
            String[] t = line.strip().split("\\s+");
            if (t.length < 4 || !t[0].endsWith(":") || !t[1].endsWith(":")) {
                continue;
            }
            String dev = t[1].substring(0, t[1].length() - 1);
            for (int i = 2; i + 1 < t.length; i += 2) {
                try {
                    m.put(dev + " " + t[i], Long.parseLong(t[i + 1]));
                } catch (NumberFormatException e) {
                    // not a count
                }
            }
        }
        return m;
    }

    private static String run(List<String> cmd) {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            p.getOutputStream().close();
            byte[] out = p.getInputStream().readAllBytes();
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
            return new String(out, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(" + String.join(" ", cmd) + " failed: " + e + ")\n";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "(interrupted)\n";
        }
    }
}
