package org.verbs4j;

import java.lang.foreign.MemorySegment;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.verbs4j.internal.CoreAccess;
import org.verbs4j.natives.ContextLayout;

/** The {@link CoreAccess} of this package (see there). Stateless; thread-safe. */
final class CoreAccessImpl extends CoreAccess {
    static {
        CoreAccess.install(new CoreAccessImpl());
    }

    private CoreAccessImpl() {}

    @Override
    public CompletionQueue nextEvent(
            CompletionChannel channel, MemorySegment cqOut, MemorySegment ctxOut, MemorySegment epollEvent) {
        return channel.nextEvent(cqOut, ctxOut, epollEvent);
    }

    @Override
    public Context borrowContext(MemorySegment ibvContext, String deviceName) {
        return new Context(ibvContext.reinterpret(ContextLayout.SIZE), deviceName, h -> {});
    }

    @Override
    public QueuePair createQueuePair(
            ProtectionDomain pd,
            QueuePairInit init,
            BiFunction<MemorySegment, MemorySegment, MemorySegment> create,
            Consumer<MemorySegment> destroy) {
        return pd.createQueuePair(init, create::apply, destroy::accept);
    }

    @Override
    public void modify(QueuePair qp, MemorySegment attr, int mask, QueuePairState to) {
        qp.modify(attr, mask, to);
    }

    @Override
    public Runnable reportLeaks(Object owner, String kind, Runnable release) {
        LeakReport r = new LeakReport(owner, kind, release);
        return r::closed;
    }

    @Override
    public long leaksReported() {
        return LeakReport.leaksReported();
    }
}
