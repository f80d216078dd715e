package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;

/**
 * Nothing leaks: 10,000 create/close cycles of every resource type end where they started, in
 * the kernel's count of verbs objects ({@code rdma res show}), in the JVM's native memory
 * (Native Memory Tracking, where the guest JVM runs with it), in what glibc's malloc has handed
 * out and not had back (mallinfo2: libibverbs' and the provider's allocations too), in the
 * process's memory mappings, and (loosely) in its resident set. The cycle count is
 * {@code -Dverbs4j.cycles} (default 10,000).
 */
@RdmaTest
class ResourceCyclesGuestTest {
    private static final int CYCLES = Integer.getInteger("verbs4j.cycles", 10_000);

    interface Cycle {
        void run(Context ctx, ProtectionDomain pd, CompletionQueue cq, GidEntry gid);
    }

    @Test
    void tenThousandCyclesOfEveryResourceEndAtTheBaseline() throws Exception {
        Map<String, Cycle> cycles = new LinkedHashMap<>();
        cycles.put("context", (c, pd, cq, gid) -> LoopbackPair.openTestDevice().close());
        cycles.put(
                "protection domain",
                (c, pd, cq, gid) -> c.allocateProtectionDomain().close());
        cycles.put(
                "completion channel",
                (c, pd, cq, gid) -> c.createCompletionChannel().close());
        cycles.put(
                "completion queue",
                (c, pd, cq, gid) -> c.createCompletionQueue(16).close());
        cycles.put(
                "queue pair",
                (c, pd, cq, gid) -> pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq))
                        .close());
        cycles.put(
                "shared receive queue",
                (c, pd, cq, gid) -> pd.createSharedReceiveQueue(16, 1).close());
        cycles.put(
                "owned memory region",
                (c, pd, cq, gid) ->
                        pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE).close());
        cycles.put(
                "memory region over automatic memory",
                (c, pd, cq, gid) -> pd.register(Arena.ofAuto().allocate(4096, 4096), EnumSet.of(Access.LOCAL_WRITE))
                        .close());
        cycles.put(
                "address handle",
                (c, pd, cq, gid) -> pd.createAddressHandle(new AddressVector(1, 0, gid.gid(), gid.index(), 64, 0, 0))
                        .close());
        cycles.put("work request chains and completion arrays", (c, pd, cq, gid) -> {
            new SendWorkRequests(16, 2).close();
            new ReceiveWorkRequests(16, 2).close();
            new WorkCompletions(16).close();
        });
        try (Context ctx = LoopbackPair.openTestDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(64)) {
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
            for (Cycle c : cycles.values()) { // warm up: JIT, class loading, malloc arenas
                for (int i = 0; i < 200; i++) {
                    c.run(ctx, pd, cq, gid);
                }
            }
            settle();
            Map<String, Integer> resBefore = GuestSupport.resourceCounts(ctx.deviceName());
            Map<String, Long> nmt0 = nmtCommittedKb();
            long nmtBefore = nmt0.getOrDefault("Other", -1L);
            long rssBefore = rssKb();
            long mallocBefore = mallocInUseKb();
            long mapsBefore = mappings();
            long heapBefore = heapCommittedKb();
            StringBuilder times = new StringBuilder();
            for (Map.Entry<String, Cycle> e : cycles.entrySet()) {
                long t0 = System.nanoTime();
                long r0 = rssKb();
                for (int i = 0; i < CYCLES; i++) {
                    e.getValue().run(ctx, pd, cq, gid);
                }
                mallocTrim();
                times.append(String.format(
                        "%s: %.1f us/cycle, RSS %+d KiB; ",
                        e.getKey(), (System.nanoTime() - t0) / 1e3 / CYCLES, rssKb() - r0));
            }
            settle();
            Map<String, Integer> resAfter = GuestSupport.resourceCounts(ctx.deviceName());
            Map<String, Long> nmt1 = nmtCommittedKb();
            long nmtAfter = nmt1.getOrDefault("Other", -1L);
            long rssAfter = rssKb();
            long mallocAfter = mallocInUseKb();
            long mapsAfter = mappings();
            long heapAfter = heapCommittedKb();
            System.out.printf(
                    "resource cycles x%d: %s%nrdma res %s -> %s; NMT Other committed %d -> %d KiB; RSS %d -> %d KiB"
                            + " (Java heap committed %d -> %d KiB)%n",
                    CYCLES,
                    times,
                    resBefore,
                    resAfter,
                    nmtBefore,
                    nmtAfter,
                    rssBefore,
                    rssAfter,
                    heapBefore,
                    heapAfter);
            StringBuilder nmtGrowth = new StringBuilder();
            for (Map.Entry<String, Long> e : nmt1.entrySet()) {
                long d = e.getValue() - nmt0.getOrDefault(e.getKey(), 0L);
                if (d != 0) {
                    nmtGrowth.append(String.format("%s %+d; ", e.getKey(), d));
                }
            }
            System.out.printf("NMT committed growth by category (KiB): %s%n", nmtGrowth);
            System.out.printf(
                    "glibc malloc in use %d -> %d KiB (NMT's malloc %d -> %d KiB); mappings %d -> %d%n",
                    mallocBefore,
                    mallocAfter,
                    nmt0.getOrDefault("malloc", -1L),
                    nmt1.getOrDefault("malloc", -1L),
                    mapsBefore,
                    mapsAfter);
            assertEquals(resBefore, resAfter, "kernel verbs objects are back at the baseline");
            if (nmtBefore >= 0) {
                assertTrue(
                        nmtAfter - nmtBefore < 4 * 1024,
                        "JVM native memory grew by " + (nmtAfter - nmtBefore) + " KiB");
            }
            // what the native libraries (libibverbs, the rxe provider, glibc) malloc'ed and did not free: glibc's
            // in-use growth less the JVM's own malloc as NMT counts it (usually ~1.5 MiB, but a C2 compile in
            // flight at the end holds ~10 MiB of "Arena Chunk" for a few seconds: seen in CI
            // as +10682 KiB in all, of which NMT's +11192): a leak of 800 bytes per cycle of one type fails it
            long jvmMallocGrowth = nmt1.getOrDefault("malloc", 0L) - nmt0.getOrDefault("malloc", 0L);
            long mallocGrowth = mallocAfter - mallocBefore - jvmMallocGrowth;
            assertTrue(
                    mallocGrowth < 8 * 1024,
                    "malloc'ed memory in use outside the JVM's own grew by " + mallocGrowth
                            + " KiB over " + CYCLES + " cycles of each type (glibc: " + (mallocAfter - mallocBefore)
                            + " KiB, of which the JVM's per NMT: " + jvmMallocGrowth + " KiB)");
            // a mapping left behind per cycle (a queue's or a doorbell page's mmap not undone) makes CYCLES more
            assertTrue(mapsAfter - mapsBefore < 1_000, "memory mappings " + mapsBefore + " -> " + mapsAfter);
            // the resident set outside the Java heap (whose growth is the collector's business): a backstop only,
            // since it moves with what malloc keeps of freed memory in its per-thread arenas (6.6 to 43.2 MiB over
            // the cycles in 27 runs, against the former bound of 64 MiB; in three of them malloc's memory in use
            // moved -0.2 to +1.3 MiB)
            long nonHeapGrowth = (rssAfter - rssBefore) - (heapAfter - heapBefore);
            assertTrue(
                    nonHeapGrowth < 128 * 1024,
                    "resident memory outside the Java heap grew by " + nonHeapGrowth + " KiB");
        }
    }

    private static void settle() throws InterruptedException {
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(100);
        }
        mallocTrim();
    }

    /**
     * glibc's malloc_trim(0): gives freed heap memory back to the kernel, so that the resident set
     * measures what is still allocated, not what malloc keeps cached from 10,000 open/close cycles.
     */
    private static void mallocTrim() {
        try {
            Linker l = Linker.nativeLinker();
            MethodHandle trim = l.downcallHandle(
                    l.defaultLookup().find("malloc_trim").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
            int ignored = (int) trim.invokeExact(0L);
        } catch (Throwable t) {
            throw new AssertionError("malloc_trim", t);
        }
    }

    /**
     * NMT's committed KiB by category ("Total", "Java Heap", "Code", "Other" (the arenas' malloc
     * through Unsafe), ...) of this JVM, or an empty map where NMT is off.
     */
    private static Map<String, Long> nmtCommittedKb() throws IOException, InterruptedException {
        Map<String, Long> kb = new LinkedHashMap<>();
        Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
        if (!Files.isExecutable(jcmd)) {
            return kb;
        }
        Process p = new ProcessBuilder(
                        jcmd.toString(), Long.toString(ProcessHandle.current().pid()), "VM.native_memory", "summary")
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0 || out.contains("not enabled")) {
            return kb;
        }
        Matcher m = Pattern.compile("(?m)^\\s*-?\\s*([A-Za-z][A-Za-z ]*?) \\(reserved=\\d+KB, committed=(\\d+)KB\\)")
                .matcher(out);
        while (m.find()) {
            kb.putIfAbsent(m.group(1).trim(), Long.parseLong(m.group(2)));
        }
        Matcher total = Pattern.compile("(?m)^Total: reserved=\\d+KB, committed=(\\d+)KB\\s+malloc: (\\d+)KB")
                .matcher(out);
        if (total.find()) {
            kb.put("Total", Long.parseLong(total.group(1)));
            kb.put("malloc", Long.parseLong(total.group(2)));
        }
        return kb;
    }

    /**
     * What glibc's malloc has handed out and not had back, in all its arenas (mallinfo2's uordblks
     * plus hblkhd), in KiB: unlike the resident set, free memory that malloc keeps is not in it.
     */
    private static long mallocInUseKb() {
        try {
            Linker l = Linker.nativeLinker();
            // struct mallinfo2: ten size_t (arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, ...)
            MemoryLayout info = MemoryLayout.structLayout(MemoryLayout.sequenceLayout(10, ValueLayout.JAVA_LONG));
            MethodHandle mallinfo2 =
                    l.downcallHandle(l.defaultLookup().find("mallinfo2").orElseThrow(), FunctionDescriptor.of(info));
            try (Arena a = Arena.ofConfined()) {
                MemorySegment m = (MemorySegment) mallinfo2.invokeExact((SegmentAllocator) a);
                long hblkhd = m.getAtIndex(ValueLayout.JAVA_LONG, 4);
                long uordblks = m.getAtIndex(ValueLayout.JAVA_LONG, 7);
                return (hblkhd + uordblks) / 1024;
            }
        } catch (Throwable t) {
            throw new AssertionError("mallinfo2", t);
        }
    }

    /** The number of this process's memory mappings (lines of /proc/self/maps). */
    private static long mappings() throws IOException {
        try (var lines = Files.lines(Path.of("/proc/self/maps"))) {
            return lines.count();
        }
    }

    private static long heapCommittedKb() {
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
