package org.verbs4j.bench;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.verbs4j.natives.WorkRequestLayout.SEND_FLAGS;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NEXT;
import static org.verbs4j.natives.WorkRequestLayout.SEND_NUM_SGE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_OPCODE;
import static org.verbs4j.natives.WorkRequestLayout.SEND_RDMA_REMOTE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SEND_RDMA_RKEY;
import static org.verbs4j.natives.WorkRequestLayout.SEND_SG_LIST;
import static org.verbs4j.natives.WorkRequestLayout.SEND_WR_ID;
import static org.verbs4j.natives.WorkRequestLayout.SEND_WR_SIZE;
import static org.verbs4j.natives.WorkRequestLayout.SGE_ADDR;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LENGTH;
import static org.verbs4j.natives.WorkRequestLayout.SGE_LKEY;
import static org.verbs4j.natives.WorkRequestLayout.SGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.natives.CompletionLayout;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.testing.StandInProvider;

/**
 * Java against C on the same stand-in provider, in one JMH run (checked mode, the library's
 * default downcall linkage). Every benchmark's operation is one post of a chain of
 * {@link #chain} RDMA_WRITE WRs (64-byte SGE, last signaled) plus the poll of its completion:
 * <ul>
 *   <li>{@link #javaPublicApi}: {@link SendWorkRequests} + {@code QueuePair.postSend} +
 *       {@code CompletionQueue.poll} (inherited);</li>
 *   <li>{@link #cLoop}: {@code standin_c_loop} (verbs.h's inline ibv_post_send/ibv_poll_cq in C),
 *       {@value #C_ITERATIONS} iterations per downcall, reported per iteration;</li>
 *   <li>{@link #rawCritical} / {@link #rawStandard}: the same WR chain written with hand-placed
 *       offsets and posted/polled with {@code DataPathLinkage.POST_SEND_CRITICAL}/{@code POLL_CQ_CRITICAL}
 *       or the {@code _STANDARD} handles, invoked raw with {@code invokeExact}: {@code rawCritical} is
 *       the raw two-downcall floor;</li>
 *   <li>ablations: {@link #javaPostPrebuilt} (inherited: the public post + poll of a chain built
 *       once) and {@link #rawPostPrebuilt} (the raw post + poll of the chain written once), so that
 *       building and posting can be told apart.</li>
 * </ul>
 */
public class PostPollBenchmark extends AbstractPostPoll {
    /** Iterations of the C loop per benchmark invocation. */
    public static final int C_ITERATIONS = 1000;

    private MethodHandle cLoop;
    private long qpAddr;
    private long cqAddr;
    private long bufAddr;
    private MemorySegment postFn;
    private MemorySegment pollFn;
    private MemorySegment rawWrs;
    private MemorySegment rawSges;
    private long rawWrsAddr;
    private long rawSgesAddr;
    private long badWr;
    private long rawWc;
    private MemorySegment rawWcs;

    @Override
    void afterSetUp() {
        cLoop = StandInProvider.cLoopHandle();
        qpAddr = f.provider.qp().address();
        cqAddr = f.provider.cq().address();
        bufAddr = f.buffer.address();
        postFn = InlineVerbs.contextOp(f.provider.context(), ContextLayout.OPS_POST_SEND);
        pollFn = InlineVerbs.contextOp(f.provider.context(), ContextLayout.OPS_POLL_CQ);
        rawWrs = f.arena.allocate(SEND_WR_SIZE * StandInFixture.MAX_CHAIN, 64);
        rawSges = f.arena.allocate(SGE_SIZE * StandInFixture.MAX_CHAIN, 64);
        rawWrsAddr = rawWrs.address();
        rawSgesAddr = rawSges.address();
        badWr = f.arena.allocate(8, 8).address();
        rawWcs = f.arena.allocate(CompletionLayout.WC_SIZE * 16, 8);
        rawWc = rawWcs.address();
        long c = cLoop(); // sanity: the C loop runs and reaps every completion
        if (c != C_ITERATIONS) {
            throw new IllegalStateException("standin_c_loop returned " + c);
        }
        if (rawCritical() != nextId - 1 || rawStandard() != nextId - 1) {
            throw new IllegalStateException("the raw post/poll did not complete the last WR");
        }
    }

    /** The C baseline: per iteration the same chain, post and poll, in C. */
    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long cLoop() {
        try {
            return (long) cLoop.invokeExact(qpAddr, cqAddr, C_ITERATIONS, chain, bufAddr, StandInFixture.LKEY);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Writes the chain as standin_c_loop does (every field, hand-placed offsets); returns the last wr_id. */
    private long fillRaw() {
        MemorySegment w = rawWrs;
        MemorySegment s = rawSges;
        int n = chain;
        long id = nextId;
        nextId = id + n;
        for (int i = 0; i < n; i++) {
            long o = SEND_WR_SIZE * i;
            long so = SGE_SIZE * i;
            s.set(JAVA_LONG, so + SGE_ADDR, bufAddr);
            s.set(JAVA_INT, so + SGE_LENGTH, StandInFixture.MESSAGE);
            s.set(JAVA_INT, so + SGE_LKEY, StandInFixture.LKEY);
            w.set(JAVA_LONG, o + SEND_WR_ID, id + i);
            w.set(JAVA_LONG, o + SEND_NEXT, i + 1 < n ? rawWrsAddr + o + SEND_WR_SIZE : 0L);
            w.set(JAVA_LONG, o + SEND_SG_LIST, rawSgesAddr + so);
            w.set(JAVA_INT, o + SEND_NUM_SGE, 1);
            w.set(JAVA_INT, o + SEND_OPCODE, SendWorkRequests.OP_RDMA_WRITE);
            w.set(JAVA_INT, o + SEND_FLAGS, i + 1 == n ? SendWorkRequests.FLAG_SIGNALED : 0);
            w.set(JAVA_LONG, o + SEND_RDMA_REMOTE_ADDR, bufAddr);
            w.set(JAVA_INT, o + SEND_RDMA_RKEY, StandInFixture.LKEY);
        }
        return id + n - 1;
    }

    /** Raw post + poll through the critical (no thread-state transition) handles: the raw two-downcall floor. */
    @Benchmark
    public long rawCritical() {
        fillRaw();
        return rawCriticalPostPoll();
    }

    /** Ablation: the raw critical post + poll of the chain as {@link #rawCritical} last wrote it (no fill). */
    @Benchmark
    public long rawPostPrebuilt() {
        return rawCriticalPostPoll();
    }

    private long rawCriticalPostPoll() {
        try {
            int rc = (int) DataPathLinkage.POST_SEND_CRITICAL.invokeExact(postFn, qpAddr, rawWrsAddr, badWr);
            if (rc != 0) {
                throw new IllegalStateException("post_send: " + rc);
            }
            int n;
            while ((n = (int) DataPathLinkage.POLL_CQ_CRITICAL.invokeExact(pollFn, cqAddr, 16, rawWc)) == 0) {
                Thread.onSpinWait();
            }
            return rawWcId(n);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Raw post + poll through the standard (thread-state transition) handles. */
    @Benchmark
    public long rawStandard() {
        fillRaw();
        try {
            int rc = (int) DataPathLinkage.POST_SEND_STANDARD.invokeExact(postFn, qpAddr, rawWrsAddr, badWr);
            if (rc != 0) {
                throw new IllegalStateException("post_send: " + rc);
            }
            int n;
            while ((n = (int) DataPathLinkage.POLL_CQ_STANDARD.invokeExact(pollFn, cqAddr, 16, rawWc)) == 0) {
                Thread.onSpinWait();
            }
            return rawWcId(n);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private long rawWcId(int n) {
        if (n < 0) {
            throw new IllegalStateException("poll_cq: " + n);
        }
        return rawWcs.get(JAVA_LONG, CompletionLayout.WC_SIZE * (n - 1) + CompletionLayout.WR_ID);
    }
}
