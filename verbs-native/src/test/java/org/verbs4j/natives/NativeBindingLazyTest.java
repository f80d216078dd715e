package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.FunctionDescriptor;
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
 * distinct function type costs the JDK a generated class), and from then on calls the function;
 * the data path's critical handles are linked at once; and every lazy handle of the module links
 * (a descriptor the linker rejects fails here, not at its first call in an application).
 */
class NativeBindingLazyTest {
    /** A handle of {@code ibv_rate_to_mbps} made here, so that no other test can have called it first. */
    @Test
    void anExportedVerbIsLinkedOnItsFirstCallAndThenCallsTheFunction() throws Throwable {
        MethodHandle h = NativeBinding.symbol(
                NativeLibraries.ibverbsOrThrow(), "ibv_rate_to_mbps", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        NativeBinding.ALL.removeIf(b -> b.handle() == h); // not one of the module's bindings
        assertTrue(NativeBinding.lazy(h), "not critical, yet linked at once");
        assertFalse(NativeBinding.linked(h), "linked before its first call");

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

    /** Critical handles (the data path) are linked at once, the others through a lazy call site. */
    @Test
    void criticalHandlesAreLinkedAtOnceAndTheOthersLazily() throws Exception {
        FunctionDescriptorConformanceTest.loadBindingClasses();
        List<NativeBinding> bound =
                NativeBinding.ALL.stream().filter(b -> b.handle() != null).toList();
        assertTrue(bound.stream().anyMatch(NativeBinding::critical), "no critical binding recorded");
        assertTrue(bound.stream().anyMatch(b -> !b.critical()), "no lazy binding recorded");
        for (NativeBinding b : bound) {
            assertEquals(!b.critical(), NativeBinding.lazy(b.handle()), b.name() + ": lazy exactly when not critical");
            if (b.critical()) {
                assertTrue(NativeBinding.linked(b.handle()), b.name());
            }
        }
    }

    /** Every binding of the module links: the linker checks each descriptor here. */
    @Test
    void everyLazyHandleLinks() throws Exception {
        FunctionDescriptorConformanceTest.loadBindingClasses();
        NativeBinding.linkAll();
        for (NativeBinding b : NativeBinding.ALL) {
            if (b.handle() != null) {
                assertTrue(NativeBinding.linked(b.handle()), b.name());
            }
        }
        assertEquals(0, NativeBinding.linkAll(), "nothing left to link");
    }
}
