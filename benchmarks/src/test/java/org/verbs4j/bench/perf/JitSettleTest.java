package org.verbs4j.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The JIT-idle wait of verbs-perf --batch --settle: its /proc parsing, and that it is bounded. */
class JitSettleTest {

    @Test
    void cpuTicksAreUtimePlusStimeEvenWhenTheThreadNameHoldsSpacesAndParentheses() {
        // fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        String stat = "4242 (C2 CompilerThre) S 1 4242 4242 0 -1 4194368 100 0 0 0 1234 56 0 0 20 0 30 0";
        assertEquals(1290, JitSettle.cpuTicks(stat));
        assertEquals(7, JitSettle.cpuTicks("7 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0"));
    }

    @Test
    void otherThreadsCpuCountsEveryThreadButTheCallerByNameWithoutItsNumber() throws Exception {
        if (!Files.isDirectory(Path.of("/proc/self/task"))) {
            assertTrue(JitSettle.otherThreadsMillis().isEmpty());
            return;
        }
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread busy = new Thread(() -> {
            while (!stop.get()) {
                Thread.onSpinWait();
            }
        }, "busy-other#7");
        var before = JitSettle.otherThreadsMillis();
        busy.start();
        // the caller spins too: its CPU must not be counted
        long end = System.nanoTime() + 600_000_000L;
        while (System.nanoTime() < end) {
            Thread.onSpinWait();
        }
        var after = JitSettle.otherThreadsMillis();
        stop.set(true);
        busy.join();
        long busyMs = after.getOrDefault("busy-other", 0L) - before.getOrDefault("busy-other", 0L);
        assertTrue(busyMs >= 100, "the spinning thread, under its name without #7: " + after);
        assertTrue(!after.containsKey("busy-other#7") && !after.containsKey("main"), after.toString());
        String delta = JitSettle.otherThreadsDelta(before, after);
        assertTrue(delta.contains("busy-other " + busyMs + " ms"), delta);
        assertEquals("none", JitSettle.otherThreadsDelta(after, after));
    }

    @Test
    void ownCpuSplitsUserFromSystemTimeOfTheCallingThreadOnly() throws Exception {
        if (!Files.exists(Path.of("/proc/thread-self/stat"))) {
            assertEquals(0, JitSettle.ownUserSystemMillis()[0]);
            return;
        }
        long[] a = JitSettle.ownUserSystemMillis();
        long end = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() < end) {
            Thread.onSpinWait(); // user time (the clock is a vDSO call here)
        }
        long[] b = JitSettle.ownUserSystemMillis();
        assertTrue(b[0] - a[0] >= 200, "half a second of spinning is user time: " + (b[0] - a[0]) + " ms");
        // system time: reading a /proc file is all system calls and kernel work
        end = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() < end) {
            Files.readAllBytes(Path.of("/proc/self/status"));
        }
        long[] c = JitSettle.ownUserSystemMillis();
        assertTrue(c[1] - b[1] >= 100, "half a second of /proc reads is mostly system time: " + (c[1] - b[1]) + " ms");
        // another thread's spinning is not the caller's
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread busy = new Thread(() -> {
            while (!stop.get()) {
                Thread.onSpinWait();
            }
        });
        busy.start();
        Thread.sleep(400);
        long[] d = JitSettle.ownUserSystemMillis();
        stop.set(true);
        busy.join();
        assertTrue(d[0] - c[0] <= 60, "the caller slept: " + (d[0] - c[0]) + " ms of user time");
    }

    @Test
    void findsThisJvmsCompilerThreadsAndWaitsNoLongerThanItsBound() throws Exception {
        Path tasks = Path.of("/proc/self/task");
        if (!Files.isDirectory(tasks)) {
            return; // not Linux: await says so and returns at once (checked below)
        }
        boolean compilers;
        try (Stream<Path> s = Files.list(tasks)) {
            compilers = s.anyMatch(t -> {
                try {
                    return Files.readString(t.resolve("comm")).startsWith("C2 CompilerThre")
                            || Files.readString(t.resolve("comm")).startsWith("C1 CompilerThre");
                } catch (java.io.IOException e) {
                    return false;
                }
            });
        }
        assertTrue(compilers, "a JVM with the JIT on has C1/C2 compiler threads under /proc/self/task");
        assertTrue(JitSettle.compilerMillis() >= 0);
        long t0 = System.nanoTime();
        String said = JitSettle.await(Duration.ZERO);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(said.startsWith("JIT idle after") || said.startsWith("JIT still compiling after"), said);
        assertTrue(ms < 5_000, "one window, then the bound: " + ms + " ms");
    }
}
