package org.verbs4j.bench.perf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.stream.Stream;

/**
 * Waits, before a timed run, until this JVM's JIT compiler threads have gone (nearly) idle:
 * their CPU time, read from {@code /proc/self/task/TID/stat} (threads named {@code C1/C2
 * CompilerThre...}), grows by at most 2% of the wall time over a half-second window. No traffic
 * and no work of verbs-perf's own happens meanwhile, so a peer that is a C program (perftest,
 * whose code was compiled before it started) and verbs-perf start their runs on equal terms: in
 * a TCG guest the JVM compiles for tens of seconds after its start, on the CPU the measured thread
 * is pinned to (a profile of a write_bw run 16-21 s after the start: 16% of that CPU in the
 * compiler threads, 3% in the compiled loop). Bounded by {@code max}; Linux only (elsewhere it
 * returns at once). One thread.
 */
public final class JitSettle {
    private static final Path TASKS = Path.of("/proc/self/task");
    private static final long WINDOW_MS = 500;
    /** USER_HZ: the unit of utime/stime in /proc, 100 on Linux. */
    private static final long MS_PER_TICK = 10;

    private JitSettle() {
    }

    /** Waits as described; returns what happened, in words, for the log. */
    public static String await(Duration max) throws InterruptedException {
        if (!Files.isDirectory(TASKS)) {
            return "no /proc/self/task: not waiting for the JIT";
        }
        long start = System.nanoTime();
        long deadline = start + max.toNanos();
        long before = compilerMillis();
        while (true) {
            Thread.sleep(WINDOW_MS);
            long now = System.nanoTime();
            long after = compilerMillis();
            // at most 2% of the window (10 ms of 500, one tick)
            if (after - before <= WINDOW_MS / 50) {
                return String.format(java.util.Locale.ROOT, "JIT idle after %.1f s", (now - start) / 1e9);
            }
            if (now - deadline > 0) {
                return String.format(java.util.Locale.ROOT, "JIT still compiling after %.1f s (bound); going on",
                        (now - start) / 1e9);
            }
            before = after;
        }
    }

    /** The user + system CPU time of the JIT compiler threads, in milliseconds (10 ms steps). */
    public static long compilerMillis() {
        long sum = 0;
        try (Stream<Path> tasks = Files.list(TASKS)) {
            for (Path t : tasks.toList()) {
                try {
                    String comm = Files.readString(t.resolve("comm")).strip();
                    if (!comm.startsWith("C1 CompilerThre") && !comm.startsWith("C2 CompilerThre")) {
                        continue;
                    }
                    sum += cpuTicks(Files.readString(t.resolve("stat")));
                } catch (IOException gone) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException e) {
            return 0;
        }
        return sum * MS_PER_TICK;
    }

    /** utime + stime (fields 14 and 15) of a {@code /proc/.../stat} line; the name may hold spaces. */
    static long cpuTicks(String stat) {
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(f[11]) + Long.parseLong(f[12]); // f[0] is field 3 (state)
    }
}
