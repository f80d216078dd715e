package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * Wherever the real libcuda and a GPU exist: allocate, copy both ways, export a dma-buf. Elsewhere
 * the test is skipped with the driver's reason.
 */
class SystemCudaTest {

    @Test
    void realGpuMemoryRoundTripsAndExportsADmaBuf() {
        CudaDriver cuda = CudaDriver.system();
        assumeTrue(
                cuda.isAvailable(),
                () -> "no CUDA here: " + cuda.unavailabilityCause().orElse(""));
        assumeTrue(cuda.deviceCount() > 0, "the CUDA driver sees no GPU");
        try (GpuMemory gpu = GpuMemory.allocate(cuda, 0, 1 << 20);
                Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(1 << 20);
            for (long i = 0; i < out.byteSize(); i += 8) {
                out.set(ValueLayout.JAVA_LONG, i, i * 31);
            }
            gpu.copyFromHost(out, 0);
            MemorySegment back = a.allocate(1 << 20);
            gpu.copyToHost(0, back);
            assertEquals(-1, out.mismatch(back));
            if (cuda.device(0).dmaBufSupported()) {
                DmaBuf d = gpu.exportDmaBuf();
                assertTrue(d.fd() >= 0);
            }
        }
    }
}
