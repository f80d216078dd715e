package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import org.verbs4j.testing.StandInProvider;

/**
 * Test fixture: verbs4j wrappers ({@link ForeignHandles}) around a stand-in provider's objects: a
 * context, a protection domain on a stand-in {@code ibv_pd}, the stand-in's completion queue and a
 * 4 KiB region (lkey {@value #LKEY}, rkey {@value #RKEY}, local and remote write). {@link #open()}
 * makes the provider too; {@link #close} closes the wrappers still open, the context last, then
 * the provider (with its arena) when this fixture opened it.
 */
final class StandInObjects implements AutoCloseable {
    static final int LKEY = 0x1111;
    static final int RKEY = 0x2222;

    final StandInProvider p;
    final Arena arena;
    final Context ctx;
    final ProtectionDomain pd;
    final CompletionQueue cq;
    final MemoryRegion mr;
    private final MemorySegment standInQp;
    private final boolean ownsProvider;

    /**
     * A stand-in provider of its own ({@link StandInProvider#open()}, state reset) with its context
     * wrapped as {@code standin0}; the region lies in the provider's arena.
     */
    static StandInObjects open() {
        StandInProvider p = StandInProvider.open();
        return new StandInObjects(p, p.arena(), p.context(), ForeignHandles.context(p.context(), "standin0"), true);
    }

    /**
     * Wraps the objects of {@code context} (a stand-in context of {@code p}, which {@code ctx}
     * already wraps); the region lies in {@code arena}. The provider and the arena stay the caller's.
     */
    StandInObjects(StandInProvider p, Arena arena, MemorySegment context, Context ctx) {
        this(p, arena, context, ctx, false);
    }

    private StandInObjects(StandInProvider p, Arena arena, MemorySegment context, Context ctx, boolean owns) {
        this.p = p;
        this.arena = arena;
        this.ctx = ctx;
        this.ownsProvider = owns;
        this.standInQp = p.qp();
        this.pd = ForeignHandles.protectionDomain(ctx, context.equals(p.context()) ? p.pd() : p.makePd(context));
        this.cq = ForeignHandles.completionQueue(ctx, p.cq());
        this.mr = ForeignHandles.memoryRegion(
                pd, arena.allocate(4096, 64), LKEY, RKEY, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
    }

    /** An RC queue pair on the stand-in's qp, in RTS, completing into {@link #cq}, one SGE a WR. */
    QueuePair rcQueuePair(int maxSendWr, int maxRecvWr) {
        return rcQueuePair(maxSendWr, maxRecvWr, 1, 0);
    }

    /** An RC queue pair as above with {@code maxWr} WRs and {@code maxSge} SGEs each way and inline data. */
    QueuePair rcQueuePair(int maxWr, int maxSge, int maxInlineData) {
        return rcQueuePair(maxWr, maxWr, maxSge, maxInlineData);
    }

    private QueuePair rcQueuePair(int maxSendWr, int maxRecvWr, int maxSge, int maxInlineData) {
        return ForeignHandles.queuePair(
                pd,
                standInQp,
                QueuePairInit.of(QueuePairType.RC, cq)
                        .maxSendWr(maxSendWr)
                        .maxRecvWr(maxRecvWr)
                        .maxSendSge(maxSge)
                        .maxRecvSge(maxSge)
                        .maxInlineData(maxInlineData),
                QueuePairState.RTS);
    }

    @Override
    public void close() {
        for (NativeResource r : new NativeResource[] {mr, cq, pd, ctx}) {
            if (r != null && r.isOpen()) {
                r.close();
            }
        }
        if (ownsProvider) {
            p.close();
        }
    }
}
