package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
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
 * the kernel's count of verbs objects ({@code rdma res show}) and in the JVM's native memory
 * (Native Memory Tracking, where the guest JVM runs with it) and resident set. The cycle count
 * is {@code -Dverbs4j.cycles} (default 10,000).
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
        cycles.put("protection domain", (c, pd, cq, gid) -> c.allocateProtectionDomain().close());
        cycles.put("completion channel", (c, pd, cq, gid) -> c.createCompletionChannel().close());
        cycles.put("completion queue", (c, pd, cq, gid) -> c.createCompletionQueue(16).close());
        cycles.put("queue pair", (c, pd, cq, gid) -> pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq)).close());
        cycles.put("shared receive queue", (c, pd, cq, gid) -> pd.createSharedReceiveQueue(16, 1).close());
        cycles.put("owned memory region", (c, pd, cq, gid) -> pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE).close());
        cycles.put("memory region over automatic memory", (c, pd, cq, gid) ->
                pd.register(Arena.ofAuto().allocate(4096, 4096), EnumSet.of(Access.LOCAL_WRITE)).close());
        cycles.put("address handle", (c, pd, cq, gid) ->
                pd.createAddressHandle(new AddressVector(1, 0, gid.gid(), gid.index(), 64, 0, 0)).close());
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
            long nmtBefore = nmtCommittedKb();
            long rssBefore = rssKb();
            long heapBefore = heapCommittedKb();
            StringBuilder times = new StringBuilder();
            for (Map.Entry<String, Cycle> e : cycles.entrySet()) {
                long t0 = System.nanoTime();
                long r0 = rssKb();
                for (int i = 0; i < CYCLES; i++) {
                    e.getValue().run(ctx, pd, cq, gid);
                }
                mallocTrim();
                times.append(String.format("%s: %.1f us/cycle, RSS %+d KiB; ", e.getKey(),
                        (System.nanoTime() - t0) / 1e3 / CYCLES, rssKb() - r0));
            }
            settle();
            Map<String, Integer> resAfter = GuestSupport.resourceCounts(ctx.deviceName());
            long nmtAfter = nmtCommittedKb();
            long rssAfter = rssKb();
            long heapAfter = heapCommittedKb();
            System.out.printf("resource cycles x%d: %s%nrdma res %s -> %s; NMT Other committed %d -> %d KiB; RSS %d -> %d KiB"
                    + " (Java heap committed %d -> %d KiB)%n", CYCLES, times, resBefore, resAfter, nmtBefore, nmtAfter,
                    rssBefore, rssAfter, heapBefore, heapAfter);
            assertEquals(resBefore, resAfter, "kernel verbs objects are back at the baseline");
            if (nmtBefore >= 0) {
                assertTrue(nmtAfter - nmtBefore < 4 * 1024, "JVM native memory grew by " + (nmtAfter - nmtBefore) + " KiB");
            }
            // the resident set outside the Java heap (whose growth is the collector's business)
            long nonHeapGrowth = (rssAfter - rssBefore) - (heapAfter - heapBefore);
            assertTrue(nonHeapGrowth < 64 * 1024, "resident memory outside the Java heap grew by " + nonHeapGrowth + " KiB");
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
            java.lang.foreign.Linker l = java.lang.foreign.Linker.nativeLinker();
            java.lang.invoke.MethodHandle trim = l.downcallHandle(l.defaultLookup().find("malloc_trim").orElseThrow(),
                    java.lang.foreign.FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_INT,
                            java.lang.foreign.ValueLayout.JAVA_LONG));
            int ignored = (int) trim.invokeExact(0L);
        } catch (Throwable t) {
            throw new AssertionError("malloc_trim", t);
        }
    }

    /** NMT's committed KiB of the category "Other" (the arenas' malloc) of this JVM, or -1 where NMT is off. */
    private static long nmtCommittedKb() throws IOException, InterruptedException {
        Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
        if (!Files.isExecutable(jcmd)) {
            return -1;
        }
        Process p = new ProcessBuilder(jcmd.toString(), Long.toString(ProcessHandle.current().pid()),
                "VM.native_memory", "summary").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0 || out.contains("not enabled")) {
            return -1;
        }
        // the native memory of the arenas (malloc through Unsafe) is in "Other"; the whole is in "Total"
        Matcher m = Pattern.compile("Other \\(reserved=\\d+KB, committed=(\\d+)KB\\)").matcher(out);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    private static long heapCommittedKb() {
        return java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getCommitted() / 1024;
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
