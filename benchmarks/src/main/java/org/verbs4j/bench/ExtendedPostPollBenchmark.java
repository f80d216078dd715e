package org.verbs4j.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.ForeignHandles;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairState;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendOperation;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.StandInProvider;

/**
 * The extended post API ({@code ibv_wr_*}) against the classic one ({@code ibv_post_send}) on the
 * stand-in provider, each in Java and in C, in one run: per operation a chain of {@link #chain}
 * RDMA_WRITEs (64-byte SGE, the last signaled), one post, and the poll of its completion.
 * <ul>
 *   <li>{@link #javaClassic}: {@link SendWorkRequests} + {@code QueuePair.postSend};</li>
 *   <li>{@link #javaExtended}: the same chain + {@code QueuePair.postSendExtended} (wr_start, a
 *       wr_rdma_write and wr_set_sge per request, wr_complete);</li>
 *   <li>{@link #cClassic} / {@link #cExtended}: {@code standin_c_loop} / {@code standin_c_loop_ex}
 *       (verbs.h's inlines in C), {@value #C_ITERATIONS} iterations per downcall, reported per iteration.</li>
 * </ul>
 * Both queue pairs complete into the stand-in's one CQ (not over-committed). Run with
 * {@code -prof gc}: the Java paths allocate nothing.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class ExtendedPostPollBenchmark {
    /** Iterations of a C loop per benchmark invocation. */
    public static final int C_ITERATIONS = 1000;

    /** Work requests per post (the last one signaled; one poll per post). */
    @Param({"1", "32"})
    public int chain;

    private StandInProvider provider;
    private MemorySegment buffer;
    private Context context;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private QueuePair classic;
    private QueuePair extended;
    private MemoryRegion mr;
    private SendWorkRequests wrs;
    private WorkCompletions wcs;
    private MemorySegment exQp;
    private MethodHandle cLoopEx;
    private long nextId;

    @Setup(Level.Trial)
    public void setUp() {
        provider = StandInProvider.open();
        Arena arena = provider.arena();
        buffer = arena.allocate(4096, 4096);
        context = ForeignHandles.context(provider.context(), "standin0");
        pd = ForeignHandles.protectionDomain(context, provider.pd());
        cq = ForeignHandles.completionQueue(context, provider.cq());
        classic = ForeignHandles.queuePair(pd, provider.qp(), init(), QueuePairState.RTS);
        exQp = provider.makeExtendedQp(SendOperation.RDMA_WRITE.bit());
        extended = ForeignHandles.extendedQueuePair(
                pd, exQp, init(), EnumSet.of(SendOperation.RDMA_WRITE), QueuePairState.RTS);
        mr = ForeignHandles.memoryRegion(
                pd,
                buffer,
                StandInFixture.LKEY,
                StandInFixture.RKEY,
                EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        wrs = new SendWorkRequests(StandInFixture.MAX_CHAIN, 1);
        wcs = new WorkCompletions(16);
        cLoopEx = StandInProvider.cLoopExHandle();
        // sanity: each path completes its chain's last request, and the provider saw the same WQEs
        long id = nextId;
        if (javaClassic() != id + chain - 1 || javaExtended() != id + 2L * chain - 1) {
            throw new IllegalStateException("a Java path did not complete its last request");
        }
        for (int i = 0; i < chain; i++) {
            StandInProvider.Wqe a = provider.wqe(i), b = provider.wqe(chain + i);
            if (b.wrId() != a.wrId() + chain
                    || a.opcode() != b.opcode()
                    || a.sendFlags() != b.sendFlags()
                    || a.addr() != b.addr()
                    || a.length() != b.length()
                    || a.lkey() != b.lkey()
                    || a.remoteAddr() != b.remoteAddr()
                    || a.rkey() != b.rkey()) {
                throw new IllegalStateException("WQE #" + i + " differs: classic " + a + ", extended " + b);
            }
        }
        if (provider.wrExtendedWqes() != chain || cClassic() != C_ITERATIONS || cExtended() != C_ITERATIONS) {
            throw new IllegalStateException("a C loop did not reap every completion");
        }
    }

    private QueuePairInit init() {
        return QueuePairInit.of(QueuePairType.RC, cq)
                .maxSendWr(StandInFixture.MAX_CHAIN)
                .maxRecvWr(1)
                .maxSendSge(1);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        wcs.close();
        wrs.close();
        mr.close();
        extended.close();
        classic.close();
        cq.close();
        pd.close();
        context.close();
        provider.free(exQp);
        provider.close();
    }

    private SendWorkRequests build() {
        SendWorkRequests w = wrs.clear();
        int n = chain;
        long id = nextId;
        nextId = id + n;
        long remote = buffer.address();
        for (int i = 0; i < n - 1; i++) {
            w.write(id + i, remote, StandInFixture.RKEY).sge(mr, 0, StandInFixture.MESSAGE);
        }
        return w.write(id + n - 1, remote, StandInFixture.RKEY)
                .sge(mr, 0, StandInFixture.MESSAGE)
                .signaled();
    }

    private long poll() {
        int got;
        while ((got = cq.poll(wcs)) == 0) {
            Thread.onSpinWait();
        }
        return wcs.wrId(got - 1);
    }

    /** The classic post of the chain and the poll of its completion. */
    @Benchmark
    public long javaClassic() {
        classic.postSend(build());
        return poll();
    }

    /** The same chain posted through ibv_wr_* and polled the same way. */
    @Benchmark
    public long javaExtended() {
        extended.postSendExtended(build());
        return poll();
    }

    /** The classic loop in C (ibv_post_send + ibv_poll_cq). */
    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long cClassic() {
        return provider.cLoop(C_ITERATIONS, chain, buffer, StandInFixture.LKEY);
    }

    /** The extended loop in C (ibv_wr_start / ibv_wr_rdma_write / ibv_wr_set_sge / ibv_wr_complete + ibv_poll_cq). */
    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long cExtended() {
        try {
            return (long) cLoopEx.invokeExact(
                    exQp.address(),
                    provider.cq().address(),
                    C_ITERATIONS,
                    chain,
                    buffer.address(),
                    StandInFixture.LKEY);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
