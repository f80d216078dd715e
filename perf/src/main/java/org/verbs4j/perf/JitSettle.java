package org.verbs4j.perf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.function.LongSupplier;
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

    private JitSettle() {}

    /** Waits as described; returns what happened, in words, for the log. */
    public static String await(Duration max) throws InterruptedException {
        if (!Files.isDirectory(TASKS)) {
            return "no /proc/self/task: not waiting for the JIT";
        }
        return await(max, JitSettle::compilerMillis, System::nanoTime, Thread::sleep);
    }

    /** Sleeps for a number of milliseconds; {@link Thread#sleep(long)} but for tests. */
    interface Sleeper {
        void sleep(long millis) throws InterruptedException;
    }

    /**
     * The wait itself, over a source of the compiler threads' CPU milliseconds, a nanosecond clock and
     * a sleep: half-second windows until one in which the compiler's CPU grew by at most
     * 2% of the window, or until the window that ends past {@code max}.
     */
    static String await(Duration max, LongSupplier compilerMillis, LongSupplier nanoClock, Sleeper sleeper)
            throws InterruptedException {
        long start = nanoClock.getAsLong();
        long deadline = start + max.toNanos();
        long before = compilerMillis.getAsLong();
        while (true) {
            sleeper.sleep(WINDOW_MS);
            long now = nanoClock.getAsLong();
            long after = compilerMillis.getAsLong();
            // at most 2% of the window (10 ms of 500, one tick)
            if (after - before <= WINDOW_MS / 50) {
                return String.format(java.util.Locale.ROOT, "JIT idle after %.1f s", (now - start) / 1e9);
            }
            if (now - deadline > 0) {
                return String.format(
                        java.util.Locale.ROOT,
                        "JIT still compiling after %.1f s (bound); going on",
                        (now - start) / 1e9);
            }
            before = after;
        }
    }

    /** The user + system CPU time of the JIT compiler threads, in milliseconds (10 ms steps). */
    public static long compilerMillis() {
        return compilerMillis(threadMillis(TASKS, null));
    }

    /** The sum of the compiler threads' entries ({@code C1 CompilerThre}, {@code C2 CompilerThre}) of a by-name map. */
    static long compilerMillis(java.util.Map<String, Long> byName) {
        long sum = 0;
        for (var e : byName.entrySet()) {
            if (e.getKey().startsWith("C1 CompilerThre") || e.getKey().startsWith("C2 CompilerThre")) {
                sum += e.getValue();
            }
        }
        return sum;
    }

    /**
     * The CPU time of this JVM's threads other than the caller, in milliseconds (10 ms steps), by
     * thread name with its number dropped ({@code C2 CompilerThre}, {@code GC Thread}, {@code VM
     * Periodic Tas}, ...): read before and after a timed loop, the difference is what the JVM ran
     * beside the loop, on the CPU the loop is pinned to. Empty where there is no /proc.
     */
    public static java.util.Map<String, Long> otherThreadsMillis() {
        try {
            return threadMillis(
                    TASKS,
                    Files.readSymbolicLink(Path.of("/proc/thread-self"))
                            .getFileName()
                            .toString());
        } catch (IOException | UnsupportedOperationException e) {
            return new java.util.TreeMap<>();
        }
    }

    /**
     * CPU milliseconds of the threads under {@code taskDir} (a {@code /proc/PID/task}: one directory per
     * thread with its {@code comm} and {@code stat}) by name, its number dropped; {@code skip}: a task id
     * left out (or null).
     */
    static java.util.Map<String, Long> threadMillis(Path taskDir, String skip) {
        java.util.Map<String, Long> byName = new java.util.TreeMap<>();
        try (Stream<Path> tasks = Files.list(taskDir)) {
            for (Path t : tasks.toList()) {
                if (t.getFileName().toString().equals(skip)) {
                    continue;
                }
                try {
                    String name = Files.readString(t.resolve("comm"))
                            .strip()
                            .replaceAll("[#\\d]+$", "")
                            .strip();
                    byName.merge(name, cpuTicks(Files.readString(t.resolve("stat"))) * MS_PER_TICK, Long::sum);
                } catch (IOException gone) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException e) {
            return byName;
        }
        return byName;
    }

    /** What {@link #otherThreadsMillis} grew by between two readings, in words ("none" when nothing). */
    public static String otherThreadsDelta(java.util.Map<String, Long> before, java.util.Map<String, Long> after) {
        StringBuilder b = new StringBuilder();
        long total = 0;
        for (var e : after.entrySet()) {
            long d = e.getValue() - before.getOrDefault(e.getKey(), 0L);
            if (d > 0) {
                total += d;
                b.append(b.isEmpty() ? "" : ", ")
                        .append(e.getKey())
                        .append(' ')
                        .append(d)
                        .append(" ms");
            }
        }
        return total == 0 ? "none" : total + " ms (" + b + ")";
    }

    /**
     * The calling thread's own user and system CPU time, in milliseconds (10 ms steps): read
     * around a timed loop, the split says how much of the loop ran in the JVM (polling, building
     * requests) and how much in the kernel (under Soft-RoCE the verbs' system calls do the
     * provider's protocol work). {0, 0} where there is no /proc.
     */
    public static long[] ownUserSystemMillis() {
        try {
            return userSystemMillis(Files.readString(Path.of("/proc/thread-self/stat")));
        } catch (IOException | RuntimeException e) {
            return new long[2];
        }
    }

    /** {user, system} milliseconds (utime and stime, fields 14 and 15) of a {@code /proc/.../stat} line. */
    static long[] userSystemMillis(String stat) {
        String[] f = fields(stat);
        return new long[] {Long.parseLong(f[11]) * MS_PER_TICK, Long.parseLong(f[12]) * MS_PER_TICK};
    }

    private static String[] fields(String stat) {
        return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    }

    /** utime + stime (fields 14 and 15) of a {@code /proc/.../stat} line; the name may hold spaces. */
    static long cpuTicks(String stat) {
        String[] f = fields(stat);
        return Long.parseLong(f[11]) + Long.parseLong(f[12]); // f[0] is field 3 (state)
    }
}
