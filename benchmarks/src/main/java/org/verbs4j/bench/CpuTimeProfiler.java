package org.verbs4j.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.profile.InternalProfiler;
import org.openjdk.jmh.results.AggregationPolicy;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.ScalarResult;

/**
 * A JMH profiler ({@code -prof org.verbs4j.bench.CpuTimeProfiler}) that reports
 * {@code cpu.time.norm}: the CPU time the benchmark's worker threads spent per operation
 * (ThreadMXBean thread CPU time over the iteration, divided by its operations). On a shared,
 * over-subscribed machine the wall-clock score also counts the time the benchmark thread waited
 * for a core; the CPU time does not, so it is the steadier figure there (cache and SMT
 * interference still show). On a quiet machine the two agree.
 */
public final class CpuTimeProfiler implements InternalProfiler {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private final Map<Long, Long> before = new HashMap<>();

    @Override
    public String getDescription() {
        return "CPU time of the benchmark's worker threads per operation (cpu.time.norm)";
    }

    private static Map<Long, Long> workerCpu() {
        Map<Long, Long> m = new HashMap<>();
        for (ThreadInfo t : THREADS.getThreadInfo(THREADS.getAllThreadIds())) {
            if (t != null && t.getThreadName().contains("jmh-worker")) {
                long ns = THREADS.getThreadCpuTime(t.getThreadId());
                if (ns >= 0) {
                    m.put(t.getThreadId(), ns);
                }
            }
        }
        return m;
    }

    @Override
    public void beforeIteration(BenchmarkParams benchmarkParams, IterationParams iterationParams) {
        before.clear();
        before.putAll(workerCpu());
    }

    @Override
    public List<? extends Result<?>> afterIteration(
            BenchmarkParams benchmarkParams, IterationParams iterationParams, IterationResult result) {
        long spent = 0;
        for (Map.Entry<Long, Long> e : workerCpu().entrySet()) {
            spent += e.getValue() - before.getOrDefault(e.getKey(), 0L);
        }
        long ops = result.getMetadata().getAllOps();
        if (ops <= 0) {
            return List.of();
        }
        return List.of(new ScalarResult("cpu.time.norm", (double) spent / ops, "ns/op", AggregationPolicy.AVG));
    }
}
