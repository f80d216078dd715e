package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.util.concurrent.atomic.AtomicInteger;
import org.verbs4j.Context;
import org.verbs4j.ForeignHandles;
import org.verbs4j.ProtectionDomain;

/**
 * Host-test fixture: a borrowed (fake) device context and protection domain over zeroed native
 * memory ({@link ForeignHandles}), and a {@link Registrar} that wraps memory under made-up keys
 * instead of calling ibv_reg_mr, counting its calls. Nothing native is ever called on them.
 */
final class FakeVerbs implements AutoCloseable {
    final Arena arena = Arena.ofShared();
    final Context context = ForeignHandles.context(arena.allocate(4096, 64), "fake0");
    final ProtectionDomain pd = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
    final AtomicInteger registrations = new AtomicInteger();
    final Registrar registrar = (pd, memory, access) -> {
        int n = registrations.incrementAndGet();
        return ForeignHandles.memoryRegion(pd, memory, 0x1000 + n, 0x2000 + n, access);
    };

    BufferPool.Builder pool() {
        return BufferPool.builder(pd).registrar(registrar);
    }

    @Override
    public void close() {
        pd.close();
        context.close();
        arena.close();
    }
}
