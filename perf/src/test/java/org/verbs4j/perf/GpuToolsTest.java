package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.verbs4j.Context;
import org.verbs4j.ForeignHandles;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.VerbsException;
import org.verbs4j.gpudirect.CudaDriver;

/** verbs-perf's GPU pieces where there is no GPU: gpu-info prints the report, a GPU buffer says why it cannot be had. */
class GpuToolsTest {

    @Test
    void gpuInfoPrintsTheReport() {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        assertEquals(0, GpuInfoCommand.run(new PrintStream(b, true, StandardCharsets.UTF_8)));
        String out = b.toString(StandardCharsets.UTF_8);
        assertTrue(out.startsWith("GPUDirect RDMA capability report"), out);
        assertTrue(out.contains("What this means:"), out);
    }

    @Test
    void aGpuBufferWithoutADriverSaysWhy() {
        CudaDriver cuda = CudaDriver.system();
        assumeFalse(cuda.isAvailable(), "a CUDA driver is present here");
        try (Arena a = Arena.ofShared()) {
            Context ctx = ForeignHandles.context(a.allocate(4096, 64), "fake0");
            ProtectionDomain pd = ForeignHandles.protectionDomain(ctx, a.allocate(64, 64));
            VerbsException e = assertThrows(VerbsException.class, () -> GpuPerfBuffer.allocate(pd, 0, true, 1 << 20));
            assertTrue(e.getMessage().contains(cuda.unavailabilityCause().orElseThrow()), e.getMessage());
            pd.close();
            ctx.close();
        }
    }

    @Test
    void gpuInfoSubCommandExitsZero() {
        PrintStream saved = System.out;
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int rc;
        try {
            System.setOut(new PrintStream(b, true, StandardCharsets.UTF_8));
            rc = VerbsPerf.run(new String[] {"gpu-info"});
        } finally {
            System.setOut(saved);
        }
        assertEquals(0, rc);
        assertTrue(b.toString(StandardCharsets.UTF_8).startsWith("GPUDirect RDMA capability report"));
    }

    @Test
    void useCudaWithoutADriverFailsWithTheReason() {
        CudaDriver cuda = CudaDriver.system();
        assumeFalse(cuda.isAvailable(), "a CUDA driver is present here");
        PrintStream saved = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc;
        try {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            rc = VerbsPerf.runOne(
                    new String[] {"write_bw", "--use_cuda=0", "10.0.0.1"},
                    new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
        } finally {
            System.setErr(saved);
        }
        String text = err.toString(StandardCharsets.UTF_8);
        assertEquals(2, rc, text);
        assertTrue(text.contains(cuda.unavailabilityCause().orElseThrow()), text);
        assertTrue(!text.contains("\tat "), "no stack trace: " + text);
    }
}
