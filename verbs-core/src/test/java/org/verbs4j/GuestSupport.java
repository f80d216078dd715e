package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/** Helpers of the guest-tier tests: bounded waits, patterns, connecting extra queue pairs, {@code rdma res show}. */
final class GuestSupport {
    /** The bound on every wait for a completion. */
    static final Duration WAIT = Duration.ofSeconds(10);

    private GuestSupport() {}

    /**
     * Polls exactly {@code n} completions (bounded by {@link #WAIT}) into {@code wcs} and asserts that
     * each succeeded; returns {@code wcs}.
     */
    static WorkCompletions awaitSuccess(CompletionQueue cq, WorkCompletions wcs, int n) {
        awaitAny(cq, wcs, n);
        for (int i = 0; i < n; i++) {
            assertEquals(
                    CompletionStatus.SUCCESS,
                    wcs.status(i),
                    "completion " + i + " (wr_id " + wcs.wrId(i) + "): " + wcs.statusText(i) + ", vendor error "
                            + wcs.vendorError(i));
        }
        return wcs;
    }

    /** Polls exactly {@code n} completions (bounded by {@link #WAIT}) into {@code wcs}, whatever their status. */
    static WorkCompletions awaitAny(CompletionQueue cq, WorkCompletions wcs, int n) {
        int got = cq.poll(wcs, n, WAIT);
        assertEquals(n, got, "completions within " + WAIT);
        return wcs;
    }

    /** Fills {@code s} with a pattern that differs per {@code seed} and per byte. */
    static void pattern(MemorySegment s, int seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(JAVA_BYTE, i, (byte) (seed * 31 + i * 7 + (i >>> 8)));
        }
    }

    /** Asserts that {@code actual} holds the same bytes as {@code expected}, naming the first difference. */
    static void assertSameBytes(MemorySegment expected, MemorySegment actual, String what) {
        assertEquals(expected.byteSize(), actual.byteSize(), what + ": length");
        long at = expected.mismatch(actual);
        if (at >= 0) {
            fail(what + ": first difference at byte " + at + " of " + expected.byteSize() + ": expected "
                    + expected.get(JAVA_BYTE, at) + ", got " + actual.get(JAVA_BYTE, at));
        }
    }

    /** Asserts that every byte of {@code s} is {@code value}. */
    static void assertAll(MemorySegment s, byte value, String what) {
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(JAVA_BYTE, i) != value) {
                fail(what + ": byte " + i + " is " + s.get(JAVA_BYTE, i) + ", not " + value);
            }
        }
    }

    /** Connects two RC/UC queue pairs of one device to each other (RESET to RTS) through {@code gid}. */
    static void connect(QueuePair x, QueuePair y, GidEntry gid, Set<Access> remoteAccess) {
        connect(x, y, gid, remoteAccess, ConnectOptions.roce(gid.index()));
    }

    static void connect(QueuePair x, QueuePair y, GidEntry gid, Set<Access> remoteAccess, ConnectOptions o) {
        x.toInit(1, remoteAccess);
        y.toInit(1, remoteAccess);
        QueuePairEndpoint ex = x.localEndpoint(gid.index(), 300);
        QueuePairEndpoint ey = y.localEndpoint(gid.index(), 400);
        x.toRtr(ey, o);
        y.toRtr(ex, o);
        x.toRts(ex.psn(), o);
        y.toRts(ey.psn(), o);
    }

    /** Closes each (nulls skipped) in order, collecting failures onto the first. */
    static void closeAll(AutoCloseable... all) {
        RuntimeException first = null;
        for (AutoCloseable c : all) {
            if (c == null) {
                continue;
            }
            try {
                c.close();
            } catch (Exception e) {
                if (first == null) {
                    first = e instanceof RuntimeException r ? r : new IllegalStateException(e);
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    // ---- rdma res show ----------------------------------------------------------------------

    /**
     * The per-device resource counts of {@code rdma res show} for {@code device}, e.g.
     * {@code {pd=1, cq=2, qp=1, cm_id=0, mr=0, ctx=0, srq=0}} from
     * {@code 0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0 srq 0}. Bounded (20 s).
     */
    static Map<String, Integer> resourceCounts(String device) {
        String out = run(List.of("rdma", "res", "show"));
        for (String line : out.split("\n")) {
            String[] t = line.trim().split("\\s+");
            if (t.length >= 3 && t[1].equals(device + ":")) {
                Map<String, Integer> counts = new HashMap<>();
                for (int i = 2; i + 1 < t.length; i += 2) {
                    counts.put(t[i], Integer.parseInt(t[i + 1]));
                }
                return counts;
            }
        }
        throw new AssertionError("no line for " + device + " in `rdma res show`:\n" + out);
    }

    private static String run(List<String> cmd) {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            p.getOutputStream().close();
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError(String.join(" ", cmd) + " did not finish within 20 s");
            }
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (p.exitValue() != 0) {
                throw new AssertionError(String.join(" ", cmd) + " exited with " + p.exitValue() + ":\n" + out);
            }
            return out;
        } catch (IOException e) {
            throw new AssertionError(String.join(" ", cmd) + " could not run", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", e);
        }
    }
}
