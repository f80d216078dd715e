package org.verbs4j.natives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;

/**
 * A handle that is not critical is linked on its first call, not when its class initialises (each
 * distinct function type costs the JDK a generated class), and from then on calls the function:
 * here {@code ibv_rate_to_mbps}, which nothing else in this module calls, first called by several
 * threads at once.
 */
class NativeBindingLazyTest {
    @Test
    void anExportedVerbIsLinkedOnItsFirstCallAndThenCallsTheFunction() throws Throwable {
        MethodHandle h = LibIbverbs.IBV_RATE_TO_MBPS; // LibIbverbs is initialised
        assertFalse(NativeBinding.linked(h), "ibv_rate_to_mbps was linked when LibIbverbs initialised");

        int threads = 8;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Integer>> calls = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                calls.add(pool.submit(() -> {
                    try {
                        return (int) h.invokeExact(Errno.captureSegment(), ibverbs_h.IBV_RATE_10_GBPS());
                    } catch (Throwable t) {
                        throw new AssertionError(t);
                    }
                }));
            }
            for (Future<Integer> f : calls) {
                assertEquals(10_000, f.get(60, TimeUnit.SECONDS), "ibv_rate_to_mbps(IBV_RATE_10_GBPS)");
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(NativeBinding.linked(h), "called, yet not linked");
        assertEquals(
                40_000, (int) h.invokeExact(Errno.captureSegment(), ibverbs_h.IBV_RATE_40_GBPS()), "IBV_RATE_40_GBPS");
    }

    /** The data path's critical handles are linked at once: their first post pays no link. */
    @Test
    void criticalHandlesAreLinkedAtOnce() throws Exception {
        Class.forName("org.verbs4j.natives.InlineVerbs", true, getClass().getClassLoader());
        List<NativeBinding> critical =
                NativeBinding.ALL.stream().filter(NativeBinding::critical).toList();
        assertFalse(critical.isEmpty(), "no critical binding recorded");
        for (NativeBinding b : critical) {
            assertTrue(NativeBinding.linked(b.handle()), b.name());
        }
    }
}
