package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * Host tier: a call into the CUDA driver goes through an exactly typed downcall
 * ({@code invokeExact}), so it boxes no argument and builds no argument array: after warm-up a
 * call allocates nothing on the Java heap.
 */
@NeedsNativeToolchain
class CudaDriverCallTest {

    @Test
    void aDriverCallAllocatesNothingAfterWarmUp() throws Exception {
        // through reflection: the tests are compiled into module org.verbs4j.gpudirect, which does not read
        // java.management
        Object mx = Class.forName("java.lang.management.ManagementFactory")
                .getMethod("getThreadMXBean")
                .invoke(null);
        Method allocatedBytes =
                Class.forName("com.sun.management.ThreadMXBean").getMethod("getThreadAllocatedBytes", long.class);
        CudaDriver cuda = StandInCuda.driver();
        cuda.makeCurrent(0);
        long nowhere = 0x7f00_0000_1000L; // no allocation there (and outside Long's box cache)
        assertEquals(
                1, cuda.memFree(nowhere), "cuMemFree_v2 of an address it never returned: CUDA_ERROR_INVALID_VALUE");
        int sum = 0;
        for (int i = 0; i < 100_000; i++) { // warm-up, JIT
            sum += cuda.memFree(nowhere + i);
        }
        long tid = Thread.currentThread().threadId();
        long before = (long) allocatedBytes.invoke(mx, tid);
        for (int i = 0; i < 200_000; i++) {
            sum += cuda.memFree(nowhere + i);
        }
        long allocated = (long) allocatedBytes.invoke(mx, tid) - before;
        assertEquals(300_000, sum, "every call answered CUDA_ERROR_INVALID_VALUE");
        // the measurement itself may allocate a few bytes; a boxed argument or an argument array per call
        // would be >= 4.8 MB
        assertTrue(allocated < 64 * 1024, "200,000 cuMemFree_v2 calls allocated " + allocated + " bytes");
    }
}
