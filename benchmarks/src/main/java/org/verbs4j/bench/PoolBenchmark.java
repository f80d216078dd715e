package org.verbs4j.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.verbs4j.Access;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.Verbs;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PooledBuffer;

/**
 * The pool's headline figure, on a real device (run it in the Soft-RoCE guest): leasing and
 * releasing a registered buffer from a {@link BufferPool} against registering and deregistering
 * the same amount of memory per operation ({@code ibv_reg_mr} + {@code ibv_dereg_mr}), same sizes,
 * same run. Run with {@code -prof gc} to see that lease+release allocates 0 B/op. Without a
 * device the set-up fails with the reason and JMH moves on to the next benchmark.
 *
 * <p>The per-resource leak-site capture of verbs4j ({@code verbs4j.leakSites}) is turned off in
 * the fork so that registerDeregister measures the verbs, not a stack walk.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Dverbs4j.leakSites=false"})
public class PoolBenchmark {
    private static final Set<Access> ACCESS = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE);

    @Param({"4096", "65536"})
    int size;

    private Context context;
    private ProtectionDomain pd;
    private BufferPool pool;
    private Arena arena;
    private MemorySegment memory;

    @Setup(Level.Trial)
    public void setUp() {
        if (!Verbs.isAvailable() || Verbs.devices().isEmpty()) {
            throw new IllegalStateException("PoolBenchmark skipped: no RDMA device ("
                    + Verbs.unavailabilityCause().orElse("ibv_get_device_list lists none")
                    + "); run it in the Soft-RoCE guest, or PoolHostBenchmark for the host-only lease+release");
        }
        String name = System.getenv("VERBS4J_DEVICE");
        context = name == null || name.isEmpty() ? Verbs.openFirst() : Verbs.open(name);
        pd = context.allocateProtectionDomain();
        pool = BufferPool.builder(pd)
                .name("bench")
                .sizeClass(4096, 256)
                .sizeClass(65536, 64)
                .access(ACCESS)
                .leakTracking(false)
                .leakSites(false)
                .build();
        arena = Arena.ofShared();
        // an automatic arena: the region keeps it alive while registered (register() refuses closeable arenas)
        memory = Arena.ofAuto().allocate(size, 4096);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (pool != null) {
            long regs = pool.metrics().registrations();
            if (regs != 2) {
                throw new IllegalStateException("the pool registered " + regs + " times; expected the start-up 2");
            }
            pool.close();
        }
        if (pd != null) {
            pd.close();
        }
        if (context != null) {
            context.close();
        }
        if (arena != null) {
            arena.close();
        }
    }

    /** Lease a registered buffer of {@code size} bytes and give it back. */
    @Benchmark
    public PooledBuffer leaseRelease() {
        PooledBuffer b = pool.lease(size);
        pool.release(b);
        return b;
    }

    /** What the pool replaces: ibv_reg_mr + ibv_dereg_mr of {@code size} bytes per operation. */
    @Benchmark
    public int registerDeregister() {
        MemoryRegion mr = pd.register(memory, ACCESS);
        int key = mr.lkey();
        mr.close();
        return key;
    }
}
