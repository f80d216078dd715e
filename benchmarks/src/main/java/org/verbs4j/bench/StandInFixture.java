package org.verbs4j.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
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
import org.verbs4j.testing.StandInProvider;

/**
 * The verbs objects the data-path benchmarks use: the stand-in provider's fake context, QP and
 * CQ (its C library is compiled with gcc on first use, see {@link StandInProvider}) wrapped
 * through the PUBLIC API with {@link ForeignHandles}, its fake {@code ibv_pd} (only its
 * {@code context} field is ever read) and a 4 KiB buffer of its arena "registered" under a made-up key.
 * Closes everything in reverse order. One per benchmark trial, one thread. The QP's queues fit the
 * CQ: on an over-committed CQ every checked post would also take the CQ's lock and sum its queues.
 */
final class StandInFixture implements AutoCloseable {
    static final int LKEY = 0x1111;
    static final int RKEY = 0x2222;
    static final int MAX_CHAIN = 64;
    /**
     * The QP's send queue; its receive queue takes the rest of the stand-in's CQ, so that the CQ
     * can hold every completion its queues could produce (not over-committed: checked mode then
     * needs no CQ-wide check per post, as with a CQ sized for its queues on a real device).
     */
    static final int SEND_QUEUE = 128;

    static final int CQE = StandInProvider.CQE;
    /** The payload of every WR, as in standin_c_loop. */
    static final int MESSAGE = 64;

    final StandInProvider provider;
    final Arena arena;
    final MemorySegment buffer;
    final Context context;
    final ProtectionDomain pd;
    final CompletionQueue cq;
    final QueuePair qp;
    final MemoryRegion mr;

    StandInFixture() {
        this(false);
    }

    /**
     * @param confinedCq whether the CQ is confined to the calling thread (its polls skip the
     *                   gate; {@code Context.createConfinedCompletionQueue}); the benchmark thread
     *                   must then be the one that creates the fixture (JMH runs a trial's setup on it)
     */
    StandInFixture(boolean confinedCq) {
        provider = StandInProvider.open();
        arena = provider.arena();
        buffer = arena.allocate(4096, 4096);
        context = ForeignHandles.context(provider.context(), "standin0");
        pd = ForeignHandles.protectionDomain(context, provider.pd());
        cq = confinedCq
                ? ForeignHandles.confinedCompletionQueue(context, provider.cq())
                : ForeignHandles.completionQueue(context, provider.cq());
        qp = ForeignHandles.queuePair(
                pd,
                provider.qp(),
                QueuePairInit.of(QueuePairType.RC, cq)
                        .maxSendWr(SEND_QUEUE)
                        .maxRecvWr(CQE - SEND_QUEUE)
                        .maxSendSge(1),
                QueuePairState.RTS);
        if (cq.isOvercommitted()) {
            throw new IllegalStateException("the stand-in's CQ is over-committed by the benchmark QP");
        }
        mr = ForeignHandles.memoryRegion(
                pd, buffer, LKEY, RKEY, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
    }

    @Override
    public void close() {
        mr.close();
        qp.close();
        cq.close();
        pd.close();
        context.close();
        provider.close(); // its arena too
    }
}
