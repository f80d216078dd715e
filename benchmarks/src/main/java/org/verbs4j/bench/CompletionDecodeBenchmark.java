package org.verbs4j.bench;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.natives.CompletionLayout;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.InlineVerbs;

/**
 * Completion decoding over the stand-in provider: {@value #N} completions read through
 * {@link WorkCompletions} (wr_id, status, opcode, byte_len, qp_num of each) against the same reads
 * with raw {@code MemorySegment} gets, with and without the poll that fills the array. Checked
 * mode (the default) here; {@link CompletionDecodeUncheckedBenchmark} runs the same with
 * {@code -Dverbs4j.unchecked=true} (checked mode credits every polled completion to its queue
 * pair's account).
 * <ul>
 *   <li>{@link #decode32} / {@link #decode32Raw}: only the reads, of an array filled once at setup;</li>
 *   <li>{@link #postPollDecode32}: a chain of {@value #N} signaled RDMA_WRITEs (built once) posted with
 *       {@code QueuePair.postSend}, its {@value #N} completions reaped with one
 *       {@code CompletionQueue.poll} and decoded through {@link WorkCompletions};</li>
 *   <li>{@link #rawPostPollDecode32}: the same descriptors posted and polled with the raw critical
 *       downcalls and decoded with raw gets (the floor).</li>
 * </ul>
 * Every ns/op is per {@value #N} completions.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class CompletionDecodeBenchmark {
    static final int N = 32;

    private StandInFixture f;
    private SendWorkRequests all;
    private WorkCompletions wcs;
    private MemorySegment raw; // a global-scope view of wcs' memory (what C reads)
    private MemorySegment postFn;
    private MemorySegment pollFn;
    private long qpAddr;
    private long cqAddr;
    private long wrsAddr;
    private long badWr;

    @Setup(Level.Trial)
    public void setUp() {
        f = new StandInFixture();
        all = new SendWorkRequests(N, 1); // capacity N: the last request's next is NULL as linked
        for (int i = 0; i < N; i++) {
            all.write(i, f.buffer.address(), StandInFixture.RKEY)
                    .sge(f.mr, 0, StandInFixture.MESSAGE)
                    .signaled();
        }
        wcs = new WorkCompletions(N);
        MemorySegment view = wcs.segment();
        raw = MemorySegment.ofAddress(view.address()).reinterpret(view.byteSize());
        postFn = InlineVerbs.contextOp(f.provider.context(), ContextLayout.OPS_POST_SEND);
        pollFn = InlineVerbs.contextOp(f.provider.context(), ContextLayout.OPS_POLL_CQ);
        qpAddr = f.provider.qp().address();
        cqAddr = f.provider.cq().address();
        wrsAddr = all.segment().address();
        badWr = f.arena.allocate(8, 8).address();
        long expected = expectedSum();
        if (postPollDecode32() != expected || rawPostPollDecode32() != expected) {
            throw new IllegalStateException("a post/poll did not reap the " + N + " completions");
        }
        f.qp.postSend(all);
        if (f.cq.poll(wcs) != N || decode32() != expected || decode32Raw() != expected) {
            throw new IllegalStateException("the decoders disagree");
        }
    }

    private long expectedSum() {
        long s = 0;
        for (int i = 0; i < N; i++) {
            s += i + StandInFixture.MESSAGE + 1 /* IBV_WC_RDMA_WRITE */ + f.qp.qpNumber();
        }
        return s;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        wcs.close();
        all.close();
        f.close();
    }

    /** Reads the five fields of every completion the last poll reaped, through the public API. */
    @Benchmark
    public long decode32() {
        WorkCompletions w = wcs;
        long s = 0;
        for (int i = 0, n = w.count(); i < n; i++) {
            s += w.wrId(i) + w.status(i) + w.opcode(i) + w.byteLength(i) + w.qpNumber(i);
        }
        return s;
    }

    /** The same reads with raw gets at hand-placed offsets (what C does). */
    @Benchmark
    public long decode32Raw() {
        return rawDecode(N);
    }

    private long rawDecode(int n) {
        MemorySegment m = raw;
        long s = 0;
        for (int i = 0; i < n; i++) {
            long o = CompletionLayout.WC_SIZE * i;
            s += m.get(JAVA_LONG, o + CompletionLayout.WR_ID)
                    + m.get(JAVA_INT, o + CompletionLayout.STATUS)
                    + m.get(JAVA_INT, o + CompletionLayout.OPCODE)
                    + m.get(JAVA_INT, o + CompletionLayout.BYTE_LEN)
                    + m.get(JAVA_INT, o + CompletionLayout.QP_NUM);
        }
        return s;
    }

    /** {@value #N} signaled WRs posted, their completions polled at once and decoded, all through the public API. */
    @Benchmark
    public long postPollDecode32() {
        f.qp.postSend(all);
        if (f.cq.poll(wcs) != N) {
            throw new IllegalStateException("the stand-in did not complete " + N);
        }
        return decode32();
    }

    /** The same with the raw critical downcalls and raw gets (the floor). */
    @Benchmark
    public long rawPostPollDecode32() {
        try {
            int rc = (int) POST.invokeExact(postFn, qpAddr, wrsAddr, badWr);
            int n = (int) POLL.invokeExact(pollFn, cqAddr, N, raw.address());
            if (rc != 0 || n != N) {
                throw new IllegalStateException("post_send " + rc + ", poll_cq " + n);
            }
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        return rawDecode(N);
    }

    private static final MethodHandle POST = DataPathLinkage.POST_SEND_CRITICAL;
    private static final MethodHandle POLL = DataPathLinkage.POLL_CQ_CRITICAL;
}
