package org.verbs4j.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
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
import org.openjdk.jmh.annotations.Threads;
import org.verbs4j.Context;
import org.verbs4j.ForeignHandles;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PooledBuffer;

/**
 * Lease+release of the {@link BufferPool} on any host, no RDMA device: the protection domain is a
 * borrowed stand-in ({@link ForeignHandles}) and the registrar wraps memory under made-up keys,
 * which the hot path never looks at. Single-threaded (the thread cache) and with two threads
 * sharing one pool, in the safe default and with the opt-in unsafe shared flyweights;
 * {@code -prof gc} shows the allocation rate (0 B/op expected for tokens and the flyweights).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class PoolHostBenchmark {
    @Param({"4096", "65536"})
    int size;

    /** false: the safe default (an object and, on segment(), a view per lease); true: the opt-in flyweights. */
    @Param({"false", "true"})
    boolean unsafeShared;

    private Arena arena;
    private Context context;
    private ProtectionDomain pd;
    private BufferPool pool;

    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        context = ForeignHandles.context(arena.allocate(4096, 64), "standin0");
        pd = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
        int[] key = {0x100};
        pool = BufferPool.builder(pd)
                .name("host-bench")
                .sizeClass(4096, 256)
                .sizeClass(65536, 64)
                .registrar((p, mem, access) -> ForeignHandles.memoryRegion(p, mem, ++key[0], key[0], access))
                .leakTracking(false)
                .leakSites(false)
                .unsafeSharedBuffers(unsafeShared)
                .build();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
        pd.close();
        context.close();
        arena.close();
    }

    /** One thread: served by its thread cache. */
    @Benchmark
    public PooledBuffer leaseRelease() {
        PooledBuffer b = pool.lease(size);
        pool.release(b);
        return b;
    }

    /** One thread: lease, write one int through the buffer's segment, release. */
    @Benchmark
    public PooledBuffer leaseWriteRelease() {
        PooledBuffer b = pool.lease(size);
        b.segment().set(ValueLayout.JAVA_INT, 0, size);
        pool.release(b);
        return b;
    }

    /**
     * One thread: lease, write one int through the lease's checked accessor (bounds, generation
     * and a pin instead of a segment of its own), release.
     */
    @Benchmark
    public PooledBuffer leaseSetRelease() {
        PooledBuffer b = pool.lease(size);
        b.set(ValueLayout.JAVA_INT, 0, size);
        pool.release(b);
        return b;
    }

    /** {@link #leaseSetRelease()} by token: nothing escapes, nothing allocated. */
    @Benchmark
    public long leaseTokenSetRelease() {
        long t = pool.leaseToken(size);
        pool.buffer(t).set(ValueLayout.JAVA_INT, 0, size);
        pool.release(t);
        return t;
    }

    /** One thread, by lease token (generation-checked release; no object). */
    @Benchmark
    public long leaseReleaseToken() {
        long t = pool.leaseToken(size);
        pool.release(t);
        return t;
    }

    /** Two threads on one pool (shared counters and, on misses, the shared free list). */
    @Benchmark
    @Threads(2)
    public PooledBuffer leaseReleaseTwoThreads() {
        PooledBuffer b = pool.lease(size);
        pool.release(b);
        return b;
    }
}
