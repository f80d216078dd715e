package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the data path's linkage is decided per provider, from the provider name libibverbs
 * keeps behind {@code ctx->device} ({@code verbs_device.ops->name}): ordinary downcalls for the
 * providers whose post is a system call (rxe, siw), critical ones for the others. The stand-in's
 * contexts get a device whose ops name the provider; the posts and polls then go through the
 * handle chosen for it. The guest tier checks a real rxe context.
 */
@NeedsNativeToolchain
class DataPathLinkageHostTest {
    private StandInProvider p;
    private Arena arena;

    @BeforeEach
    void open() {
        Assumptions.assumeTrue(
                InlineVerbs.CRITICAL, "-D" + InlineVerbs.CRITICAL_PROPERTY + "=false links every provider normally");
        p = StandInProvider.open();
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        if (p != null) {
            arena.close();
            p.close();
        }
    }

    /** A stand-in context whose device is a {@code verbs_device} of the provider {@code name}. */
    private MemorySegment contextOf(String name) {
        MemorySegment context = p.makeContext(true);
        MemorySegment ops = arena.allocate(64, 8);
        ops.set(ValueLayout.ADDRESS, 0, arena.allocateFrom(name));
        MemorySegment device = arena.allocate(ContextLayout.VERBS_DEVICE_OPS + 64, 8);
        device.set(ValueLayout.ADDRESS, ContextLayout.VERBS_DEVICE_OPS, ops);
        context.set(ValueLayout.ADDRESS, ContextLayout.DEVICE, device);
        return context;
    }

    @Test
    void providersWhosePostIsASystemCallGetOrdinaryDowncalls() {
        for (String provider : new String[] {"rxe", "siw"}) {
            MemorySegment context = contextOf(provider);
            assertEquals(provider, InlineVerbs.providerName(context));
            Context ctx = ForeignHandles.context(context, provider + "0");
            assertEquals(Optional.of(provider), ctx.providerName());
            assertFalse(ctx.criticalDataPath, provider);
            postAndPoll(ctx, context);
        }
    }

    @Test
    void otherProvidersAndUnknownOnesGetCriticalDowncalls() {
        MemorySegment mlx5 = contextOf("mlx5");
        Context ctx = ForeignHandles.context(mlx5, "mlx5_0");
        assertEquals(Optional.of("mlx5"), ctx.providerName());
        assertTrue(ctx.criticalDataPath);
        postAndPoll(ctx, mlx5);
        // the stand-in's own context has no device: a provider verbs4j cannot name
        Context standIn = ForeignHandles.context(p.context(), "standin0");
        try {
            assertEquals(Optional.empty(), standIn.providerName());
            assertTrue(standIn.criticalDataPath);
        } finally {
            standIn.close();
        }
        // a device without ops, or ops without a name
        MemorySegment noName = contextOf("x");
        MemorySegment device =
                noName.get(ValueLayout.ADDRESS, ContextLayout.DEVICE).reinterpret(ContextLayout.VERBS_DEVICE_OPS + 8);
        device.get(ValueLayout.ADDRESS, ContextLayout.VERBS_DEVICE_OPS)
                .reinterpret(8)
                .set(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
        assertEquals(null, InlineVerbs.providerName(noName));
        device.set(ValueLayout.ADDRESS, ContextLayout.VERBS_DEVICE_OPS, MemorySegment.NULL);
        assertEquals(null, InlineVerbs.providerName(noName));
        assertTrue(InlineVerbs.criticalDataPath(null));
        assertTrue(InlineVerbs.criticalDataPath("mlx5"));
        assertFalse(InlineVerbs.criticalDataPath("rxe"));
        assertFalse(InlineVerbs.criticalDataPath("siw"));
    }

    /** A send, a receive and a poll through the context's linkage reach the stand-in's ops; closes {@code ctx}. */
    private void postAndPoll(Context ctx, MemorySegment context) {
        StandInObjects o = new StandInObjects(p, arena, context, ctx);
        QueuePair qp = o.rcQueuePair(4, 4);
        long sends = p.calls(StandInProvider.Op.POST_SEND);
        long recvs = p.calls(StandInProvider.Op.POST_RECV);
        try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                ReceiveWorkRequests rwrs = new ReceiveWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(2)) {
            wrs.send(5).sge(o.mr, 0, 8).signaled();
            qp.postSend(wrs);
            rwrs.add(6).sge(o.mr, 64, 8);
            qp.postRecv(rwrs);
            assertEquals(1, o.cq.poll(wcs, 1, Duration.ofSeconds(10)));
            assertEquals(5, wcs.wrId(0));
        } finally {
            qp.close();
            o.close(); // the context too
        }
        assertEquals(sends + 1, p.calls(StandInProvider.Op.POST_SEND));
        assertEquals(recvs + 1, p.calls(StandInProvider.Op.POST_RECV));
    }
}
