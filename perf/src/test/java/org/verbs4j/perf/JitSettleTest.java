package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The JIT-idle wait of verbs-perf --batch --settle and the CPU-time readings around a loop: the /proc
 * parsing over a task directory the test writes, and the wait's decisions over a clock and a CPU
 * counter the test drives. Nothing here depends on how much CPU the machine gives the test.
 */
class JitSettleTest {

    /** A /proc stat line of a thread named {@code comm} with {@code utime} and {@code stime} ticks. */
    private static String stat(int tid, String comm, long utime, long stime) {
        // fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        return tid + " (" + comm + ") S 1 1 1 0 -1 4194368 100 0 0 0 " + utime + " " + stime + " 0 0 20 0 30 0";
    }

    private static void task(Path dir, int tid, String comm, long utime, long stime) throws Exception {
        Path t = Files.createDirectories(dir.resolve(Integer.toString(tid)));
        Files.writeString(t.resolve("comm"), comm + "\n");
        Files.writeString(t.resolve("stat"), stat(tid, comm, utime, stime));
    }

    @Test
    void cpuTicksAreUtimePlusStimeEvenWhenTheThreadNameHoldsSpacesAndParentheses() {
        assertEquals(1290, JitSettle.cpuTicks(stat(4242, "C2 CompilerThre", 1234, 56)));
        assertEquals(7, JitSettle.cpuTicks("7 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0"));
        assertArrayEquals(new long[] {12340, 560}, JitSettle.userSystemMillis(stat(1, "main", 1234, 56)));
    }

    @Test
    void threadsAreCountedByNameWithoutTheirNumberAndTheSkippedTaskIsLeftOut(@TempDir Path tasks) throws Exception {
        task(tasks, 100, "main", 500, 20);
        task(tasks, 101, "C2 CompilerThre", 30, 1);
        task(tasks, 102, "C1 CompilerThre", 10, 2);
        task(tasks, 103, "GC Thread#0", 4, 0);
        task(tasks, 104, "GC Thread#1", 5, 1);
        task(tasks, 105, "busy-other#7", 8, 0);
        Map<String, Long> all = JitSettle.threadMillis(tasks, "100");
        assertEquals(
                Map.of("C2 CompilerThre", 310L, "C1 CompilerThre", 120L, "GC Thread", 100L, "busy-other", 80L), all);
        assertFalse(all.containsKey("main"), "the skipped task (the caller) is not counted");
        assertEquals(430, JitSettle.compilerMillis(all), "only the C1 and C2 compiler threads");
        assertEquals(5200, JitSettle.threadMillis(tasks, null).get("main"));
    }

    @Test
    void theDeltaNamesWhatGrewAndSaysNoneWhenNothingDid() {
        Map<String, Long> before = Map.of("C2 CompilerThre", 100L, "GC Thread", 40L);
        Map<String, Long> after = Map.of("C2 CompilerThre", 130L, "GC Thread", 40L, "VM Periodic Tas", 10L);
        assertEquals(
                "40 ms (C2 CompilerThre 30 ms, VM Periodic Tas 10 ms)",
                JitSettle.otherThreadsDelta(new java.util.TreeMap<>(before), new java.util.TreeMap<>(after)));
        assertEquals("none", JitSettle.otherThreadsDelta(after, after));
    }

    @Test
    void aThreadThatEndsWhileTheDirectoryIsReadIsSkipped(@TempDir Path tasks) throws Exception {
        task(tasks, 1, "main", 1, 0);
        Files.createDirectories(tasks.resolve("2")); // its comm and stat are gone
        assertEquals(Map.of("main", 10L), JitSettle.threadMillis(tasks, null));
    }

    @Test
    void theWaitEndsInTheFirstQuietWindow() throws Exception {
        AtomicLong clock = new AtomicLong();
        AtomicLong cpu = new AtomicLong();
        long[] growth = {300, 120, 10, 500}; // ms of compiler CPU per window: the third window is quiet
        int[] window = {0};
        String said = JitSettle.await(Duration.ofSeconds(30), cpu::get, clock::get, ms -> {
            clock.addAndGet(ms * 1_000_000);
            cpu.addAndGet(growth[window[0]++]);
        });
        assertEquals("JIT idle after 1.5 s", said);
        assertEquals(3, window[0]);
    }

    @Test
    void theWaitEndsAtItsBoundWhileTheCompilerStaysBusy() throws Exception {
        AtomicLong clock = new AtomicLong();
        AtomicLong cpu = new AtomicLong();
        int[] windows = {0};
        String said = JitSettle.await(Duration.ofSeconds(2), cpu::get, clock::get, ms -> {
            clock.addAndGet(ms * 1_000_000);
            cpu.addAndGet(200);
            windows[0]++;
        });
        assertEquals("JIT still compiling after 2.5 s (bound); going on", said);
        assertEquals(5, windows[0], "the window that ends past the bound is the last");
    }

    @Test
    void thisJvmsCompilerThreadsAreFound() throws Exception {
        Path tasks = Path.of("/proc/self/task");
        if (!Files.isDirectory(tasks)) {
            assertTrue(JitSettle.otherThreadsMillis().isEmpty());
            assertTrue(JitSettle.await(Duration.ofSeconds(1)).startsWith("no /proc/self/task"));
            return;
        }
        Map<String, Long> all = JitSettle.threadMillis(tasks, null);
        assertTrue(
                all.containsKey("C1 CompilerThre") || all.containsKey("C2 CompilerThre"),
                "a JVM with the JIT on has C1/C2 compiler threads under /proc/self/task: " + all.keySet());
        assertTrue(JitSettle.compilerMillis() >= 0);
    }
}
