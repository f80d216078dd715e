package org.verbs4j.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.StandInProvider;

/**
 * The public-API data path over the stand-in provider: per operation, a chain of {@link #chain}
 * RDMA_WRITE work requests (one 64-byte SGE each, only the last signaled) is built with
 * {@link SendWorkRequests}, posted with one {@code QueuePair.postSend} and its completion reaped
 * with {@code CompletionQueue.poll} — exactly what {@code standin_c_loop} does per iteration, so
 * the ns/op of the subclasses compare directly with {@link PostPollBenchmark#cLoop}.
 *
 * <p>Abstract so that each concrete subclass runs this one benchmark in its own forks with its
 * own JVM flags (checked/unchecked mode and critical/standard downcalls are fixed at class
 * initialisation).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public abstract class AbstractPostPoll {
    /** Work requests per post (the last one signaled; one poll per post). */
    @Param({"1", "8", "32"})
    public int chain;

    StandInFixture f;
    SendWorkRequests wrs;
    /** The same chain, built once at setup: {@link #javaPostPrebuilt} posts it again and again. */
    SendWorkRequests prebuilt;

    WorkCompletions wcs;
    long remoteAddr;
    long nextId;

    @Setup(Level.Trial)
    public void setUp() {
        f = new StandInFixture(confinedCq());
        wrs = new SendWorkRequests(StandInFixture.MAX_CHAIN, 1);
        wcs = new WorkCompletions(16);
        remoteAddr = f.buffer.address();
        long before = nextId;
        long last = javaPublicApi();
        if (last != before + chain - 1) {
            throw new IllegalStateException(
                    "the stand-in completed wr_id " + last + ", expected " + (before + chain - 1));
        }
        if (f.provider.wqeCount() != chain) {
            throw new IllegalStateException("the stand-in saw " + f.provider.wqeCount() + " WQEs, expected " + chain);
        }
        before = nextId;
        if (javaBulkApi() != before + chain - 1 || f.provider.wqeCount() != 2L * chain) {
            throw new IllegalStateException(
                    "the bulk-built chain did not post " + chain + " WQEs ending at wr_id " + (before + chain - 1));
        }
        for (int i = 0; i < chain; i++) { // the provider saw the same requests from both builders
            StandInProvider.Wqe a = f.provider.wqe(i);
            StandInProvider.Wqe b = f.provider.wqe(chain + i);
            if (b.wrId() != a.wrId() + chain
                    || !a.equals(new StandInProvider.Wqe(
                            a.wrId(),
                            b.addr(),
                            b.length(),
                            b.lkey(),
                            b.opcode(),
                            b.sendFlags(),
                            b.remoteAddr(),
                            b.rkey(),
                            b.imm(),
                            b.numSge(),
                            b.totalLength()))) {
                throw new IllegalStateException("WQE #" + i + " differs: per request " + a + ", bulk " + b);
            }
        }
        prebuilt = new SendWorkRequests(StandInFixture.MAX_CHAIN, 1);
        for (int i = 0; i < chain; i++) {
            prebuilt.write(i, remoteAddr, StandInFixture.RKEY).sge(f.mr, 0, StandInFixture.MESSAGE);
        }
        prebuilt.signaled();
        if (javaPostPrebuilt() != chain - 1) {
            throw new IllegalStateException("the prebuilt chain did not complete its last WR");
        }
        afterSetUp();
    }

    /** Whether the fixture's CQ is confined to the benchmark thread (its polls skip the gate). */
    boolean confinedCq() {
        return false;
    }

    /** More setup of a subclass, after the fixture exists. */
    void afterSetUp() {}

    @TearDown(Level.Trial)
    public void tearDown() {
        wcs.close();
        prebuilt.close();
        wrs.close();
        f.close();
    }

    /** One post of the chain and one poll of its completion, through the public API. */
    @Benchmark
    public long javaPublicApi() {
        return postAndPoll(buildPerRequest());
    }

    /**
     * {@link #javaPublicApi} with the chain built by ONE bulk call,
     * {@link SendWorkRequests#writes}: the same {@link #chain} RDMA_WRITEs (same wr_ids, remote
     * address, rkey, 64-byte SGE at offset 0 of the same region, the last signaled), posted and
     * polled the same way, so the ns/op compare directly with {@link #javaPublicApi} and the C loop.
     */
    @Benchmark
    public long javaBulkApi() {
        return postAndPoll(buildBulk());
    }

    /** Ablation: only the building of {@link #javaPublicApi}, nothing posted; returns the chain's size. */
    @Benchmark
    public int javaBuildOnly() {
        return buildPerRequest().size();
    }

    /** Ablation: only the building of {@link #javaBulkApi}, nothing posted; returns the chain's size. */
    @Benchmark
    public int javaBulkBuildOnly() {
        return buildBulk().size();
    }

    /** The chain built per request: clear, {@link #chain} times write + sge, the last signaled. */
    private SendWorkRequests buildPerRequest() {
        SendWorkRequests w = wrs.clear();
        int n = chain;
        long id = nextId;
        nextId = id + n;
        for (int i = 0; i < n - 1; i++) {
            w.write(id + i, remoteAddr, StandInFixture.RKEY).sge(f.mr, 0, StandInFixture.MESSAGE);
        }
        return w.write(id + n - 1, remoteAddr, StandInFixture.RKEY)
                .sge(f.mr, 0, StandInFixture.MESSAGE)
                .signaled();
    }

    /** The same chain built with one bulk call: clear, writes(chain, ...), the last signaled. */
    private SendWorkRequests buildBulk() {
        SendWorkRequests w = wrs.clear();
        int n = chain;
        long id = nextId;
        nextId = id + n;
        return w.writes(n, id, remoteAddr, 0, StandInFixture.RKEY, f.mr, 0, 0, StandInFixture.MESSAGE)
                .signaled();
    }

    /** One post of {@code w} and the poll of its one completion; the completion's wr_id. */
    private long postAndPoll(SendWorkRequests w) {
        f.qp.postSend(w);
        int got;
        while ((got = f.cq.poll(wcs)) == 0) {
            Thread.onSpinWait();
        }
        return wcs.wrId(got - 1);
    }

    /**
     * Ablation: the post and poll of the public API without building the chain (the chain of
     * {@link #chain} was built once at setup and is posted unchanged), so that
     * {@code javaPublicApi - javaPostPrebuilt} is what building a chain costs.
     */
    @Benchmark
    public long javaPostPrebuilt() {
        return postAndPoll(prebuilt);
    }
}
