package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import org.verbs4j.testing.StandInProvider;

/**
 * Test fixture: verbs4j wrappers ({@link ForeignHandles}) around a stand-in provider's context,
 * with a protection domain (a fake {@code ibv_pd} in {@code arena}), the stand-in's completion
 * queue and a 4 KiB region of {@code arena} (lkey 0x1111, rkey 0x2222). {@link #close} closes the
 * wrappers, the context last; the provider and the arena stay the caller's.
 */
final class StandInObjects implements AutoCloseable {
    final Context ctx;
    final ProtectionDomain pd;
    final CompletionQueue cq;
    final MemoryRegion mr;
    private final MemorySegment standInQp;

    /** Wraps {@code context} (a stand-in context of {@code p}) as {@code ctx} already does, and its objects. */
    StandInObjects(StandInProvider p, Arena arena, MemorySegment context, Context ctx) {
        this.ctx = ctx;
        this.standInQp = p.qp();
        MemorySegment fakePd = arena.allocate(16, 8);
        fakePd.set(ValueLayout.ADDRESS, 0, context);
        this.pd = ForeignHandles.protectionDomain(ctx, fakePd);
        this.cq = ForeignHandles.completionQueue(ctx, p.cq());
        this.mr = ForeignHandles.memoryRegion(
                pd, arena.allocate(4096, 64), 0x1111, 0x2222, EnumSet.of(Access.LOCAL_WRITE));
    }

    /** An RC queue pair on the stand-in's qp, in RTS, completing into {@link #cq}. */
    QueuePair rcQueuePair(int maxSendWr, int maxRecvWr) {
        return ForeignHandles.queuePair(
                pd,
                standInQp,
                QueuePairInit.of(QueuePairType.RC, cq)
                        .maxSendWr(maxSendWr)
                        .maxRecvWr(maxRecvWr)
                        .maxSendSge(1)
                        .maxRecvSge(1),
                QueuePairState.RTS);
    }

    @Override
    public void close() {
        for (NativeResource r : new NativeResource[] {mr, cq, pd, ctx}) {
            if (r != null && r.isOpen()) {
                r.close();
            }
        }
    }
}
