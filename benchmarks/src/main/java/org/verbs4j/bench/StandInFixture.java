package org.verbs4j.bench;

import static java.lang.foreign.ValueLayout.ADDRESS;

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
 * through the PUBLIC API with {@link ForeignHandles}, a fake {@code ibv_pd} (only its
 * {@code context} field is ever read) and a 4 KiB buffer "registered" under a made-up key.
 * Closes everything in reverse order. One per benchmark trial, one thread.
 */
final class StandInFixture implements AutoCloseable {
    static final int LKEY = 0x1111;
    static final int RKEY = 0x2222;
    static final int MAX_CHAIN = 64;
    /** The payload of every WR, as in standin_c_loop. */
    static final int MESSAGE = 64;

    final StandInProvider provider;
    final Arena arena = Arena.ofShared();
    final MemorySegment buffer;
    final Context context;
    final ProtectionDomain pd;
    final CompletionQueue cq;
    final QueuePair qp;
    final MemoryRegion mr;

    StandInFixture() {
        provider = StandInProvider.open();
        buffer = arena.allocate(4096, 4096);
        MemorySegment fakePd = arena.allocate(16, 8);
        fakePd.set(ADDRESS, 0, provider.context());
        context = ForeignHandles.context(provider.context(), "standin0");
        pd = ForeignHandles.protectionDomain(context, fakePd);
        cq = ForeignHandles.completionQueue(context, provider.cq());
        qp = ForeignHandles.queuePair(pd, provider.qp(),
                QueuePairInit.of(QueuePairType.RC, cq).maxSendWr(256).maxSendSge(1), QueuePairState.RTS);
        mr = ForeignHandles.memoryRegion(pd, buffer, LKEY, RKEY,
                EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
    }

    @Override
    public void close() {
        mr.close();
        qp.close();
        cq.close();
        pd.close();
        context.close();
        provider.close();
        arena.close();
    }
}
