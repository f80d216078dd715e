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

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.natives.generated.ibverbs.ibv_send_wr;
import org.verbs4j.natives.generated.ibverbs.ibv_sge;

/**
 * Filling work requests (no post): jextract's generated accessors ({@code ibv_send_wr.wr_id(seg, v)},
 * {@code ibv_send_wr.wr.rdma.remote_addr(ibv_send_wr.wr.rdma(ibv_send_wr.wr(seg)), v)}, …) against
 * hand-placed offsets ({@code WorkRequestLayout}) on one segment. An operation writes every field
 * of ONE RDMA_WRITE WR and its SGE (as standin_c_loop does); {@value #WRS} WRs per invocation.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class PostPollFillBenchmark {
    static final int WRS = 32;

    private Arena arena;
    private MemorySegment wrs;
    private MemorySegment sges;
    private MemorySegment[] wrSlices;
    private MemorySegment[] sgeSlices;
    private long wrsAddr;
    private long sgesAddr;
    private long buf;
    private long nextId;

    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        wrs = arena.allocate(ibv_send_wr.layout().byteSize() * WRS, 64);
        sges = arena.allocate(ibv_sge.layout().byteSize() * WRS, 64);
        wrsAddr = wrs.address();
        sgesAddr = sges.address();
        buf = arena.allocate(4096, 4096).address();
        wrSlices = new MemorySegment[WRS];
        sgeSlices = new MemorySegment[WRS];
        for (int i = 0; i < WRS; i++) {
            wrSlices[i] = wrs.asSlice(SEND_WR_SIZE * i, SEND_WR_SIZE);
            sgeSlices[i] = sges.asSlice(SGE_SIZE * i, SGE_SIZE);
        }
        generated();
        long g = wrs.get(JAVA_LONG, SEND_WR_SIZE * (WRS - 1) + SEND_RDMA_REMOTE_ADDR);
        handPlaced();
        if (g != wrs.get(JAVA_LONG, SEND_WR_SIZE * (WRS - 1) + SEND_RDMA_REMOTE_ADDR)) {
            throw new IllegalStateException("the two fills disagree");
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    /** jextract's accessors, navigating the wr.rdma union with its slice getters. */
    @Benchmark
    @OperationsPerInvocation(WRS)
    public void generated() {
        long id = nextId;
        nextId = id + WRS;
        for (int i = 0; i < WRS; i++) {
            MemorySegment w = wrSlices[i];
            MemorySegment s = sgeSlices[i];
            ibv_sge.addr(s, buf);
            ibv_sge.length(s, StandInFixture.MESSAGE);
            ibv_sge.lkey(s, StandInFixture.LKEY);
            ibv_send_wr.wr_id(w, id + i);
            ibv_send_wr.next(w, i + 1 < WRS ? wrSlices[i + 1] : MemorySegment.NULL);
            ibv_send_wr.sg_list(w, s);
            ibv_send_wr.num_sge(w, 1);
            ibv_send_wr.opcode(w, SendWorkRequests.OP_RDMA_WRITE);
            ibv_send_wr.send_flags(w, i + 1 == WRS ? SendWorkRequests.FLAG_SIGNALED : 0);
            MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(w));
            ibv_send_wr.wr.rdma.remote_addr(rdma, buf);
            ibv_send_wr.wr.rdma.rkey(rdma, StandInFixture.RKEY);
        }
    }

    /** Hand-placed offsets on the one segment (what SendWorkRequests does). */
    @Benchmark
    @OperationsPerInvocation(WRS)
    public void handPlaced() {
        MemorySegment w = wrs;
        MemorySegment s = sges;
        long id = nextId;
        nextId = id + WRS;
        for (int i = 0; i < WRS; i++) {
            long o = SEND_WR_SIZE * i;
            long so = SGE_SIZE * i;
            s.set(JAVA_LONG, so + SGE_ADDR, buf);
            s.set(JAVA_INT, so + SGE_LENGTH, StandInFixture.MESSAGE);
            s.set(JAVA_INT, so + SGE_LKEY, StandInFixture.LKEY);
            w.set(JAVA_LONG, o + SEND_WR_ID, id + i);
            w.set(JAVA_LONG, o + SEND_NEXT, i + 1 < WRS ? wrsAddr + o + SEND_WR_SIZE : 0L);
            w.set(JAVA_LONG, o + SEND_SG_LIST, sgesAddr + so);
            w.set(JAVA_INT, o + SEND_NUM_SGE, 1);
            w.set(JAVA_INT, o + SEND_OPCODE, SendWorkRequests.OP_RDMA_WRITE);
            w.set(JAVA_INT, o + SEND_FLAGS, i + 1 == WRS ? SendWorkRequests.FLAG_SIGNALED : 0);
            w.set(JAVA_LONG, o + SEND_RDMA_REMOTE_ADDR, buf);
            w.set(JAVA_INT, o + SEND_RDMA_RKEY, StandInFixture.RKEY);
        }
    }
}
